"""The `think` command: `dev`, `migrate`, `api` and `worker` (API.md, "Command line"), `chat`,
`schedules` and `settings`. `dev` is in `_dev.py`, `settings` in `_settings.py`, the others in
`_commands.py`.

Errors a user can fix (missing configuration, a busy port) print one line and exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from think.cli._commands import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    _cmd_api,
    _cmd_chat,
    _cmd_migrate,
    _cmd_schedules,
    _cmd_worker,
)
from think.cli._dev import _cmd_dev
from think.cli._help import environment_epilog
from think.cli._settings import _cmd_settings
from think.exceptions import ThinkError, UserError


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (the console script exits with it)."""
    status = _run(argv)
    if "temporalio.bridge.temporal_sdk_bridge" in sys.modules:
        # A command that made a Temporal client (`worker`, `schedules`, `dev`'s checks) ends
        # here, not in the interpreter's teardown: the client's Rust threads can outlive the
        # event loop and abort it ("PyGILState_Release: thread state ... must be current",
        # temporalio/sdk-python#300), turning a clean exit into SIGABRT.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


def _run(argv: Sequence[str] | None) -> int:
    try:
        # Building the parser reads the package's metadata: a Ctrl-C right after the imports
        # (the launcher has handed SIGINT back by then) lands here, and is a clean exit too.
        args = _parser().parse_args(argv)
    except KeyboardInterrupt:
        return 130
    # THINK_AGENTS names modules of the current directory (`my_agents:Forecaster`): the
    # console script, unlike `python -m think` (and like uvicorn's --app-dir), must look there.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        status: int = args.handler(args)
    except UserError as error:
        # ConfigurationError and other mistakes the user can fix: one line, no traceback.
        print(f"think {args.command}: error: {error}", file=sys.stderr)
        return 2
    except ThinkError as error:
        # EmbeddedServiceError: a service did not start; its message quotes the service's log.
        print(f"think {args.command}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="think",
        description="Durable chat agents on Temporal, Postgres and FastAPI.",
        epilog="Configured by environment variables (THINK_*, TEMPORAL_*, OPENAI_*): "
        "`think settings` lists them, with their defaults.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dev = commands.add_parser(
        "dev",
        **_environment("dev"),
        help="embedded Postgres + Temporal dev server + worker + API, all in one",
        description="Run everything locally; data under .think/ (THINK_HOME). Ctrl-C stops it.",
    )
    dev.add_argument("--host", default=DEFAULT_HOST, help="API address (default %(default)s)")
    dev.add_argument(
        "--port", type=int, help=f"API port (default: THINK_PORT, else {DEFAULT_PORT})"
    )
    dev.add_argument(
        "--temporal-port", type=int, default=7233, help="Temporal gRPC (default %(default)s)"
    )
    dev.add_argument(
        "--ui-port", type=int, default=8233, help="Temporal Web UI; 0: none (default %(default)s)"
    )
    dev.set_defaults(handler=_cmd_dev)

    migrate = commands.add_parser(
        "migrate",
        **_environment("migrate"),
        help="bring the schema to the newest migration and register search attributes",
    )
    migrate.set_defaults(handler=_cmd_migrate)

    api = commands.add_parser(
        "api", help="the HTTP gateway alone, against existing services", **_environment("api")
    )
    api.add_argument("--host", default=DEFAULT_HOST, help="default %(default)s")
    api.add_argument("--port", type=int, help=f"default: THINK_PORT, else {DEFAULT_PORT}")
    api.set_defaults(handler=_cmd_api)

    worker = commands.add_parser(
        "worker", help="one worker alone, against existing services", **_environment("worker")
    )
    worker.set_defaults(handler=_cmd_worker)

    sched = commands.add_parser(
        "schedules",
        **_environment("schedules"),
        help="list the scheduled tasks (next runs, last result), or trigger one now",
    )
    sched.add_argument("--agent", help="only this agent (required with --trigger)")
    sched.add_argument("--trigger", metavar="TASK", help="run one occurrence of TASK now")
    sched.add_argument(
        "--tenant", help="whose tasks (default: THINK_DEFAULT_TENANT, itself `default`)"
    )
    sched.add_argument("--conversation", metavar="ID", help="for conversation-scoped tasks")
    sched.set_defaults(handler=_cmd_schedules)

    chat = commands.add_parser(
        "chat",
        help="talk to an agent from the terminal, through a running gateway",
        description="Each line is a turn; the reply streams as it is written. A tool that "
        "needs approval asks first. Ctrl-C cancels a reply; /quit or end of input leaves.",
    )
    chat.add_argument("--agent", required=True, help="the agent's name, as in /v1/agents")
    chat.add_argument(
        "--conversation", metavar="ID", help="continue or start this conversation (default: new)"
    )
    chat.add_argument(
        "--url",
        default=f"http://{DEFAULT_HOST}:{DEFAULT_PORT}",
        help="the gateway (default %(default)s)",
    )
    chat.add_argument("--api-key", help="a key of THINK_API_KEYS, when the gateway needs one")
    chat.set_defaults(handler=_cmd_chat)

    settings = commands.add_parser(
        "settings",
        help="the environment variables Think reads, their defaults and what they do",
    )
    shown = settings.add_mutually_exclusive_group()
    shown.add_argument(
        "--check", action="store_true", help="read this environment's values and show them"
    )
    shown.add_argument("--markdown", action="store_true", help="as the table of docs/operating.md")
    settings.set_defaults(handler=_cmd_settings)
    return parser


def _environment(command: str) -> dict[str, Any]:
    """A subcommand's `--help` ends with the variables that configure it, kept as written."""
    return {
        "epilog": environment_epilog(command),
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("think")
    except PackageNotFoundError:
        return "(not installed)"
