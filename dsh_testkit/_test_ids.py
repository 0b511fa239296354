"""How a pytest test is named in the files the kit keeps for it: its cassette, its goldens,
its cache baseline (``<module>/<Class.test[param]>``), so one test's files line up.

Reads only the node's id and parameters (duck-typed: no pytest import), so every room that
names files after a test (cassettes, golden, the plugin) can use it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["name_of_test"]


def name_of_test(node: Any) -> str:
    """``Class.test_name[param]`` from a node id (the part after the module).

    The async runner's parameter is left out (anyio parametrizes every test with
    ``anyio_backend``): the same test under pytest-asyncio or anyio uses the same cassette.
    """
    name = ".".join(str(node.nodeid).split("::")[1:]) or str(node.name)
    params = getattr(getattr(node, "callspec", None), "params", {})
    backend = params.get("anyio_backend")
    if backend is not None and name.endswith("]") and "[" in name:
        head, _, ids = name[:-1].partition("[")
        backend_id = backend if isinstance(backend, str) else str(backend[0])
        parts = ids.split("-")
        if backend_id in parts:
            parts.remove(backend_id)
        name = f"{head}[{'-'.join(parts)}]" if parts else head
    return name
