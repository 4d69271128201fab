"""A conversation's workspace: files in Postgres (`workspace_files`, migration 0010).

Files live in the database rather than on a worker's disk so that every worker, and the
gateway, sees the same files, and they survive restarts; a file belongs to one conversation
(its `uid`, which is per tenant), so one conversation never sees another's. Directories are
not stored: a directory is the common prefix of the paths below it.

Paths are relative to the workspace root, `/`-separated, with no `.` or `..` segment, no NUL
and no backslash. `/workspace/...` (how the spec's markers name a file) is accepted as the
root; any other absolute path is refused, as is everything that would step outside.

A write made by a tool call (`apply_once`) records the call's idempotency key and its answer
in the same transaction (`workspace_ops`), so a retried attempt answers what the first one did
instead of applying it again: an `edit` retried after a crash does not fail on, or repeat, a
replacement that was already made.
"""

from __future__ import annotations

import builtins
import mimetypes
import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from psycopg.rows import DictRow
from psycopg.types.json import Jsonb
from pydantic import BaseModel

from think._messages import storable_text
from think.exceptions import UserError
from think.storage._db import Conn, Database, fetch_all, fetch_one

ROOT_ALIAS = "/workspace"
"""The absolute spelling of the workspace root that paths may start with."""
MAX_PATH = 1024
"""Characters of a workspace path."""


class WorkspacePathError(UserError):
    """A path that is not inside the workspace, or not a valid file name."""


class WorkspaceEntry(BaseModel):
    """A file of a workspace, without its content."""

    path: str
    size: int
    media_type: str
    updated_at: datetime


class WorkspaceFile(WorkspaceEntry):
    data: bytes

    def text(self) -> str:
        """The content as text (undecodable bytes replaced, and NUL bytes, which Postgres
        cannot store in the message that shows them: `think._messages.storable`)."""
        return storable_text(self.data.decode("utf-8", errors="replace"))


_BAD = re.compile(r"[\x00-\x1f\x7f\\]")


def workspace_path(raw: str, *, allow_root: bool = False) -> str:
    """`raw` as a workspace path (`notes/todo.md`); raises `WorkspacePathError` when it would
    leave the workspace or is not a valid name. `allow_root`: `""` (the root) is accepted."""
    if not isinstance(raw, str):
        raise WorkspacePathError(f"a workspace path must be a string, not {raw!r}")
    path = raw.strip()
    if _BAD.search(path):
        raise WorkspacePathError(f"workspace path {raw!r} holds a control character or a backslash")
    if path == ROOT_ALIAS or path.startswith(ROOT_ALIAS + "/"):
        path = path[len(ROOT_ALIAS) :]
    elif path.startswith("/") or path.startswith("~"):
        raise WorkspacePathError(
            f"workspace path {raw!r} is absolute: name a file relative to the workspace "
            "(e.g. notes/todo.md) or under /workspace/"
        )
    segments = [s for s in path.split("/") if s not in ("", ".")]
    if ".." in segments:
        raise WorkspacePathError(f"workspace path {raw!r} steps outside the workspace with '..'")
    clean = "/".join(segments)
    if not clean and not allow_root:
        raise WorkspacePathError("a file path is needed, not the workspace root")
    if len(clean) > MAX_PATH:
        raise WorkspacePathError(f"workspace path is {len(clean)} characters; at most {MAX_PATH}")
    return clean


def guess_media_type(path: str) -> str:
    found, _ = mimetypes.guess_type(path, strict=False)
    if found:
        return found
    if path.endswith((".md", ".markdown")):
        return "text/markdown"
    return "text/plain"


_SELECT_FILES = "SELECT path, data, media_type, size, updated_at FROM workspace_files "
"""A file with its content: what `WorkspaceFile` holds (a WHERE clause follows)."""


