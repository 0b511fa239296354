"""Helpers shared by test modules (plain module: conftest.py keeps only fixtures and hooks)."""

from __future__ import annotations

from pathlib import Path

REFERENCE_LOGS = (
    Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "reference-logs"
)
"""Real logs of the reference harness, beside the checkout (absent on some machines)."""
