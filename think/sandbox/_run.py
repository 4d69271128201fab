"""The host's side of a sandboxed run: stage the files, start the launcher, serve the
program's requests, collect what it left.

A run is one short-lived process tree (`python -I -S _helper.py`, see that module for the
walls); the caller's process only writes a staging directory, reads pipes and answers
requests, so a program can never reach the caller's memory, files or credentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from think.sandbox._limits import FileChange, Limits, SandboxResult

Language = Literal["python", "bash"]
RequestHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""The host's answer to one request of the program (see `think.sandbox` for the channel)."""

HELPER = Path(__file__).with_name("_helper.py")
GUEST_LIB = Path(__file__).with_name("_guest")
PROGRAM_DIR = "/run/think/program"
GUEST_LIB_DIR = "/run/think/lib"
MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""The longest line the program may send over the channel."""
GRACE_SECONDS = 10.0
"""How long past the wall time the host waits for the init to report before it kills the
whole process tree itself (the init copying `/work` out takes part of it)."""


class SandboxError(Exception):
    """The sandbox could not be set up on this machine (no user namespaces, a missing
    interpreter): the program never ran. The message says what failed."""


class SandboxPathError(ValueError):
    """An input file's path is not a plain relative path inside `/work`."""


def python_executable() -> str:
    """The interpreter the sandbox runs Python with: this process's base interpreter (a
    virtualenv's `python` is a symlink into a tree the sandbox would not see)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


def _runtime_mounts() -> dict[str, str]:
    """The read-only binds the interpreter needs besides the system's `/usr` and `/lib`."""
    prefix = os.path.realpath(sys.base_prefix)
    mounts = {}
    if not prefix.startswith(("/usr/", "/bin/", "/lib")) and prefix != "/usr":
        mounts[prefix] = prefix
    return mounts


def _relative(path: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or not pure.parts or ".." in pure.parts or "\x00" in path:
        raise SandboxPathError(f"an input file's path must be relative to /work: {path!r}")
    return str(pure)


def _argv(code: str | None, language: Language, argv: Sequence[str] | None) -> list[str]:
    if argv is not None:
        return list(argv)
    if language == "python":
        return [python_executable(), "-u", f"{PROGRAM_DIR}/main.py"]
    return ["/bin/bash", f"{PROGRAM_DIR}/main.sh"]


async def run(
    code: str | None = None,
    *,
    language: Language = "python",
    argv: Sequence[str] | None = None,
    files: Mapping[str, bytes] | None = None,
    limits: Limits | None = None,
    mounts: Mapping[str, Path] | None = None,
    env: Mapping[str, str] | None = None,
    on_request: RequestHandler | None = None,
) -> SandboxResult:
    """Run `code` (Python or bash) or `argv` in a fresh sandbox and answer what it did.

    - `files`: the contents of `/work` (the program's cwd and `$HOME`), by relative path.
    - `mounts`: host directories shown read-only at the given absolute paths inside (a
      skill's files at `/skill`, say). Python's runtime and `/usr` are always shown.
    - `argv`: run this instead of `code` (its `argv[0]` an absolute path inside; the
      interpreter is `python_executable()`).
    - `env`: added to the program's otherwise empty environment.
    - `on_request`: serve the program's requests (the channel, see `think.sandbox`).

    A program that fails, is killed or overflows answers normally (`exit_code`, `killed`);
    only a sandbox that cannot start raises `SandboxError`. Cancelling the awaiting task
    kills the run.
    """
    limits = limits or Limits()
    staging = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="think-sandbox-"))
    host_sock: socket.socket | None = None
    guest_sock: socket.socket | None = None
    try:
        if on_request is not None:
            host_sock, guest_sock = socket.socketpair()
        config = _config(
            staging,
            argv=_argv(code, language, argv),
            limits=limits,
            mounts=mounts or {},
            env=env or {},
            channel_fd=guest_sock.fileno() if guest_sock else None,
        )
        await asyncio.to_thread(_stage, staging, config, code, language, files or {})
        await _launch(staging, limits, host_sock, guest_sock, on_request)
        return await asyncio.to_thread(_collect, staging, files or {})
    finally:
        for sock in (host_sock, guest_sock):
            if sock is not None:
                sock.close()
        await asyncio.to_thread(shutil.rmtree, staging, True)


def _config(
    staging: Path,
    *,
    argv: list[str],
    limits: Limits,
    mounts: Mapping[str, Path],
    env: Mapping[str, str],
    channel_fd: int | None,
) -> dict[str, Any]:
    """What the launcher reads (`_helper.py`): paths, binds, the program, its walls."""
    all_mounts = {
        **_runtime_mounts(),
        PROGRAM_DIR: str(staging / "program"),
        GUEST_LIB_DIR: str(GUEST_LIB),
    }
    all_mounts.update({inside: str(outside) for inside, outside in mounts.items()})
    program_env = {
        "PATH": f"{os.path.dirname(python_executable())}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/work",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": GUEST_LIB_DIR,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        # glibc reserves 64 MiB of address space per thread's malloc arena: under RLIMIT_AS a
        # program with a dozen threads would run out of memory it never uses.
        "MALLOC_ARENA_MAX": "2",
        **env,
    }
    if channel_fd is not None:
        program_env["THINK_HOST_FD"] = "3"
    return {
        "root": str(staging / "root"),
        "input": str(staging / "in"),
        "output": str(staging / "out"),
        "mounts": all_mounts,
        "argv": argv,
        "env": program_env,
        "limits": limits.model_dump(),
        "channel_fd": channel_fd,
    }


