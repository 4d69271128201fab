"""The sandbox: run untrusted Python or bash in a fresh, throwaway world, and get back its
output, exit status and files.

    from think.sandbox import Limits, run
    result = await run("print(open('data.csv').read().upper())",
                       files={"data.csv": b"a,b\n"}, limits=Limits(wall_seconds=10))
    result.stdout, result.exit_code, result.killed, result.changes, result.files

Each run is its own process tree in new user, mount, pid, network, IPC and UTS namespaces
(no root, no setuid helper, nothing to install: Linux's unprivileged user namespaces). The
program sees a tmpfs `/work` holding a copy of `files` (its cwd), a tmpfs `/tmp`, the system's
`/usr` and `/lib` and Python's runtime read-only, `/dev/null`, `/dev/zero` and
`/dev/urandom`; no `/etc`, `/home`, `/proc`, host `/tmp` or environment; a network with
only a down loopback; no capability; the rlimits of `Limits`. After it ends (or is ended),
`/work`'s regular files come back as `SandboxResult.files`; the caller decides what to save.
docs/code-execution.md states the threat model and what this does not protect against.

**The channel to the host.** With `on_request`, the program gets a socket on fd 3
(`$THINK_HOST_FD`) and the module `think_host` on its path (stdlib only):

    import think_host
    answer = think_host.request({"tool": "get_weather", "args": {"city": "Paris"}})
    answer = await think_host.arequest({...})        # asyncio; several may be gathered

Each request is one line of JSON, `{"id": n, "request": {...}}`; the host calls
`await on_request(request)` and writes back `{"id": n, "response": {...}}`, or `{"id": n,
"error": {"type": ..., "message": ...}}` when the handler raised (the program gets
`think_host.HostError`). The socket is the program's only way out, so whatever the host
does for it (a tool call, a durable step) happens in the host's process, with the host's
credentials never inside. `GUEST_LIB` is the directory of `think_host` (a caller that
writes a prelude for its programs can read it there).
"""

from think.sandbox._limits import FileChange, FileChangeKind, KillReason, Limits, SandboxResult
from think.sandbox._run import (
    GUEST_LIB,
    Language,
    RequestHandler,
    SandboxError,
    SandboxPathError,
    python_executable,
    run,
    serve_channel,
)

__all__ = [
    "GUEST_LIB",
    "FileChange",
    "FileChangeKind",
    "KillReason",
    "Language",
    "Limits",
    "RequestHandler",
    "SandboxError",
    "SandboxPathError",
    "SandboxResult",
    "python_executable",
    "run",
    "serve_channel",
]
