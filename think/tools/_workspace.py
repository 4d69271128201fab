"""The workspace tools, with Think's names: `read`, `ls`, `find`, `grep`, `write`, `edit` and
`delete`, over the workspace of the conversation a turn serves (`think.storage.Workspace`).

`Think.workspace_tools = True` adds them. Each runs in the tool activity of its call; the
writes (`write`, `edit`, `delete`) go through `Workspace.apply_once` with the call's
idempotency key, so an attempt retried after a crash answers what the first one did.

`read` numbers a text file's lines; an image or a PDF comes back as a media result
(`media_result`) that the model step hands to the model as the file itself
(`think.models._transcript`), so a multimodal model sees the picture.
"""

from __future__ import annotations

import base64
from typing import Any

from think._current import BOUND
from think.exceptions import ToolError, UserError
from think.storage import (
    Conn,
    Workspace,
    WorkspaceLimits,
    WorkspacePathError,
    WorkspaceQuotaError,
    delete_files,
    lock_for_write,
    read_file,
    workspace_path,
    write_file,
)
from think.tools._glob import glob_match, glob_regex
from think.tools._match import Deadline, LinePattern, check_length, off_loop
from think.tools._tool import Tool, ToolContext, tool

MAX_READ_LINES = 2000
"""Lines `read` returns by default."""
MAX_LINE_CHARS = 2000
"""Characters of one line `read` shows; longer lines are cut."""
MAX_MEDIA_BYTES = 10 * 1024 * 1024
"""The largest image or PDF `read` passes to the model."""
MAX_GREP_RESULTS = 200
MAX_GREP_BYTES = 5 * 1024 * 1024
"""Larger files are left out of `grep`."""


async def current_workspace() -> Workspace:
    """The workspace of the conversation whose turn this activity serves, bounded by the
    deployment's limits (`THINK_WORKSPACE_MAX_BYTES` and the others)."""
    binding = BOUND.get()
    if binding is None:
        raise UserError("the workspace tools run only inside a turn, on a worker")
    turn = await binding.turn()
    limits = WorkspaceLimits.from_settings(binding.service.settings)
    return Workspace(binding.service.store.db, turn.conversation_uid, limits)


def media_result(path: str, media_type: str, data: bytes) -> dict[str, Any]:
    """What `read` answers for an image or a PDF: the model step turns it into the file."""
    encoded = base64.b64encode(data).decode()
    return {
        "type": "media",
        "path": path,
        "mediaType": media_type,
        "bytes": len(data),
        "url": f"data:{media_type};base64,{encoded}",
    }


def is_model_media(media_type: str) -> bool:
    """A type `read` shows the model as itself: raster images and PDFs (an SVG is text)."""
    return (
        media_type.startswith("image/") and media_type != "image/svg+xml"
    ) or media_type == "application/pdf"


def _checked(path: str, *, allow_root: bool = False) -> str:
    try:
        return workspace_path(path, allow_root=allow_root)
    except WorkspacePathError as exc:
        raise ToolError(str(exc)) from None


def _is_text(media_type: str, data: bytes) -> bool:
    if media_type.startswith("text/") or media_type in (
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "image/svg+xml",
    ):
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in data


