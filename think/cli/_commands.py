"""`think migrate`, `api`, `worker`, `schedules` and `chat`, and what `dev` shares with them:
the settings from the environment and the logging set-up."""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from think._settings import Settings
from think.cli._logging import configure_logging
from think.cli._malloc import return_freed_memory
from think.exceptions import AgentNotFoundError, ConfigurationError, ThinkError, UserError

if TYPE_CHECKING:
    pass

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
STOP_GRACE = 15.0
"""Seconds the API and worker get to finish before SIGKILL (the worker may be mid-activity)."""
READY_TIMEOUT = 90.0
"""Seconds `think dev` waits for the API's /healthz (imports and connections on a slow box)."""


def _settings(*, find_dev_stack: bool = True) -> Settings:
    """Settings from the environment (a bad variable is a `ConfigurationError` naming it), and
    a running `think dev`'s endpoints file, reported as configuration if it cannot be read."""
    try:
        return Settings.from_env(find_dev_stack=find_dev_stack)
    except ValueError as error:  # a malformed .think/endpoints.json
        raise ConfigurationError(f"invalid environment: {error}") from error


def _require_services(settings: Settings) -> Settings:
    settings.require_database_url()
    settings.require_temporal_address()
    return settings


# --------------------------------------------------------------------------- migrate, api, worker


def _cmd_migrate(args: argparse.Namespace) -> int:
    settings = _require_services(_settings())
    added = asyncio.run(_migrate(settings))
    print("schema: at the newest migration")
    print(f"search attributes: {'added ' + ', '.join(added) if added else 'all registered'}")
    return 0


async def _migrate(settings: Settings) -> list[str]:
    """Schema to head, then the search attributes; both idempotent, so safe on every start."""
    from sqlalchemy.exc import OperationalError

    from think import storage
    from think.workflows import connect, register_search_attributes

    try:
        await storage.migrate(settings)
    except OperationalError as error:
        url = _hide_password(settings.require_database_url())
        reason = " ".join(str(error.orig).split())  # libpq adds a hint on a second line
        raise _Unreachable(f"cannot reach Postgres at {url}: {reason}") from error
    client = await connect(settings)  # TemporalConnectionError: one line, exit 1
    return await register_search_attributes(client, client.namespace)


class _Unreachable(ThinkError):
    """Postgres did not answer; the message says where (Temporal's own is
    `TemporalConnectionError`)."""


def _cmd_api(args: argparse.Namespace) -> int:
    settings = _require_services(_settings())
    configure_logging(settings)
    return_freed_memory()
    import uvicorn

    from think.engine import quiet_expected_failures

    # uvicorn logs a failed start (Postgres or Temporal unreachable) with its traceback.
    quiet_expected_failures("uvicorn.error")

    # By import path: the framework does not import the apps built on it. `create_app()`
    # reads the same settings from the environment.
    config = uvicorn.Config(
        "api.app:create_app",
        factory=True,
        host=args.host,
        port=settings.port if args.port is None else args.port,
        # Open SSE streams would otherwise hold a stopping replica forever; clients resume
        # on another one with Last-Event-ID.
        timeout_graceful_shutdown=math.ceil(settings.api_shutdown_grace_seconds),
        # h11 with problem documents for what the parser refuses, and a bound on the time to
        # send request headers (api/_server.py); by name, as the app is.
        http="api._server:ProblemH11Protocol",
        loop=_uvicorn_loop(settings),
        timeout_keep_alive=int(settings.keep_alive_seconds) or 1,
        # A client behind a proxy on this host: its scheme and address, not the Host.
        proxy_headers=True,
        forwarded_allow_ips="127.0.0.1",
        # Its loggers propagate to the root one `configure_logging` set up: one format.
        log_config=None,
        log_level=settings.log_level,
    )
    server = uvicorn.Server(config)
    server.run()
    return 0 if server.started else 1


def _cmd_worker(args: argparse.Namespace) -> int:
    settings = _require_services(_settings())
    configure_logging(settings)
    return_freed_memory()
    from think.engine import run_worker

    # Postgres or Temporal unreachable at start (a deploy, `docker compose up`) is
    # `ServiceUnreachable`, a ThinkError: one line naming where and the variable, exit 1.
    with asyncio.Runner(loop_factory=_event_loop_factory(settings)) as runner:
        runner.run(_until_signalled(run_worker(settings)))
    return 0


def _event_loop_factory(settings: Settings) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop (`THINK_EVENT_LOOP`), or None for asyncio's own. A worker spends much of
    a turn in the loop (Postgres, the model's HTTP stream, Temporal's callbacks); uvloop's
    C loop needs far fewer system calls for the same work. Asked for but missing is an
    error; `auto` falls back quietly."""
    if settings.event_loop == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if settings.event_loop == "uvloop":
            raise ConfigurationError(
                "THINK_EVENT_LOOP=uvloop, but uvloop is not installed: pip install uvloop"
            ) from None
        return None
    return uvloop.new_event_loop


def _uvicorn_loop(settings: Settings) -> str:
    """The same choice, by uvicorn's name for it."""
    return "asyncio" if _event_loop_factory(settings) is None else "uvloop"


def _cmd_schedules(args: argparse.Namespace) -> int:
    from think.schedules.cli import schedules_command

    if args.trigger and not args.agent:
        raise UserError("--trigger needs --agent: the task ids are per agent")
    settings = _require_services(_settings())
    # Which agents: THINK_AGENTS of this shell, else those of the running `think dev`
    # (`Settings.with_dev_endpoints`), else the bundled assistant; a miss says which it read.
    hosted = f"THINK_AGENTS={','.join(settings.agents)}"
    try:
        lines = asyncio.run(
            schedules_command(
                settings,
                args.agent,
                args.trigger,
                args.tenant or settings.default_tenant,
                args.conversation,
            )
        )
    except AgentNotFoundError as error:
        raise UserError(f"{error} ({hosted}): {_EXPORT_HINT}") from None
    if lines == ["no scheduled tasks"]:
        # Which agents it looked at: this shell's, or the running `think dev`'s.
        lines = [f"no scheduled tasks among the agents of {hosted}"]
    print("\n".join(lines))
    return 0


_EXPORT_HINT = (
    "run this in the directory of a running `think dev` (or with THINK_HOME set to its data "
    "directory) to use its agents, or export the deployment's THINK_AGENTS"
)


async def _until_signalled(main: Coroutine[Any, Any, None]) -> None:
    """Run `main`; SIGINT or SIGTERM cancels it, which a Temporal worker takes as "shut down
    gracefully". A second signal gets the default behaviour, i.e. stops the process at once.

    Docker stops containers with SIGTERM, whose default would skip the worker's shutdown.
    """
    task = asyncio.ensure_future(main)
    loop = asyncio.get_running_loop()
    stop_signals = (signal.SIGINT, signal.SIGTERM)

    def stop() -> None:
        task.cancel()
        for sig in stop_signals:
            loop.remove_signal_handler(sig)

    for sig in stop_signals:
        loop.add_signal_handler(sig, stop)
    try:
        await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise


def _cmd_chat(args: argparse.Namespace) -> int:
    from think.client import run_chat

    return run_chat(
        url=args.url,
        agent=args.agent,
        conversation=args.conversation,
        api_key=args.api_key,
        stdin=sys.stdin,
        stdout=sys.stdout,
        stderr=sys.stderr,
    )


def _hide_password(url: str) -> str:
    return re.sub(r"(://[^:/@]+):[^@]+@", r"\1:***@", url)
