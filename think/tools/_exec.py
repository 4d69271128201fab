"""`exec` and `run_skill_script`: programs the model writes (or a skill ships), run in the
sandbox (`think.sandbox`) over a copy of the conversation's workspace.

`Think.exec_tools = True` (with `workspace_tools`) adds `exec`, and `run_skill_script` when
the agent has skills. Each call runs in its tool activity, as every tool does, and the
program in a sandboxed process tree of its own, never in the worker's process. What the
program leaves in `/work` is saved back through `Workspace.apply_once` with the call's
idempotency key, in one transaction with the answer: an attempt retried after a crash runs
the program again (it has no effect outside its sandbox) but saves nothing twice and answers
what the first attempt answered. A write-back over the workspace's quota saves nothing and
says so. A symlink, fifo or device the program leaves is never followed or saved: it is
listed as refused. There is no network in the sandbox: an agent with `fetch_tools` lets the
program fetch what `fetch_url` may (its allowlist, its SSRF guard, its audit), by asking the
worker over the sandbox's channel (`think_host.fetch(url)`), never by a socket of its own.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from think.exceptions import ToolError
from think.sandbox import (
    Limits,
    RequestHandler,
    SandboxError,
    SandboxResult,
    python_executable,
    run,
)
from think.storage import (
    Conn,
    Workspace,
    WorkspacePathError,
    WorkspaceQuotaError,
    delete_files,
    workspace_path,
    write_file,
)
from think.tools._fetch import FetchTools
from think.tools._tool import Tool, ToolContext, tool
from think.tools._workspace import current_workspace
from think.tools.skills import SkillSource, _inside, load_catalog

EXEC = "exec"
RUN_SKILL_SCRIPT = "run_skill_script"
DEFAULT_EXEC_SECONDS = 30.0
"""The wall time of a run when the model names none (and of a skill script, as the spec's)."""
MAX_EXEC_SECONDS = 240.0
"""The longest a model may ask for: under the tool's own 300 s timeout."""
OUTPUT_BYTES = 32 * 1024
"""What the model sees of stdout, and of stderr."""
MAX_INPUT_FILE_BYTES = 16 * 1024 * 1024
"""Workspace files larger than this are left out of the sandbox's copy (and listed)."""


def exec_limits(timeout: float | None, workspace: Workspace | None = None) -> Limits:
    """The sandbox's walls for one call: the model's timeout (clamped), CPU as long, the
    workspace's file limit as the largest file the program may write."""
    seconds = DEFAULT_EXEC_SECONDS if timeout is None else float(timeout)
    if not seconds > 0:
        raise ToolError(f"timeout must be a positive number of seconds, not {timeout!r}")
    seconds = min(seconds, MAX_EXEC_SECONDS)
    file_bytes = MAX_INPUT_FILE_BYTES
    if workspace is not None and workspace.limits.max_file_bytes:
        file_bytes = workspace.limits.max_file_bytes
    return Limits(
        wall_seconds=seconds,
        # A second past the wall time: a busy loop ends as `timeout`, the clearer reason.
        cpu_seconds=math.ceil(seconds) + 1,
        output_bytes=OUTPUT_BYTES,
        file_bytes=file_bytes,
    )


async def _inputs(workspace: Workspace) -> tuple[dict[str, bytes], list[str]]:
    found = await workspace.read_all("", max_size=MAX_INPUT_FILE_BYTES)
    files = {f.path: f.data for f in found}
    skipped = [e.path for e in await workspace.list("") if e.path not in files]
    return files, skipped


def _answer(result: SandboxResult, skipped: list[str]) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "exit_code": result.exit_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "files_changed": [
            {"path": c.path, "change": c.kind, "bytes": c.bytes} for c in result.changes
        ],
    }
    if result.killed is not None:
        answer["killed"] = {
            "timeout": "the program ran past its time limit and was stopped",
            "cpu_limit": "the program used up its CPU time and was stopped",
            "output_limit": "the program printed more than the output limit and was stopped",
            "killed": "the program was killed (out of memory, most likely)",
        }[result.killed]
    if result.stdout_truncated or result.stderr_truncated:
        answer["output_truncated"] = f"only the first {OUTPUT_BYTES} bytes of each are shown"
    if result.refused:
        answer["not_saved"] = [f"{r}: only regular files are saved" for r in result.refused]
    if skipped:
        answer["not_copied_in"] = [f"{p}: over {MAX_INPUT_FILE_BYTES} bytes" for p in skipped]
    return answer


async def save_back(
    workspace: Workspace, key: str, result: SandboxResult, answer: dict[str, Any]
) -> dict[str, Any]:
    """Apply the run's file changes and record `answer`, once for `key` (one transaction)."""
    unsaved: list[str] = []
    changes = []
    for change in result.changes:
        try:
            changes.append((workspace_path(change.path), change))
        except WorkspacePathError as exc:
            unsaved.append(f"{change.path}: {exc}")
    if unsaved:
        answer = {**answer, "not_saved": [*answer.get("not_saved", []), *unsaved]}

    async def apply(conn: Conn) -> dict[str, Any]:
        for path, change in changes:
            if change.kind == "deleted":
                await delete_files(conn, workspace.conversation_uid, path)
            else:
                data = result.files[change.path]
                await write_file(
                    conn, workspace.conversation_uid, path, data, limits=workspace.limits
                )
        return answer

    try:
        return await workspace.apply_once(key, apply)
    except WorkspaceQuotaError as exc:
        # Rolled back and not recorded: nothing of the run's files is saved.
        return {**answer, "files_changed": [], "files_not_saved": str(exc)}