def _like(prefix: str) -> str:
    """A LIKE pattern for every path under the directory `prefix` (`""`: everything)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{escaped}/%" if escaped else "%"


class Workspace:
    """The files of one conversation (`conversation_uid`)."""

    def __init__(self, db: Database, conversation_uid: str) -> None:
        self.db = db
        self.conversation_uid = conversation_uid

    def _params(self, **more: Any) -> dict[str, Any]:
        return {"c": self.conversation_uid, **more}

    async def _fetch_one(self, query: str, **params: Any) -> DictRow | None:
        """The row `query` reads on a read connection, with this conversation as `%(c)s`."""
        async with self.db.connection() as conn:
            return await fetch_one(conn, query, self._params(**params))

    async def _fetch_all(self, query: str, **params: Any) -> builtins.list[DictRow]:
        """The rows `query` reads on a read connection, with this conversation as `%(c)s`."""
        async with self.db.connection() as conn:
            return await fetch_all(conn, query, self._params(**params))

    async def read(self, path: str) -> WorkspaceFile | None:
        row = await self._fetch_one(
            _SELECT_FILES + "WHERE conversation_uid = %(c)s AND path = %(p)s",
            p=workspace_path(path),
        )
        return WorkspaceFile.model_validate(dict(row)) if row else None

    async def exists(self, path: str) -> bool:
        row = await self._fetch_one(
            "SELECT 1 AS x FROM workspace_files WHERE conversation_uid = %(c)s AND path = %(p)s",
            p=workspace_path(path),
        )
        return row is not None

    async def list(self, directory: str = "") -> list[WorkspaceEntry]:
        """Every file under `directory` (recursively), by path."""
        prefix = workspace_path(directory, allow_root=True)
        rows = await self._fetch_all(
            "SELECT path, media_type, size, updated_at FROM workspace_files "
            "WHERE conversation_uid = %(c)s AND path LIKE %(like)s ORDER BY path",
            like=_like(prefix),
        )
        return [WorkspaceEntry.model_validate(dict(r)) for r in rows]

    async def read_many(self, paths: builtins.list[str]) -> dict[str, WorkspaceFile]:
        """The files among `paths` that exist, by path, in one query."""
        clean = [workspace_path(p) for p in paths]
        if not clean:
            return {}
        rows = await self._fetch_all(
            _SELECT_FILES + "WHERE conversation_uid = %(c)s AND path = ANY(%(ps)s)", ps=clean
        )
        return {r["path"]: WorkspaceFile.model_validate(dict(r)) for r in rows}

    async def read_all(self, directory: str = "", *, max_size: int) -> builtins.list[WorkspaceFile]:
        """Every file under `directory` of at most `max_size` bytes, with its content, in one
        query (for `grep`)."""
        prefix = workspace_path(directory, allow_root=True)
        rows = await self._fetch_all(
            _SELECT_FILES
            + "WHERE conversation_uid = %(c)s AND (path LIKE %(like)s OR path = %(p)s) "
            "AND size <= %(max)s ORDER BY path",
            like=_like(prefix),
            p=prefix,
            max=max_size,
        )
        return [WorkspaceFile.model_validate(dict(r)) for r in rows]

    async def write(self, path: str, data: bytes | str, media_type: str | None = None) -> int:
        """Create or replace a file; returns its size. Idempotent: the same write twice leaves
        the same file."""
        async with self.db.transaction() as conn:
            return await write_file(conn, self.conversation_uid, path, data, media_type)

    async def write_if_absent(self, path: str, data: bytes, media_type: str) -> bool:
        """Create a file unless one is there already; True when it was created."""
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO workspace_files (conversation_uid, path, data, media_type, size) "
                "VALUES (%(c)s, %(p)s, %(d)s, %(m)s, %(s)s) ON CONFLICT DO NOTHING",
                self._params(p=workspace_path(path), d=data, m=media_type, s=len(data)),
            )
        return cursor.rowcount == 1

    async def delete(self, path: str) -> int:
        """Delete a file, or every file under a directory; returns how many went."""
        async with self.db.transaction() as conn:
            return await delete_files(conn, self.conversation_uid, path)

    async def apply_once(
        self, key: str, apply: Callable[[Conn], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """Run `apply` (a write, in the transaction it is handed) once for `key`: a second call
        with the same key returns the first one's answer without running it."""
        async with self.db.transaction() as conn:
            # One attempt at a time per key: a concurrent duplicate waits, then sees the answer.
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%(c)s || ':' || %(k)s, 0))",
                self._params(k=key),
            )
            done = await fetch_one(
                conn,
                "SELECT result FROM workspace_ops WHERE conversation_uid = %(c)s AND key = %(k)s",
                self._params(k=key),
            )
            if done is not None:
                return dict(done["result"])
            result = await apply(conn)
            await conn.execute(
                "INSERT INTO workspace_ops (conversation_uid, key, result) "
                "VALUES (%(c)s, %(k)s, %(r)s)",
                self._params(k=key, r=Jsonb(result)),
            )
            return result


async def read_file(conn: Conn, conversation_uid: str, path: str) -> WorkspaceFile | None:
    row = await fetch_one(
        conn,
        _SELECT_FILES + "WHERE conversation_uid = %(c)s AND path = %(p)s FOR UPDATE",
        {"c": conversation_uid, "p": workspace_path(path)},
    )
    return WorkspaceFile.model_validate(dict(row)) if row else None


async def write_file(
    conn: Conn,
    conversation_uid: str,
    path: str,
    data: bytes | str,
    media_type: str | None = None,
) -> int:
    clean = workspace_path(path)
    raw = data.encode() if isinstance(data, str) else bytes(data)
    await conn.execute(
        "INSERT INTO workspace_files (conversation_uid, path, data, media_type, size) "
        "VALUES (%(c)s, %(p)s, %(d)s, %(m)s, %(s)s) "
        "ON CONFLICT (conversation_uid, path) DO UPDATE SET data = EXCLUDED.data, "
        "media_type = EXCLUDED.media_type, size = EXCLUDED.size, updated_at = now()",
        {
            "c": conversation_uid,
            "p": clean,
            "d": raw,
            "m": media_type or guess_media_type(clean),
            "s": len(raw),
        },
    )
    return len(raw)


async def delete_files(conn: Conn, conversation_uid: str, path: str) -> int:
    clean = workspace_path(path)
    cursor = await conn.execute(
        "DELETE FROM workspace_files WHERE conversation_uid = %(c)s "
        "AND (path = %(p)s OR path LIKE %(like)s)",
        {"c": conversation_uid, "p": clean, "like": _like(clean)},
    )
    return cursor.rowcount
