"""`think migrate`, `api`, `worker`, `schedules` and `chat`, and what `dev` shares with them:
the settings from the environment and the logging set-up."""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from think._settings import Settings
from think.cli._malloc import return_freed_memory
from think.exceptions import ConfigurationError, ThinkError, UserError

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
    try:
        client = await connect(settings)
    except RuntimeError as error:  # temporalio's "Failed client connect: ..."
        raise _Unreachable(
            f"cannot reach Temporal at {settings.temporal_address}: {error}"
        ) from error
    return await register_search_attributes(client, settings.temporal_namespace)


class _Unreachable(ThinkError):
    """Postgres or Temporal did not answer; the message says which and where."""


def _cmd_api(args: argparse.Namespace) -> int:
    settings = _require_services(_settings())
    _configure_logging()
    return_freed_memory()
    import uvicorn

    # By import path: the framework does not import the apps built on it. `create_app()`
    # reads the same settings from the environment.
    config = uvicorn.Config(
        "api.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        # Open SSE streams would otherwise hold a stopping replica forever; clients resume
        # on another one with Last-Event-ID.
        timeout_graceful_shutdown=5,
        # h11 with problem documents for what the parser refuses, and a bound on the time to
        # send request headers (api/_server.py); by name, as the app is.
        http="api._server:ProblemH11Protocol",
        loop=_uvicorn_loop(settings),
        timeout_keep_alive=int(settings.keep_alive_seconds) or 1,
        # A client behind a proxy on this host: its scheme and address, not the Host.
        proxy_headers=True,
        forwarded_allow_ips="127.0.0.1",
    )
    server = uvicorn.Server(config)
    server.run()
    return 0 if server.started else 1


def _cmd_worker(args: argparse.Namespace) -> int:
    settings = _require_services(_settings())
    _configure_logging()
    return_freed_memory()
    from think.engine import run_worker

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
    lines = asyncio.run(
        schedules_command(settings, args.agent, args.trigger, args.tenant, args.conversation)
    )
    print("\n".join(lines))
    return 0


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


def _configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    # The model client's HTTP library logs every request at INFO ("HTTP Request: POST …"):
    # two lines per tool turn that the turn's own events already say, at a measurable cost.
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)


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
