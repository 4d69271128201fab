"""The `execute` tool's declaration: what the model sees. It never runs as a plain tool: the
tool-call activity recognises it and runs the program (`think.engine`)."""

from __future__ import annotations

from think.exceptions import ToolError
from think.tools import Tool

EXECUTE = "execute"
"""The tool's name (API-next, "Code execution")."""
MAX_INNER_CALLS = 50
"""Tool calls one program may make; the next one raises in the program."""
PROGRAM_TIMEOUT_SECONDS = 120.0
"""Wall time of one run of a program (its tool calls included), per activity attempt."""

_SEPARATOR = ":"


def inner_call_id(execute_call_id: str, seq: int) -> str:
    """The tool call id of a program's call number `seq`: `<execute call id>:<seq>`."""
    return f"{execute_call_id}{_SEPARATOR}{seq}"


def is_inner_call_id(tool_call_id: str) -> bool:
    """Whether a tool part is a call made by a program (not by the model)."""
    head, sep, tail = tool_call_id.rpartition(_SEPARATOR)
    return bool(head and sep and tail.isdigit())


async def execute(code: str) -> str:
    """Run a Python program that calls your tools as async functions and returns a result.

    Write top-level `await`: `weather = await tools.get_weather(city="Paris")`. Every tool
    you have is `tools.<name>(**input)`; `describe()` lists them with their JSON schemas. A
    failed call raises `ToolCallError` (catch it to go on). The value of the last expression
    (or a `return`) is the result you get back, with what the program printed. Use it to
    chain or transform many tool calls in one step; the program has no network and no files
    but its own scratch directory.

    Args:
        code: the Python program (top-level await allowed).
    """
    raise ToolError("execute runs only inside a turn, on a worker")


def execute_tool() -> Tool:
    """The `execute` tool: an activity of its own (a heartbeat timeout: the framework beats
    every second while the program runs, so a dead worker's run is retried elsewhere within
    10 s), so a program that runs long never holds a workflow task."""
    return Tool(execute, name=EXECUTE, timeout=PROGRAM_TIMEOUT_SECONDS * 5, heartbeat_timeout=10)
