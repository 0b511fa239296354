"""The repository's own tooling (not part of the installed packages): recording the committed
cassettes and the OpenTelemetry samples. Run from the repository root, e.g. ``python -m
tools.record_cassettes record-mock cassettes`` or ``python -m tools.otel_samples``."""
