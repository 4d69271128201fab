"""Settings read from the environment (the variables of API.md), in one place.

Every component (CLI, gateway, worker, tests) builds a `Settings` and passes it down; nothing
reads `os.environ` anywhere else, so a test can run several configurations in one process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from think.exceptions import ConfigurationError

DEFAULT_AGENTS = "examples.assistant:Assistant"
ENDPOINTS_FILE = "endpoints.json"
MODEL_ENDPOINTS_VAR = "THINK_MODEL_ENDPOINTS"
NATIVE_OUTPUT_VAR = "THINK_NATIVE_STRUCTURED_OUTPUT"
_ENDPOINT_KEYS = ("base_url", "api_key", "api_key_env", "native_output")


class Endpoint(BaseModel):
    """A named OpenAI-compatible endpoint, so that one agent can use two providers.

    Configured in `THINK_MODEL_ENDPOINTS`; the model id `"cheap/gpt-4o-mini"` means the model
    `gpt-4o-mini` on the endpoint named `cheap` (see `think.models.resolve_model`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str | None = None
    """None: OpenAI's own API."""
    api_key: str | None = Field(default=None, repr=False)
    native_output: bool = True
    """Send structured output as `response_format`; off for servers that reject it (the turn
    then asks for the answer through a final-answer tool)."""
    api_key_env: str | None = None
    """The variable the key is read from, when it came from one: named if it was not set."""


DEFAULT_WORKSPACE_MAX_FILE_BYTES = 10 * 1024 * 1024
"""One workspace file: as much as `read` shows a model as media, under the 16 MiB body limit. A
model writes a file through a tool call's arguments, which its output-token limit keeps far
below this (128k tokens are about half a MiB); a file this large is a loop or an attack."""
DEFAULT_WORKSPACE_MAX_BYTES = 100 * 1024 * 1024
"""One conversation's workspace: ten files of the largest size."""
DEFAULT_WORKSPACE_MAX_FILES = 10_000
"""Files in one conversation's workspace: `ls`, `find` and `grep` read every one of them."""
DEFAULT_TENANT_WORKSPACE_MAX_BYTES = 10 * 1024 * 1024 * 1024
"""All of one tenant's workspaces: a hundred conversations at `DEFAULT_WORKSPACE_MAX_BYTES`.
The conversation limits bound one conversation, not how many a tenant opens; this bounds what
one tenant can make the database hold, high enough that a tenant of ordinary use (a few MiB a
conversation, thousands of conversations) does not meet it. Its check reads one usage row
(migration 0014), so it costs the same at any tenant size (docs/benchmarks.md, "The quota
check"). A single-tenant deployment has every conversation in the tenant `default`: one that
means to keep more raises it, or sets 0 (off)."""

EventLoop = Literal["auto", "uvloop", "asyncio"]
_EVENT_LOOPS: dict[str, EventLoop] = {"auto": "auto", "uvloop": "uvloop", "asyncio": "asyncio"}


class Settings(BaseModel):
    agents: list[str] = Field(default_factory=lambda: [DEFAULT_AGENTS])
    database_url: str | None = None
    temporal_address: str | None = None
    temporal_namespace: str = "default"
    task_queue: str = "think"
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    api_keys: dict[str, str] = Field(default_factory=dict)
    """Bearer key -> tenant. Empty: one tenant (`default`), no authentication."""
    api_key_names: dict[str, str] = Field(default_factory=dict, repr=False)
    """Bearer key -> its name, for keys given as `key:tenant:name` (a named approver's key,
    `key:acme:ops-lead`); a key without a name is its tenant's own."""
    temporal_ui_url: str | None = None
    """`THINK_TEMPORAL_UI_URL`: the Temporal Web UI, for the chat page's links to a turn's
    workflow (`think dev` sets it to the embedded server's UI). None: the page shows no link."""
    home: Path = Path(".think")
    """Where `think dev` keeps embedded data and the endpoints file."""
    public_url: str | None = None
    """`THINK_PUBLIC_URL`: where clients reach the gateway (`https://chat.example.com`), the
    base of a turn's `stream_url` and `status_url`. Unset, they are paths (`/v1/...`): never
    built from the request's Host header, which any client can set."""
    worker_metrics_port: int | None = None
    """`THINK_WORKER_METRICS_PORT`: a worker serves Prometheus metrics at `/metrics` on this
    port (all interfaces). Unset: none (two workers on one host need two ports)."""
    header_timeout_seconds: float = 10.0
    """`THINK_HEADER_TIMEOUT_SECONDS`: a connection that has not sent its whole request
    headers this long after it opened (or after its previous answer) is answered 408 and
    closed, so slow clients cannot hold the gateway's connections (slow loris)."""
    keep_alive_seconds: float = 5.0
    """`THINK_KEEP_ALIVE_SECONDS`: an idle keep-alive connection is closed after this long."""
    submissions_per_minute: float = 600.0
    """`THINK_SUBMISSIONS_PER_MINUTE`: turns (submissions and regenerates) one tenant may
    start a minute on one gateway, beyond its burst; over it, 429 with Retry-After. 0: off."""
    submission_burst: int = 60
    """`THINK_SUBMISSION_BURST`: how many a tenant may submit at once before the rate applies."""
    max_streams_per_tenant: int = 100
    """`THINK_MAX_STREAMS_PER_TENANT`: SSE streams one tenant may hold open on one gateway;
    over it, 429. 0: off."""
    cors_origins: list[str] = Field(default_factory=list)
    """`THINK_CORS_ORIGINS`: comma-separated origins (`https://chat.example.com`) whose pages
    may call the API from a browser. Empty: no CORS headers, so only same-origin pages can."""
    max_body_bytes: int = 16 * 1024 * 1024
    """`THINK_MAX_BODY_BYTES`: bodies over it answer 413; a pasted document or an image must fit."""
    workspace_max_file_bytes: int = DEFAULT_WORKSPACE_MAX_FILE_BYTES
    """`THINK_WORKSPACE_MAX_FILE_BYTES`: the largest workspace file a write may leave. 0: off."""
    workspace_max_bytes: int = DEFAULT_WORKSPACE_MAX_BYTES
    """`THINK_WORKSPACE_MAX_BYTES`: the bytes of one conversation's workspace. 0: off."""
    workspace_max_files: int = DEFAULT_WORKSPACE_MAX_FILES
    """`THINK_WORKSPACE_MAX_FILES`: the files of one conversation's workspace. 0: off."""
    tenant_workspace_max_bytes: int = DEFAULT_TENANT_WORKSPACE_MAX_BYTES
    """`THINK_TENANT_WORKSPACE_MAX_BYTES`: the bytes of all of one tenant's workspaces. 0: off.
    A write past any of the four is refused (a tool error naming the variable), so that one
    conversation cannot fill the database, nor one model loop a worker's memory."""
    chunk_retention_seconds: float = 24 * 3600
    chunk_flush_interval: float = 0.05
    pending_sweep_seconds: float = 30.0
    """How often workers re-send turns still `pending` after this long to Temporal (a gateway
    that died between its Postgres commit and its Temporal call leaves such a turn)."""
    model_endpoints: dict[str, Endpoint] = Field(default_factory=dict)
    """Named endpoints (`THINK_MODEL_ENDPOINTS`), beside the default one of `OPENAI_BASE_URL`."""
    native_structured_output: bool = True
    """Whether the default endpoint takes `response_format` (`THINK_NATIVE_STRUCTURED_OUTPUT=0`:
    it does not, and structured output goes through a final-answer tool)."""
    workflow_sandbox: bool = False
    """Run workflows in Temporal's sandbox. Off by default: it re-imports the workflow modules
    for every run and proxies every activation, which cost a turn tens of milliseconds of
    worker CPU. The replay tests always use the sandbox, so a nondeterministic call in workflow
    code still fails CI."""

    workflow_tasks_inline: bool = True
    """Run each workflow activation on the worker's event-loop thread (Temporal's
    `debug_mode`), not in a thread pool whose answer the loop then waits for. That hand-off is
    a round trip of the GIL between two threads, five times a tool turn; in a paired A/B on
    two cores (docs/benchmarks.md, the eleventh session) a tool turn took 69 ms inline against
    93, the first `text-delta` 42 against 48, and one worker ran 21.4 tool turns/s against
    19.3. What it gives up is the SDK's deadlock detector (a workflow task that blocks for 2 s
    fails): the workflows are the framework's own, with no user code in them, and a stuck one
    would stall the worker's loop, which the turns' timeouts then expose.
    `THINK_WORKFLOW_TASKS_INLINE=0` brings the thread pool back."""

    early_first_step: bool = True
    """The worker that starts a turn's workflow begins the turn's first step beside the start,
    up to and including its model request (`think.engine.activities.EarlySteps`): the step,
    which the eager start runs in the same process, takes it on. The model's first words are
    then no longer behind Temporal's start and the workflow's first activation. In the rare
    case that the start fails or is not eager (no free workflow-task slot in the worker), the
    request is cut off and made again by the step wherever it runs: a model request paid for
    nothing. `THINK_EARLY_FIRST_STEP=0` turns it off."""

    event_loop: EventLoop = "auto"
    """`THINK_EVENT_LOOP`: the event loop of `think api` and `think worker`. `auto` takes
    uvloop where it is installed (a dependency, except on Windows): a quarter fewer system
    calls per turn, and 3-4% less CPU in the worker and the gateway (docs/benchmarks.md).
    `asyncio` keeps the standard library's, e.g. to debug the loop itself."""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, find_dev_stack: bool = True
    ) -> Settings:
        """The settings the variables describe, with a running `think dev`'s services filled in
        (see `with_dev_endpoints`) unless `find_dev_stack` is false (`think dev` itself)."""
        env = os.environ if env is None else env
        api_keys: dict[str, str] = {}
        api_key_names: dict[str, str] = {}
        for pair in filter(None, (p.strip() for p in env.get("THINK_API_KEYS", "").split(","))):
            key, sep, rest = pair.partition(":")
            tenant, _, name = rest.partition(":")
            api_keys[key] = tenant if sep and tenant else "default"
            if name:
                api_key_names[key] = name
        agents = [
            a.strip() for a in env.get("THINK_AGENTS", DEFAULT_AGENTS).split(",") if a.strip()
        ]
        settings = cls(
            agents=agents,
            database_url=env.get("THINK_DATABASE_URL") or None,
            temporal_address=env.get("TEMPORAL_ADDRESS") or None,
            temporal_namespace=env.get("TEMPORAL_NAMESPACE") or "default",
            temporal_ui_url=(env.get("THINK_TEMPORAL_UI_URL") or "").rstrip("/") or None,
            task_queue=env.get("THINK_TASK_QUEUE") or "think",
            openai_base_url=env.get("OPENAI_BASE_URL") or None,
            openai_api_key=env.get("OPENAI_API_KEY") or None,
            api_keys=api_keys,
            api_key_names=api_key_names,
            home=Path(env.get("THINK_HOME") or ".think"),
            public_url=(env.get("THINK_PUBLIC_URL") or "").rstrip("/") or None,
            model_endpoints=parse_model_endpoints(env.get(MODEL_ENDPOINTS_VAR, ""), env),
            native_structured_output=_flag(env, NATIVE_OUTPUT_VAR, default=True),
        )
        if settings.public_url and not settings.public_url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"THINK_PUBLIC_URL={settings.public_url!r}: expected an http:// or https:// URL "
                "such as https://chat.example.com"
            )
        for name, field, parse in _CHECKED_NUMBERS:
            if env.get(name):
                setattr(settings, field, parse(env, name))
        settings.cors_origins = [
            o.strip().rstrip("/") for o in env.get("THINK_CORS_ORIGINS", "").split(",") if o.strip()
        ]
        if "THINK_MAX_BODY_BYTES" in env:
            settings.max_body_bytes = int(env["THINK_MAX_BODY_BYTES"])
        if env.get("THINK_WORKFLOW_SANDBOX", "").lower() in ("1", "true", "yes"):
            settings.workflow_sandbox = True
        settings.workflow_tasks_inline = _flag(env, "THINK_WORKFLOW_TASKS_INLINE", default=True)
        settings.early_first_step = _flag(env, "THINK_EARLY_FIRST_STEP", default=True)
        if env.get("THINK_EVENT_LOOP"):
            loop = _EVENT_LOOPS.get(env["THINK_EVENT_LOOP"].strip().lower())
            if loop is None:
                raise ConfigurationError(
                    f"THINK_EVENT_LOOP={env['THINK_EVENT_LOOP']!r}: "
                    "expected auto, uvloop or asyncio"
                )
            settings.event_loop = loop
        if "THINK_PENDING_SWEEP_SECONDS" in env:
            settings.pending_sweep_seconds = float(env["THINK_PENDING_SWEEP_SECONDS"])
        if "THINK_CHUNK_RETENTION_SECONDS" in env:
            settings.chunk_retention_seconds = float(env["THINK_CHUNK_RETENTION_SECONDS"])
        if not find_dev_stack:
            return settings
        return settings.with_dev_endpoints(search_parents=not env.get("THINK_HOME"))

    def with_dev_endpoints(self, *, search_parents: bool = False) -> Settings:
        """Fill unset Postgres/Temporal addresses from a running `think dev`, if there is one.

        `think dev` writes `.think/endpoints.json`; `think api`, `think worker` or a script using
        `ThinkService` then find the embedded services without the user exporting anything:
        in `home` (THINK_HOME), or, with `search_parents` (THINK_HOME unset), in the `.think`
        of the nearest directory above the current one that has it, as git finds `.git`, so
        a script in a subdirectory of the clone works as well as one at its root.
        """
        if self.database_url and self.temporal_address:
            return self
        path = self.home / ENDPOINTS_FILE
        if not path.exists() and search_parents and not self.home.is_absolute():
            above = (d / self.home / ENDPOINTS_FILE for d in Path.cwd().parents)
            path = next((p for p in above if p.exists()), path)
        if not path.exists():
            return self
        found = json.loads(path.read_text())
        return self.model_copy(
            update={
                "database_url": self.database_url or found.get("database_url"),
                "temporal_address": self.temporal_address or found.get("temporal_address"),
            }
        )

    @property
    def sqlalchemy_url(self) -> str:
        """The database URL in the form SQLAlchemy's async psycopg dialect wants."""
        url = self.require_database_url()
        for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
            if url.startswith(prefix):
                return "postgresql+psycopg://" + url[len(prefix) :]
        return url

    @property
    def libpq_url(self) -> str:
        """The database URL in the plain form psycopg's own connections want."""
        return self.sqlalchemy_url.replace("postgresql+psycopg://", "postgresql://", 1)

    def require_database_url(self) -> str:
        if not self.database_url:
            raise ConfigurationError(
                "no Postgres configured: set THINK_DATABASE_URL, or start `think dev` "
                "(which runs an embedded Postgres) in this directory or one above it, or "
                "point THINK_HOME at the data directory of a running `think dev`"
            )
        return self.database_url

    def require_temporal_address(self) -> str:
        if not self.temporal_address:
            raise ConfigurationError(
                "no Temporal configured: set TEMPORAL_ADDRESS, or start `think dev` "
                "(which runs the Temporal dev server) in this directory or one above it, or "
                "point THINK_HOME at the data directory of a running `think dev`"
            )
        return self.temporal_address


