"""dsh_testkit: what a harness developer tests with.

A wire-faithful mock DeepSeek with a prefix-cache simulator, cassettes with safe scrubbing, a
replay provider with strict request checks, golden transcripts, hypothesis strategies, a pytest
plugin and the ``dsh-testkit`` command. Submodules are imported lazily so that the pytest plugin
stays light at import.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._errors import TestkitError

__all__ = ["TestkitError"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing the pytest plugin (a submodule) does not import dsh_core.
    if name == "TestkitError":
        from ._errors import TestkitError

        return TestkitError
    raise AttributeError(f"module 'dsh_testkit' has no attribute {name!r}")
