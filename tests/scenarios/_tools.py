"""The tools scenarios give their agents: a small fake working directory.

Model-visible output never holds an absolute path (replay compares requests byte for byte, and
the working directory differs between machines); the absolute path of a written file goes in
the result's ``meta``, which is logged but not sent, so the goldens show ``{{cwd}}`` there.
"""

from __future__ import annotations

import os
from typing import Any

from dsh_core import ToolContext, ToolOutput, tool

FILES: dict[str, str] = {
    "a.txt": "alpha",
    "b.txt": "beta",
    "c.txt": "gamma",
    "notes.txt": "buy milk\ncall the vet",
}
"""What ``read`` finds; anything else does not exist."""

_PATH = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


@tool(parameters=_PATH, concurrency_safe=True)
async def read(args: dict[str, Any], ctx: ToolContext) -> str:
    """Read a text file from the working directory."""
    path = args["path"]
    if path not in FILES:
        raise FileNotFoundError(f"no such file: {path}")
    return FILES[path]


@tool(
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path", "text"],
    }
)
async def write(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
    """Write a text file in the working directory (runs alone: an exclusive tool)."""
    text = args["text"]
    return ToolOutput(
        content=f"wrote {len(text)} characters to {args['path']}",
        meta={"path": os.path.join(os.getcwd(), args["path"])},
    )


@tool(parameters={"type": "object", "properties": {}}, concurrency_safe=True)
async def list_files(args: dict[str, Any], ctx: ToolContext) -> str:
    """List the files in the working directory."""
    return "\n".join(sorted(FILES))
