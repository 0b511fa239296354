"""``dsh-testkit calibrate``: how far the prefix-cache simulator agrees with the live API.

Run over session logs that carry live usage, it rebuilds each request, renders it to the wire,
runs the requests in order through a fresh simulator and compares hit tokens, the unit reused
and prompt tokens with what the API reported. See :func:`calibrate`.
"""

from ._calibrate import calibrate
from ._values import (
    CalibrationError,
    CalibrationReport,
    CalibrationSettings,
    CalibrationSummary,
    RequestCalibration,
    Scope,
    SkippedLog,
)

__all__ = [
    "CalibrationError",
    "CalibrationReport",
    "CalibrationSettings",
    "CalibrationSummary",
    "RequestCalibration",
    "Scope",
    "SkippedLog",
    "calibrate",
]