async def _run_saved(
    ctx: ToolContext,
    *,
    code: str | None = None,
    language: Literal["python", "bash"] = "python",
    argv: list[str] | None = None,
    seconds: float | None,
    mounts: dict[str, Path] | None = None,
    fetch: FetchTools | None = None,
) -> dict[str, Any]:
    workspace = await current_workspace()
    files, skipped = await _inputs(workspace)
    try:
        result = await run(
            code,
            language=language,
            argv=argv,
            files=files,
            limits=exec_limits(seconds, workspace),
            mounts=mounts,
            on_request=None if fetch is None else _fetcher(fetch, ctx),
        )
    except SandboxError as exc:
        raise ToolError(f"code execution is unavailable on this worker: {exc}") from None
    return await save_back(workspace, ctx.idempotency_key, result, _answer(result, skipped))


def _fetcher(fetch: FetchTools, ctx: ToolContext) -> RequestHandler:
    """The program's one way to the network: `{"fetch": url}`, answered by `fetch_url`."""

    async def on_request(request: dict[str, Any]) -> dict[str, Any]:
        url = request.get("fetch")
        if not isinstance(url, str) or set(request) != {"fetch"}:
            raise ValueError('the worker answers {"fetch": "<url>"} only')
        return await fetch.fetch_url(url, response="text", ctx=ctx)

    return on_request


@tool(name=EXEC)
async def exec_tool(
    code: str,
    ctx: ToolContext,
    language: Literal["python", "bash"] = "python",
    timeout: float | None = None,  # noqa: ASYNC109 (the model's name for the program's wall time)
) -> dict[str, Any]:
    """Run a Python program or a bash script over a copy of the workspace's files (the current
    directory), and save back the files it creates, changes or deletes there. No network;
    limits on time, memory, output and file size. Answers stdout, stderr, the exit code and
    the files changed.

    Args:
        code: The program's source.
        language: "python" (Python 3, standard library only) or "bash".
        timeout: Seconds before the program is stopped (default 30, at most 240).
    """
    return await _run_saved(ctx, code=code, language=language, seconds=timeout)


def exec_tool_for(fetch: FetchTools | None) -> Tool:
    """`exec` for an agent: with `fetch_tools`, the program may also fetch what `fetch_url`
    may, through the worker (`import think_host; think_host.fetch(url)`)."""
    if fetch is None or not fetch.allowlist:
        return exec_tool

    async def exec_with_fetch(
        code: str,
        ctx: ToolContext,
        language: Literal["python", "bash"] = "python",
        timeout: float | None = None,  # noqa: ASYNC109 (the model's name for the program's wall time)
    ) -> dict[str, Any]:
        return await _run_saved(ctx, code=code, language=language, seconds=timeout, fetch=fetch)

    exec_with_fetch.__doc__ = (exec_tool.fn.__doc__ or "").replace(
        "No network;",
        "No network, but Python may call `import think_host; think_host.fetch(url)` for a URL "
        f"on the allowlist ({', '.join(fetch.allowlist)}): it answers like fetch_url;",
    )
    return Tool(exec_with_fetch, name=EXEC)


SCRIPT_DIR = "/skill"
"""Where a skill's files appear, read-only, for `run_skill_script`."""


def _stage(contents: dict[str, bytes]) -> Path:
    """A skill's files in a fresh directory the sandbox binds read-only (world-readable: the
    program runs as an unprivileged user of its own)."""
    staged = Path(tempfile.mkdtemp(prefix="think-skill-"))
    staged.chmod(0o755)
    for relative, data in contents.items():
        target = staged / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o644)
    for directory in staged.rglob("*"):
        if directory.is_dir():
            directory.chmod(0o755)
    return staged


def skill_script_tool(sources: Callable[[], Sequence[SkillSource]]) -> Tool:
    """`run_skill_script` over the agent's skill sources (`sources()`, its `get_skills`)."""

    async def run_skill_script(
        skill: str, script: str, ctx: ToolContext, args: list[str] | None = None
    ) -> dict[str, Any]:
        """Run a script a skill ships (in its scripts/ directory) in the sandbox, with the
        skill's files under /skill (read-only) and a copy of the workspace as the current
        directory; files it writes there are saved back. 30 s limit, no network.

        Args:
            skill: The skill's name.
            script: The script's path inside the skill, e.g. scripts/convert.py (or its name
                in scripts/).
            args: Command-line arguments for the script.
        """
        srcs: list[SkillSource] = list(sources())
        found, source = (await load_catalog(srcs)).get(skill)
        relative = _inside(script if "/" in script else f"scripts/{script}")
        if relative not in found.resources:
            scripts = [r for r in found.resources if r.startswith("scripts/")]
            raise ToolError(
                f"skill {skill!r} has no script {relative!r}; its scripts: "
                f"{', '.join(scripts) or 'none'}"
            )
        interpreters = {".py": python_executable(), ".sh": "/bin/bash"}
        interpreter = interpreters.get(Path(relative).suffix)
        if interpreter is None:
            raise ToolError(f"{relative!r} is neither a .py nor a .sh script")
        contents: dict[str, bytes] = {}
        for resource in found.resources:
            read = await source.resource(found.directory, resource)
            if read is not None:
                contents[_inside(resource)] = read[0]
        staged = await asyncio.to_thread(_stage, contents)
        try:
            argv = [interpreter, f"{SCRIPT_DIR}/{relative}", *(args or [])]
            return await _run_saved(
                ctx, argv=argv, seconds=DEFAULT_EXEC_SECONDS, mounts={SCRIPT_DIR: staged}
            )
        finally:
            await asyncio.to_thread(shutil.rmtree, staged, True)

    return Tool(run_skill_script, name=RUN_SKILL_SCRIPT)
