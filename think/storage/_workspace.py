"""A conversation's workspace: files in Postgres (`workspace_files`, migration 0010).

Files live in the database rather than on a worker's disk so that every worker, and the
gateway, sees the same files, and they survive restarts; a file belongs to one conversation
(its `uid`, which is per tenant), so one conversation never sees another's. Directories are
not stored: a directory is the common prefix of the paths below it.

Paths are relative to the workspace root, `/`-separated, with no `.` or `..` segment, no
control character (C0, DEL, C1), no bidirectional control and no backslash. `/workspace/...`
(how the spec's markers name a file) is accepted as the root; any other absolute path is
refused, as is everything that would step outside.

A write made by a tool call (`apply_once`) records the call's idempotency key and its answer
in the same transaction (`workspace_ops`), so a retried attempt answers what the first one did
instead of applying it again: an `edit` retried after a crash does not fail on, or repeat, a
replacement that was already made.

Writes are bounded (`WorkspaceLimits`, from the `THINK_*WORKSPACE_MAX_*` settings): a file's
size, a conversation's bytes and files, a tenant's bytes. A conversation's usage is summed from
`workspace_files.size` under the primary key's index (at most `THINK_WORKSPACE_MAX_FILES` rows),
inside the writing transaction and under an advisory lock that every growing write of the
conversation takes first. A tenant's is one row of `workspace_usage` (migration 0014), which
triggers on `workspace_files` keep in step in the transaction of every change to the files:
a growing write reads it after its own change is counted there, holding the row's lock from
then until it commits, so two concurrent writes cannot both pass a check that only one of
them fits, and what it costs does not grow with the tenant.
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
from pydantic import BaseModel, ConfigDict

from think._messages import storable_text
from think._settings import (
    DEFAULT_TENANT_WORKSPACE_MAX_BYTES,
    DEFAULT_WORKSPACE_MAX_BYTES,
    DEFAULT_WORKSPACE_MAX_FILE_BYTES,
    DEFAULT_WORKSPACE_MAX_FILES,
    Settings,
)
from think.exceptions import UserError
from think.storage._db import Conn, Database, fetch_all, fetch_one, note_large

ROOT_ALIAS = "/workspace"
"""The absolute spelling of the workspace root that paths may start with."""
MAX_PATH = 1024
"""Characters of a workspace path."""


class WorkspacePathError(UserError):
    """A path that is not inside the workspace, or not a valid file name."""


class WorkspaceQuotaError(UserError):
    """A write the workspace's limits refuse; nothing of it was stored. `limit` names the
    setting (`THINK_WORKSPACE_MAX_BYTES`, ...), so the model, and the person reading the
    transcript, know which bound it met and how much is in use."""

    def __init__(self, message: str, *, limit: str, maximum: int, usage: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.maximum = maximum
        self.usage = usage


class WorkspaceLimits(BaseModel):
    """What a write may leave in the workspace; 0 turns a bound off. `from_settings` reads
    the deployment's; the defaults are the settings' defaults, so a `Workspace` built without
    limits is bounded as a deployment that sets none."""

    model_config = ConfigDict(frozen=True)

    max_file_bytes: int = DEFAULT_WORKSPACE_MAX_FILE_BYTES
    max_bytes: int = DEFAULT_WORKSPACE_MAX_BYTES
    max_files: int = DEFAULT_WORKSPACE_MAX_FILES
    tenant_max_bytes: int = DEFAULT_TENANT_WORKSPACE_MAX_BYTES

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkspaceLimits:
        return cls(
            max_file_bytes=settings.workspace_max_file_bytes,
            max_bytes=settings.workspace_max_bytes,
            max_files=settings.workspace_max_files,
            tenant_max_bytes=settings.tenant_workspace_max_bytes,
        )

    @property
    def counted(self) -> bool:
        """Whether a write must read the usage (and take the conversation's lock) to be
        checked."""
        return bool(self.max_bytes or self.max_files or self.tenant_max_bytes)


UNLIMITED = WorkspaceLimits(max_file_bytes=0, max_bytes=0, max_files=0, tenant_max_bytes=0)
"""No bound at all."""


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


_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\\]")
"""C0 and C1 control characters, DEL, and the backslash."""
_BIDI = re.compile(r"[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
"""Bidirectional controls (the Arabic letter mark, LRM and RLM, the embeddings, overrides and
isolates) and the line and paragraph separators: invisible in a listing, they make
`txt.exe\u202emd.` show as `txt.emd.exe`, or one name read as two lines of `ls`."""


def workspace_path(raw: str, *, allow_root: bool = False) -> str:
    """`raw` as a workspace path (`notes/todo.md`); raises `WorkspacePathError` when it would
    leave the workspace or is not a valid name. `allow_root`: `""` (the root) is accepted."""
    if not isinstance(raw, str):
        raise WorkspacePathError(f"a workspace path must be a string, not {raw!r}")
    # ASCII whitespace around a name is dropped (a model may add a newline); anything else
    # invisible is refused below, not silently removed.
    path = raw.strip(" \t\n\r\f\v")
    if _BAD.search(path):
        raise WorkspacePathError(f"workspace path {raw!r} holds a control character or a backslash")
    if _BIDI.search(path):
        raise WorkspacePathError(
            f"workspace path {raw!r} holds a bidirectional control or a line separator "
            f"(U+{ord(_BIDI.findall(path)[0]):04X}), which would disguise the name in a listing"
        )
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
    """The files of one conversation (`conversation_uid`); `limits` bound what `write` (and
    the tools' writes, which read them from here) may leave."""

    def __init__(
        self, db: Database, conversation_uid: str, limits: WorkspaceLimits | None = None
    ) -> None:
        self.db = db
        self.conversation_uid = conversation_uid
        self.limits = limits or WorkspaceLimits()

    def _params(self, **more: Any) -> dict[str, Any]:
        return {"c": self.conversation_uid, **more}

    async def _fetch_one(self, query: str, **params: Any) -> DictRow | None:
        """The row `query` reads on a read connection, with this conversation as `%(c)s`."""
        async with self.db.connection() as conn:
            row = await fetch_one(conn, query, self._params(**params))
            _noted(conn, [row] if row else [])
            return row

    async def _fetch_all(self, query: str, **params: Any) -> builtins.list[DictRow]:
        """The rows `query` reads on a read connection, with this conversation as `%(c)s`."""
        async with self.db.connection() as conn:
            rows = await fetch_all(conn, query, self._params(**params))
            _noted(conn, rows)
            return rows

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
        the same file. Raises `WorkspaceQuotaError` (and stores nothing) past `limits`."""
        async with self.db.transaction() as conn:
            return await write_file(
                conn, self.conversation_uid, path, data, media_type, limits=self.limits
            )

    async def write_if_absent(self, path: str, data: bytes, media_type: str) -> bool:
        """Create a file unless one is there already; True when it was created.

        Not bounded by `limits` (its bytes are counted all the same): media eviction keeps an
        image here that the stored message already holds, and its marker names the file; a
        refusal would leave the model a path to nothing."""
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


def _noted(conn: Conn, rows: builtins.list[DictRow]) -> None:
    """Tell the pool what file content `rows` brought over `conn` (`note_large`)."""
    note_large(conn, sum(len(r["data"]) for r in rows if r.get("data") is not None))


async def read_file(conn: Conn, conversation_uid: str, path: str) -> WorkspaceFile | None:
    row = await fetch_one(
        conn,
        _SELECT_FILES + "WHERE conversation_uid = %(c)s AND path = %(p)s FOR UPDATE",
        {"c": conversation_uid, "p": workspace_path(path)},
    )
    _noted(conn, [row] if row else [])
    return WorkspaceFile.model_validate(dict(row)) if row else None


async def lock_for_write(conn: Conn, conversation_uid: str, limits: WorkspaceLimits) -> None:
    """Take the conversation's lock a counted write holds until its transaction ends. An `edit`
    takes it before it locks the file's row (`read_file`), in the order `write_file` takes
    them, so the two never deadlock. Taking it again in the same transaction is free (advisory
    locks stack). The tenant's usage row is locked last, by the change itself (the triggers
    of migration 0014), after the file rows, in every transaction that changes files."""
    if not limits.counted:
        return
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('think:workspace:' || %(c)s, 0))",
        {"c": conversation_uid},
    )


_USAGE = """
SELECT
  (SELECT size FROM workspace_files WHERE conversation_uid = %(c)s AND path = %(p)s) AS old,
  (SELECT count(*) FROM workspace_files WHERE conversation_uid = %(c)s) AS files,
  (SELECT coalesce(sum(size), 0) FROM workspace_files WHERE conversation_uid = %(c)s) AS bytes
"""
"""What a write would replace, and what the conversation holds: one statement, read after the
lock, so it sees every write committed before this one may proceed."""

_TENANT_USAGE = """
SELECT u.bytes FROM workspace_usage u JOIN conversations k ON k.tenant = u.tenant
WHERE k.uid = %(c)s
"""
"""The tenant's bytes, this transaction's own change included (migration 0014's triggers)."""


def _refusal(
    limit: str, maximum: int, usage: int, path: str, size: int, growth: int, whose: str
) -> WorkspaceQuotaError:
    return WorkspaceQuotaError(
        f"writing {size:,} bytes to {path!r} would bring {whose} workspace to "
        f"{usage + growth:,} bytes, over {limit} ({maximum:,} bytes; {usage:,} in "
        "use); nothing was written: delete files it no longer needs, or write less",
        limit=limit,
        maximum=maximum,
        usage=usage,
    )


async def check_quota(
    conn: Conn, conversation_uid: str, path: str, size: int, limits: WorkspaceLimits
) -> int:
    """Raise `WorkspaceQuotaError` when writing `size` bytes to `path` would pass a limit of
    the file or the conversation; return how much the write grows what is held (0 when it
    need not be known). The tenant's limit is checked after the write (`write_file`).

    Only a write that grows what is held is refused: replacing a file with one no larger
    passes even over a lowered limit, so a full workspace can always be cleaned up."""
    if limits.max_file_bytes and size > limits.max_file_bytes:
        raise WorkspaceQuotaError(
            f"{path!r} would be {size:,} bytes, over THINK_WORKSPACE_MAX_FILE_BYTES "
            f"({limits.max_file_bytes:,} bytes a file); nothing was written",
            limit="THINK_WORKSPACE_MAX_FILE_BYTES",
            maximum=limits.max_file_bytes,
            usage=size,
        )
    if not limits.counted:
        return 0
    await lock_for_write(conn, conversation_uid, limits)
    row = await fetch_one(conn, _USAGE, {"c": conversation_uid, "p": path})
    assert row is not None
    old: int | None = row["old"]
    growth = size - (old or 0)
    if limits.max_files and old is None and row["files"] >= limits.max_files:
        raise WorkspaceQuotaError(
            f"the workspace already holds {row['files']:,} files, the most "
            f"THINK_WORKSPACE_MAX_FILES allows ({limits.max_files:,}); {path!r} was not "
            "created: delete files it no longer needs, or write to an existing one",
            limit="THINK_WORKSPACE_MAX_FILES",
            maximum=limits.max_files,
            usage=int(row["files"]),
        )
    usage = int(row["bytes"])
    if growth > 0 and limits.max_bytes and usage + growth > limits.max_bytes:
        raise _refusal(
            "THINK_WORKSPACE_MAX_BYTES",
            limits.max_bytes,
            usage,
            path,
            size,
            growth,
            "this conversation's",
        )
    return max(growth, 0)


async def check_tenant_quota(
    conn: Conn, conversation_uid: str, path: str, size: int, growth: int, limits: WorkspaceLimits
) -> None:
    """Raise `WorkspaceQuotaError` when a write that grew the workspace by `growth` bytes,
    already made in `conn`'s transaction, took its tenant over `THINK_TENANT_WORKSPACE_MAX_BYTES`
    (raising rolls it back: nothing of it is stored). Exact under concurrency: the write's
    change to the tenant's usage row locked the row, so a concurrent write of the tenant waits
    for this one to end and then adds its growth to what this one left."""
    if not (growth > 0 and limits.tenant_max_bytes):
        return
    row = await fetch_one(conn, _TENANT_USAGE, {"c": conversation_uid})
    assert row is not None
    total = int(row["bytes"])
    if total > limits.tenant_max_bytes:
        raise _refusal(
            "THINK_TENANT_WORKSPACE_MAX_BYTES",
            limits.tenant_max_bytes,
            total - growth,
            path,
            size,
            growth,
            "this tenant's",
        )


async def write_file(
    conn: Conn,
    conversation_uid: str,
    path: str,
    data: bytes | str,
    media_type: str | None = None,
    *,
    limits: WorkspaceLimits,
) -> int:
    """Create or replace a file in `conn`'s transaction, within `limits`
    (`WorkspaceQuotaError` otherwise, and nothing of it is stored once the transaction ends)."""
    clean = workspace_path(path)
    raw = data.encode() if isinstance(data, str) else bytes(data)
    growth = await check_quota(conn, conversation_uid, clean, len(raw), limits)
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
    await check_tenant_quota(conn, conversation_uid, clean, len(raw), growth, limits)
    return len(raw)


async def delete_files(conn: Conn, conversation_uid: str, path: str) -> int:
    clean = workspace_path(path)
    cursor = await conn.execute(
        "DELETE FROM workspace_files WHERE conversation_uid = %(c)s "
        "AND (path = %(p)s OR path LIKE %(like)s)",
        {"c": conversation_uid, "p": clean, "like": _like(clean)},
    )
    return cursor.rowcount