@tool(name="read")
async def read_tool(path: str, offset: int = 1, limit: int = MAX_READ_LINES) -> Any:
    """Read a file of the workspace: text with line numbers; an image or a PDF is shown to you
    as itself.

    Args:
        path: The file, relative to the workspace (or under /workspace/).
        offset: The first line to show, from 1.
        limit: How many lines to show.
    """
    clean = _checked(path)
    if offset < 1 or limit < 1:
        raise ToolError("offset and limit must be 1 or more")
    found = await (await current_workspace()).read(clean)
    if found is None:
        raise ToolError(f"there is no file {clean!r} in the workspace; `ls` or `find` lists them")
    if is_model_media(found.media_type):
        if found.size > MAX_MEDIA_BYTES:
            raise ToolError(f"{clean!r} is {found.size} bytes, over the {MAX_MEDIA_BYTES} to show")
        return media_result(clean, found.media_type, found.data)
    if not _is_text(found.media_type, found.data):
        raise ToolError(
            f"{clean!r} is binary ({found.media_type}, {found.size} bytes) and cannot be shown "
            "as text"
        )
    lines = found.text().splitlines()
    if not lines:
        return f"{clean} is empty."
    shown = lines[offset - 1 : offset - 1 + limit]
    if not shown:
        raise ToolError(f"{clean!r} has {len(lines)} lines; offset {offset} is past its end")
    width = len(str(offset + len(shown) - 1))
    out = [
        f"{n:>{width}}\t{line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + '…'}"
        for n, line in enumerate(shown, start=offset)
    ]
    last = offset + len(shown) - 1
    if last < len(lines):
        out.append(f"… {len(lines) - last} more lines: read again with offset={last + 1}")
    return "\n".join(out)


@tool
async def ls(path: str = "") -> str:
    """List a directory of the workspace: its files with their sizes, and its subdirectories.

    Args:
        path: The directory, relative to the workspace; empty for its root.
    """
    clean = _checked(path, allow_root=True)
    workspace = await current_workspace()
    entries = await workspace.list(clean)
    if not entries:
        if clean and await workspace.exists(clean):
            raise ToolError(f"{clean!r} is a file, not a directory; `read` shows it")
        return f"{clean or 'The workspace'} is empty." if not clean else f"No directory {clean!r}."
    base = f"{clean}/" if clean else ""
    dirs: dict[str, int] = {}
    files: list[str] = []
    for entry in entries:
        rest = entry.path[len(base) :]
        head, slash, _ = rest.partition("/")
        if slash:
            dirs[head] = dirs.get(head, 0) + 1
        else:
            files.append(f"{rest}  ({entry.size} bytes, {entry.media_type})")
    listed = [f"{d}/  ({n} files)" for d, n in sorted(dirs.items())] + files
    return "\n".join(listed)


@tool
async def find(pattern: str, path: str = "") -> list[str]:
    """Find workspace files whose path matches a glob (`**` any directories, `*` any name).

    Args:
        pattern: A glob relative to `path`, such as `**/*.md` or `notes/*.txt`.
        path: The directory to search; empty for the whole workspace.
    """
    check_length(pattern, "glob")
    glob_regex(pattern)  # a glob that cannot be matched fails before any lookup
    clean = _checked(path, allow_root=True)
    base = f"{clean}/" if clean else ""
    entries = await (await current_workspace()).list(clean)

    def matching(deadline: Deadline) -> list[str]:
        found: list[str] = []
        for n, entry in enumerate(entries):
            if n % 256 == 0:
                deadline.check()
            if glob_match(pattern, entry.path[len(base) :]):
                found.append(entry.path)
        return found

    return await off_loop(matching, what="glob")


@tool
async def grep(
    pattern: str, path: str = "", glob: str | None = None, ignore_case: bool = False
) -> str:
    """Search the text files of the workspace for a regular expression, line by line.

    Args:
        pattern: A regular expression (Python's syntax, run by RE2: no backreferences or
            lookaround).
        path: The directory (or file) to search; empty for the whole workspace.
        glob: Only files whose path below `path` matches this glob, e.g. `**/*.py`.
        ignore_case: Match regardless of case.
    """
    # Compiled, and matched, off the event loop: see think/tools/_match.py.
    lines = await off_loop(lambda _: LinePattern(pattern, ignore_case=ignore_case), what="pattern")
    if glob is not None:
        check_length(glob, "glob")
        glob_regex(glob)
    clean = _checked(path, allow_root=True)
    base = f"{clean}/" if clean else ""
    files = await (await current_workspace()).read_all(clean, max_size=MAX_GREP_BYTES)

    def search(deadline: Deadline) -> str:
        hits: list[str] = []
        for found in files:
            deadline.check()
            if (
                found.path != clean
                and glob is not None
                and not glob_match(glob, found.path[len(base) :])
            ):
                continue
            if not _is_text(found.media_type, found.data):
                continue
            for n, line in lines.lines(found.text(), deadline):
                hits.append(f"{found.path}:{n}: {line[:MAX_LINE_CHARS]}")
                if len(hits) >= MAX_GREP_RESULTS:
                    hits.append(f"… stopped at {MAX_GREP_RESULTS} matches; narrow the search")
                    return "\n".join(hits)
        return "\n".join(hits) if hits else "No matches."

    return await off_loop(search, what="search")