def parse_model_endpoints(raw: str, env: Mapping[str, str]) -> dict[str, Endpoint]:
    """Endpoints from `THINK_MODEL_ENDPOINTS`, a JSON object of endpoints by name.

    `{"cheap": {"base_url": "https://...", "api_key_env": "CHEAP_KEY"}}`: `api_key_env` names
    the variable holding the key, so no secret sits in this JSON (a literal `api_key` is
    accepted too); `native_output: false` for a server that rejects `response_format`. A
    variable that is not set leaves the key empty: the process that calls that endpoint
    reports it, and a process that never does (the API) runs without the secret.
    """
    if not raw.strip():
        return {}

    def bad(problem: str) -> ConfigurationError:
        return ConfigurationError(f"{MODEL_ENDPOINTS_VAR}: {problem}")

    try:
        found = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise bad(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(found, dict):
        raise bad(f"expected a JSON object of endpoints by name, got {type(found).__name__}")
    endpoints: dict[str, Endpoint] = {}
    for name, entry in found.items():
        if not name or "/" in name or name != name.strip():
            raise bad(f"endpoint name {name!r} must be non-empty, without '/' or outer spaces")
        if not isinstance(entry, dict):
            raise bad(f'endpoint {name!r} must be an object such as {{"base_url": ...}}')
        unknown = sorted(set(entry) - set(_ENDPOINT_KEYS))
        if unknown:
            raise bad(
                f"endpoint {name!r} has unknown keys {unknown}; known: {', '.join(_ENDPOINT_KEYS)}"
            )
        key_var = entry.get("api_key_env")
        if key_var is not None:
            if "api_key" in entry:
                raise bad(f"endpoint {name!r} gives both api_key and api_key_env: keep one")
            if not isinstance(key_var, str) or not key_var.strip():
                raise bad(f"endpoint {name!r}: api_key_env must name a variable, not {key_var!r}")
            entry = {**entry, "api_key": env.get(key_var) or None}
        try:
            endpoints[name] = Endpoint.model_validate(entry)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                for e in exc.errors(include_url=False, include_input=False)
            )
            raise bad(f"endpoint {name!r}: {problems}") from None
    return endpoints


