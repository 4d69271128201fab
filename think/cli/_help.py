"""The environment variables each subcommand reads, for its `--help` (`think api --help`):
a user looking at one command sees what configures it without reading the docs. Names and
descriptions come from the settings' declaration; which command reads which is said here, and
tests/operations/test_settings.py checks that every declared variable is listed somewhere."""

from __future__ import annotations

import textwrap

from think._settings import variables

_SERVICES = (
    "THINK_DATABASE_URL",
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "TEMPORAL_API_KEY",
    "TEMPORAL_TLS",
    "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    "TEMPORAL_TLS_SERVER_NAME",
    "TEMPORAL_PROFILE",
    "TEMPORAL_CONFIG_FILE",
    "THINK_HOME",
)
_HOSTED = ("THINK_AGENTS", "THINK_WORKFLOWS", "THINK_ACTIVITIES", "THINK_TASK_QUEUE")
_PROCESS = ("THINK_LOG_LEVEL", "THINK_LOG_FORMAT", "THINK_EVENT_LOOP")
_GATEWAY = (
    "THINK_PORT",
    "THINK_API_KEYS",
    "THINK_DEFAULT_TENANT",
    "THINK_PUBLIC_URL",
    "THINK_TEMPORAL_UI_URL",
    "THINK_CORS_ORIGINS",
    "THINK_HEADER_TIMEOUT_SECONDS",
    "THINK_KEEP_ALIVE_SECONDS",
    "THINK_MAX_BODY_BYTES",
    "THINK_SUBMISSIONS_PER_MINUTE",
    "THINK_SUBMISSION_BURST",
    "THINK_MAX_STREAMS_PER_TENANT",
    "THINK_TENANT_DAILY_TOKENS",
    "THINK_TENANT_DAILY_COST",
    "THINK_DB_POOL_SIZE",
    "THINK_API_SHUTDOWN_GRACE_SECONDS",
)
_WORKER = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "THINK_MODEL_ENDPOINTS",
    "THINK_NATIVE_STRUCTURED_OUTPUT",
    "THINK_WORKER_METRICS_PORT",
    "THINK_WORKSPACE_MAX_FILE_BYTES",
    "THINK_WORKSPACE_MAX_BYTES",
    "THINK_WORKSPACE_MAX_FILES",
    "THINK_TENANT_WORKSPACE_MAX_BYTES",
    "THINK_CHUNK_RETENTION_SECONDS",
    "THINK_PENDING_SWEEP_SECONDS",
    "THINK_WORKFLOW_SANDBOX",
    "THINK_WORKFLOW_TASKS_INLINE",
    "THINK_EARLY_FIRST_STEP",
    "THINK_WORKER_MAX_ACTIVITIES",
    "THINK_WORKER_WORKFLOW_TASK_SLOTS",
    "THINK_DB_POOL_SIZE",
    "THINK_WORKER_SHUTDOWN_GRACE_SECONDS",
    "THINK_TURN_RETENTION_DAYS",
    "THINK_CONVERSATION_RETENTION_DAYS",
    "THINK_RETENTION_SWEEP_SECONDS",
    "THINK_WEBHOOK_URLS",
    "THINK_WEBHOOK_SECRET",
    "THINK_WEBHOOK_PRIVATE_HOSTS",
    "THINK_WEBHOOK_RETRY_SECONDS",
    "THINK_WEBHOOK_GIVE_UP_SECONDS",
    "THINK_WEBHOOK_TIMEOUT_SECONDS",
)

COMMAND_VARIABLES: dict[str, tuple[str, ...]] = {
    "dev": (
        "THINK_PORT",
        *_HOSTED,
        "THINK_HOME",
        "THINK_API_KEYS",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "THINK_DATABASE_URL",
        "TEMPORAL_ADDRESS",
        "TEMPORAL_NAMESPACE",
    ),
    "migrate": _SERVICES,
    "api": (*_SERVICES, *_HOSTED, *_PROCESS, *_GATEWAY),
    "worker": (*_SERVICES, *_HOSTED, *_PROCESS, *_WORKER),
    "schedules": (*_SERVICES, *_HOSTED, "THINK_DEFAULT_TENANT"),
}
"""The variables each subcommand reads (`dev`: those that matter most; its API and worker
read the rest, as `think api` and `think worker` do)."""

_WIDTH = 96


def environment_epilog(command: str) -> str:
    """`--help`'s closing lines for `command`: each variable, and what it does up to the
    first `;` of its description, wrapped beside it."""
    described = {v.name: v.description for v in variables()}
    names = COMMAND_VARIABLES[command]
    width = max(len(n) for n in names) + 4
    lines = ["environment (`think settings` has every variable, with its default):"]
    for name in names:
        what = described[name].split("; ")[0].strip()
        lines.extend(
            textwrap.wrap(
                what,
                _WIDTH,
                initial_indent=f"  {name}".ljust(width),
                subsequent_indent=" " * width,
            )
        )
    if command == "dev":
        lines.append("  …and every variable of `think api --help` and `think worker --help`")
    return "\n".join(lines)