def _stage(
    staging: Path,
    config: dict[str, Any],
    code: str | None,
    language: Language,
    files: Mapping[str, bytes],
) -> None:
    """The staging directory: private to the caller's uid (the launcher runs as it), so the
    workspace's copy is never readable by another user of the host."""
    staging.chmod(0o700)
    inputs = staging / "in"
    inputs.mkdir()
    for name, data in files.items():
        target = inputs / _relative(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    program = staging / "program"
    program.mkdir(mode=0o755)
    if code is not None:
        main = program / ("main.py" if language == "python" else "main.sh")
        main.write_text(code)
        main.chmod(0o644)
    (staging / "out").mkdir()
    (staging / "root").mkdir()
    (staging / "config.json").write_text(json.dumps(config))


async def _launch(
    staging: Path,
    limits: Limits,
    host_sock: socket.socket | None,
    guest_sock: socket.socket | None,
    on_request: RequestHandler | None,
) -> None:
    process = await asyncio.create_subprocess_exec(
        python_executable(),
        "-I",
        "-S",
        str(HELPER),
        str(staging / "config.json"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        pass_fds=(guest_sock.fileno(),) if guest_sock else (),
        start_new_session=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    if guest_sock is not None:
        guest_sock.close()
    serving: asyncio.Task[None] | None = None
    if host_sock is not None and on_request is not None:
        serving = asyncio.create_task(serve_channel(host_sock, on_request))
    try:
        async with asyncio.timeout(limits.wall_seconds + GRACE_SECONDS):
            _, stderr = await process.communicate()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        raise
    finally:
        if serving is not None:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        if host_sock is not None:
            host_sock.close()
    if not (staging / "out" / "result.json").exists():
        message = stderr.decode(errors="replace").strip()[-2000:]
        raise SandboxError(
            f"the sandbox's init ended without a result: {message or process.returncode}"
        )


def _collect(staging: Path, given: Mapping[str, bytes]) -> SandboxResult:
    out = staging / "out"
    report: dict[str, Any] = json.loads((out / "result.json").read_text())
    if "setup_error" in report:
        raise SandboxError(
            f"the sandbox could not be set up: {report['setup_error']} (it needs unprivileged "
            "user namespaces: see docs/code-execution.md)"
        )
    files: dict[str, bytes] = {}
    root = out / "files"
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    before = {_relative(k): v for k, v in given.items()}
    changes = [
        FileChange(path=p, kind="created" if p not in before else "modified", bytes=len(data))
        for p, data in sorted(files.items())
        if before.get(p) != data
    ]
    changes += [FileChange(path=p, kind="deleted") for p in sorted(before) if p not in files]
    return SandboxResult(
        exit_code=report["exit_code"],
        stdout=(out / "stdout").read_bytes().decode(errors="replace"),
        stderr=(out / "stderr").read_bytes().decode(errors="replace"),
        stdout_truncated=report["stdout_truncated"],
        stderr_truncated=report["stderr_truncated"],
        killed=report["reason"],
        files=files,
        changes=changes,
        refused=report["refused"],
    )


async def serve_channel(sock: socket.socket, on_request: RequestHandler) -> None:
    """Answer the program's requests until it closes its end: one JSON object a line each
    way, `{"id": n, "request": {...}}` in, `{"id": n, "response": {...}}` or
    `{"id": n, "error": {"type": ..., "message": ...}}` out. Requests run concurrently (a
    program may `asyncio.gather` several); a handler's exception becomes an `error` line."""
    reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_REQUEST_BYTES)
    lock = asyncio.Lock()
    tasks: set[asyncio.Task[None]] = set()

    async def answer(ident: Any, request: Any) -> None:
        reply: dict[str, Any]
        try:
            if not isinstance(request, dict):
                raise ValueError("a request must be a JSON object")
            reply = {"id": ident, "response": await on_request(request)}
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the program sees every failure of the host's handler
            reply = {"id": ident, "error": {"type": type(exc).__name__, "message": str(exc)}}
        async with lock:
            writer.write(json.dumps(reply).encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await writer.drain()

    try:
        while True:
            try:
                line = await reader.readline()
            except (ValueError, ConnectionError):
                break  # a line past the limit, or the program gone
            if not line:
                break
            try:
                message = json.loads(line)
                ident, request = message["id"], message["request"]
            except (ValueError, KeyError, TypeError):
                message = {
                    "id": None,
                    "error": {"type": "BadRequest", "message": "not a request line"},
                }
                async with lock:
                    writer.write(json.dumps(message).encode() + b"\n")
                continue
            task = asyncio.create_task(answer(ident, request))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        for task in tasks:
            task.cancel()
        writer.close()
