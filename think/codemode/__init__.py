"""Code mode: the `execute` tool, whose input is a Python program that calls the agent's
tools as `await tools.<name>(...)` (`Think.code_mode = True`).

The program runs in a child interpreter per run (`run_program`), never in the worker's
process; each call it makes comes back to the host as a request, which the engine runs as a
durable step through the normal tool path (`think.engine`, "Code mode" in
docs/code-execution.md). This package is the part that knows nothing of turns: the tool's
declaration, the runtime the program imports, and the conversation with the child.
"""

from __future__ import annotations

from think.codemode._host import CallAnswer, Paused, ProgramResult, run_program
from think.codemode._tool import (
    EXECUTE,
    MAX_INNER_CALLS,
    PROGRAM_TIMEOUT_SECONDS,
    execute_tool,
    inner_call_id,
    is_inner_call_id,
)

__all__ = [
    "EXECUTE",
    "MAX_INNER_CALLS",
    "PROGRAM_TIMEOUT_SECONDS",
    "CallAnswer",
    "Paused",
    "ProgramResult",
    "execute_tool",
    "inner_call_id",
    "is_inner_call_id",
    "run_program",
]
