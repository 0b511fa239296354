"""dsh_testkit: what a harness developer tests with.

A wire-faithful mock DeepSeek with a prefix-cache simulator, cassettes with safe scrubbing, a
replay provider with strict request checks, golden transcripts, hypothesis strategies, a pytest
plugin and the ``dsh-testkit`` command. Submodules are imported lazily so that the pytest plugin
stays light at import.
"""

__all__: list[str] = []