@tool
async def write(path: str, content: str, ctx: ToolContext) -> str:
    """Create a file in the workspace, or replace its whole content.

    Args:
        path: The file, relative to the workspace.
        content: Its new content, in full.
    """
    clean = _checked(path)
    workspace = await current_workspace()

    async def apply(conn: Conn) -> dict[str, Any]:
        size = await write_file(
            conn, workspace.conversation_uid, clean, content, limits=workspace.limits
        )
        return {"answer": f"Wrote {size} bytes to {clean}."}

    try:
        # The answer is a line, never the content: the call's input already holds it once.
        return str((await workspace.apply_once(ctx.idempotency_key, apply))["answer"])
    except WorkspaceQuotaError as exc:
        # Rolled back, and not recorded: a retry checks again, against what is there then.
        raise ToolError(str(exc)) from None


@tool
async def edit(
    path: str, old_string: str, new_string: str, ctx: ToolContext, replace_all: bool = False
) -> str:
    """Replace exact text in a workspace file.

    Args:
        path: The file, relative to the workspace.
        old_string: The text to replace, exactly as in the file; it must occur once unless
            replace_all is true.
        new_string: What replaces it.
        replace_all: Replace every occurrence.
    """
    clean = _checked(path)
    if not old_string:
        raise ToolError("old_string must not be empty; use `write` to create a file")
    workspace = await current_workspace()

    async def apply(conn: Conn) -> dict[str, Any]:
        # The quota's lock before the file's row lock, in the order a `write` takes them.
        await lock_for_write(conn, workspace.conversation_uid, workspace.limits)
        found = await read_file(conn, workspace.conversation_uid, clean)
        if found is None:
            return {"error": f"there is no file {clean!r} in the workspace"}
        text = found.text()
        count = text.count(old_string)
        if count == 0:
            return {"error": f"old_string does not occur in {clean!r}; `read` it and copy exactly"}
        if count > 1 and not replace_all:
            return {
                "error": f"old_string occurs {count} times in {clean!r}: give more context to "
                "make it unique, or set replace_all"
            }
        updated = text.replace(old_string, new_string)
        await write_file(
            conn,
            workspace.conversation_uid,
            clean,
            updated,
            found.media_type,
            limits=workspace.limits,
        )
        return {"answer": f"Replaced {count} occurrence{'s' if count > 1 else ''} in {clean}."}

    try:
        result = await workspace.apply_once(ctx.idempotency_key, apply)
    except WorkspaceQuotaError as exc:
        raise ToolError(str(exc)) from None
    if "error" in result:
        raise ToolError(str(result["error"]))
    return str(result["answer"])


@tool
async def delete(path: str, ctx: ToolContext) -> str:
    """Delete a file of the workspace, or a directory with everything in it.

    Args:
        path: The file or directory, relative to the workspace.
    """
    clean = _checked(path)
    workspace = await current_workspace()

    async def apply(conn: Conn) -> dict[str, Any]:
        count = await delete_files(conn, workspace.conversation_uid, clean)
        if count == 0:
            return {"error": f"there is no file or directory {clean!r} in the workspace"}
        return {"answer": f"Deleted {count} file{'s' if count > 1 else ''} ({clean})."}

    result = await workspace.apply_once(ctx.idempotency_key, apply)
    if "error" in result:
        raise ToolError(str(result["error"]))
    return str(result["answer"])


WORKSPACE_TOOLS: tuple[Tool, ...] = (read_tool, ls, find, grep, write, edit, delete)
"""What `Think.workspace_tools = True` adds, in this order."""