def _flag(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    value = env.get(name, "").strip().lower()
    if not value:
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name}={env[name]!r}: expected 1 or 0 (true/false, yes/no, on/off)")


def _port(env: Mapping[str, str], name: str) -> int:
    raw = env[name].strip()
    if not raw.isascii() or not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigurationError(f"{name}={env[name]!r}: expected a TCP port, 1 to 65535")
    return int(raw)


def _seconds(env: Mapping[str, str], name: str) -> float:
    try:
        value = float(env[name])
    except ValueError:
        value = -1.0
    if not 0 < value < 86400:
        raise ConfigurationError(f"{name}={env[name]!r}: expected a number of seconds, above 0")
    return value


def _number(env: Mapping[str, str], name: str, *, whole: bool = False) -> float:
    raw = env[name].strip()
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = -1
    if value < 0:
        kind = "a whole number" if whole else "a number"
        raise ConfigurationError(f"{name}={env[name]!r}: expected {kind}, 0 or more (0: off)")
    return float(value)


def _whole_number(env: Mapping[str, str], name: str) -> int:
    return int(_number(env, name, whole=True))


_CHECKED_NUMBERS: tuple[tuple[str, str, Callable[[Mapping[str, str], str], float]], ...] = (
    ("THINK_WORKER_METRICS_PORT", "worker_metrics_port", _port),
    ("THINK_HEADER_TIMEOUT_SECONDS", "header_timeout_seconds", _seconds),
    ("THINK_KEEP_ALIVE_SECONDS", "keep_alive_seconds", _seconds),
    ("THINK_SUBMISSIONS_PER_MINUTE", "submissions_per_minute", _number),
    ("THINK_SUBMISSION_BURST", "submission_burst", _whole_number),
    ("THINK_MAX_STREAMS_PER_TENANT", "max_streams_per_tenant", _whole_number),
    ("THINK_WORKSPACE_MAX_FILE_BYTES", "workspace_max_file_bytes", _whole_number),
    ("THINK_WORKSPACE_MAX_BYTES", "workspace_max_bytes", _whole_number),
    ("THINK_WORKSPACE_MAX_FILES", "workspace_max_files", _whole_number),
    ("THINK_TENANT_WORKSPACE_MAX_BYTES", "tenant_workspace_max_bytes", _whole_number),
)
"""The numeric variables `Settings.from_env` checks, in that order: each one, when set and not
empty, is read by its parser (which names the variable in its error) into its field."""
