"""`Settings`: one field per variable, with its name, type, default, bounds and help; and
`from_env`, the one place an environment is read."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from think._settings import _process, _temporal, _webhooks
from think._settings._api_keys import parse_api_keys
from think._settings._defaults import (
    DEFAULT_TENANT_WORKSPACE_MAX_BYTES,
    DEFAULT_WORKSPACE_MAX_BYTES,
    DEFAULT_WORKSPACE_MAX_FILE_BYTES,
    DEFAULT_WORKSPACE_MAX_FILES,
    MULTI_TENANT_SUBMISSIONS_PER_MINUTE,
)
from think._settings._dev_stack import lend_dev_stack
from think._settings._endpoints import MODEL_ENDPOINTS_VAR, Endpoint, parse_model_endpoints
from think._settings._environment import (
    EnvironmentSource,
    Variable,
    configuration_error,
    declared_variables,
)
from think._settings._process import LogFormat, LogLevel
from think.exceptions import ConfigurationError

DEFAULT_AGENTS = "examples.assistant:Assistant"
NATIVE_OUTPUT_VAR = "THINK_NATIVE_STRUCTURED_OUTPUT"

EventLoop = Literal["auto", "uvloop", "asyncio"]

_MiB = 1024 * 1024
_DAY = 24 * 3600.0
_NO_SPACES = re.compile(r"\S+")
_WEB_URL = re.compile(r"https?://\S+")
_ORIGIN = re.compile(r"https?://[^/\s]+")
_IMPORT_PATH = re.compile(r"[\w.]+:[\w.]+")
_URL_EXAMPLES = {
    "public_url": "https://chat.example.com",
    "temporal_ui_url": "http://localhost:8233",
    "openai_base_url": "https://api.openai.com/v1",
}
_POSTGRES_SCHEMES = ("postgresql+psycopg://", "postgresql://", "postgres://")


class Settings(BaseSettings):
    """The deployment's configuration: one field per variable, and two derived fields.

    A field is a variable exactly when it declares `validation_alias` (the variable's name);
    `variables()` lists them in this order for `think settings` and the docs. `repr=False`
    marks a secret: never shown, in an error message either.
    """

    model_config = SettingsConfigDict(
        # Names as written (Linux's are case-sensitive); an empty variable counts as unset.
        case_sensitive=True,
        env_ignore_empty=True,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
    )

    # ------------------------------------------------------------------ the services (API.md)
    agents: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: [DEFAULT_AGENTS],
        validation_alias="THINK_AGENTS",
        description="the agents to host: `module:Class` import paths, comma-separated; it "
        "replaces the bundled assistant, so list both to keep it",
        examples=["my_agents:Forecaster,examples.assistant:Assistant"],
    )
    workflows: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias="THINK_WORKFLOWS",
        description="your own Temporal workflows for the workers to host beside the turns "
        "(`@workflow.defn` classes that call `think.workflow.run_turn`): `module:Class` "
        "import paths, comma-separated",
        examples=["examples.webhook_reply:WebhookReply"],
    )
    activities: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias="THINK_ACTIVITIES",
        description="your own Temporal activities for the workers to host (`@activity.defn` "
        "functions those workflows call): `module:function` import paths, comma-separated",
        examples=["examples.webhook_reply:post_reply"],
    )
    database_url: str | None = Field(
        default=None,
        validation_alias="THINK_DATABASE_URL",
        repr=False,
        description="Postgres (`postgresql://user:pass@db:5432/think`); unset: that of a "
        "running `think dev`",
        examples=["postgresql://think:secret@db:5432/think"],
    )
    # Temporal's own variables (`temporalio.envconfig`): _temporal.py declares them and says
    # which wins over which.
    temporal_address: _temporal.HostPort | None = _temporal.ADDRESS
    temporal_namespace: _temporal.Namespace = _temporal.NAMESPACE
    temporal_api_key: _temporal.OneWord | None = _temporal.API_KEY
    temporal_tls: bool | None = _temporal.TLS
    temporal_tls_client_cert_path: _temporal.ReadableFile | None = _temporal.CLIENT_CERT_PATH
    temporal_tls_client_key_path: _temporal.ReadableFile | None = _temporal.CLIENT_KEY_PATH
    temporal_tls_server_ca_cert_path: _temporal.ReadableFile | None = _temporal.SERVER_CA_CERT_PATH
    temporal_tls_server_name: _temporal.HostName | None = _temporal.SERVER_NAME
    temporal_profile: _temporal.OneWord | None = _temporal.PROFILE
    temporal_config_file: _temporal.ReadableFile | None = _temporal.CONFIG_FILE
    temporal_profile_values: dict[str, Any] = _temporal.PROFILE_VALUES
    task_queue: str = Field(
        default="think",
        validation_alias="THINK_TASK_QUEUE",
        description="the task queue the workers poll and the gateway starts turns on",
        examples=["think-eu"],
    )
    openai_base_url: str | None = Field(
        default=None,
        validation_alias="OPENAI_BASE_URL",
        description="an OpenAI-compatible endpoint (Chat Completions, streaming, tools); "
        "unset, with no key either: the offline model",
        examples=["http://localhost:11434/v1"],
    )
    openai_api_key: str | None = Field(
        default=None,
        validation_alias="OPENAI_API_KEY",
        repr=False,
        description="the key of that endpoint (a local server may need none)",
        examples=["sk-test"],
    )
    api_keys: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        validation_alias="THINK_API_KEYS",
        repr=False,
        description="bearer keys, comma-separated `key:tenant` (or `key:tenant:name`, a named "
        "approver's key); when set, `/v1` needs `Authorization: Bearer`. Unset: one tenant "
        "(`default`), no authentication",
        examples=["k1:acme,k2:acme:ops-lead,k3:globex"],
    )
    default_tenant: str = Field(
        default="default",
        validation_alias="THINK_DEFAULT_TENANT",
        description="the tenant of requests without a key (when THINK_API_KEYS is unset), of "
        "keys given without one, and of `ThinkService` and `think schedules` unless told; "
        "name it as your first key's tenant to keep the conversations made before keys",
        examples=["acme"],
    )
    api_key_names: dict[str, str] = Field(default_factory=dict, repr=False)
    """Bearer key -> its name, for keys given as `key:tenant:name` (a named approver's key,
    `key:acme:ops-lead`); a key without a name is its tenant's own. Read from THINK_API_KEYS."""

    # ------------------------------------------------------------------ where and how it runs
    home: Path = Field(
        default=Path(".think"),
        validation_alias="THINK_HOME",
        description="where `think dev` keeps its data and `endpoints.json`; unset, a "
        "process looks for `.think` here and in the directories above",
        examples=["/srv/think/.think"],
    )
    temporal_ui_url: str | None = Field(
        default=None,
        validation_alias="THINK_TEMPORAL_UI_URL",
        description="the Temporal Web UI, for the chat page's links to a turn's workflow "
        "(`think dev` sets it); unset: no links",
        examples=["http://localhost:8233"],
    )
    public_url: str | None = Field(
        default=None,
        validation_alias="THINK_PUBLIC_URL",
        description="the base of the `stream_url` and `status_url` a turn carries "
        "(`https://api.example.com`); unset they are paths (`/v1/...`). Never taken from the "
        "`Host` header, which a client chooses",
        examples=["https://chat.example.com"],
    )
    port: int = Field(
        default=8000,
        ge=0,
        le=65535,
        validation_alias="THINK_PORT",
        description="the port `think api` and `think dev` serve the API on, unless `--port` "
        "says (`THINK_PORT=8001 make dev`); `0`: a free one",
        examples=["8001"],
    )
    worker_metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        validation_alias="THINK_WORKER_METRICS_PORT",
        description="a worker serves Prometheus metrics at `/metrics` on this port (all "
        "interfaces); unset: none, since two workers on one host need two ports",
        examples=["9464"],
    )
    worker_workflow_task_slots: int | None = _process.WORKER_WORKFLOW_TASK_SLOTS
    event_loop: EventLoop = Field(
        default="auto",
        validation_alias="THINK_EVENT_LOOP",
        description="the event loop of `think api` and `think worker`: `auto` (uvloop where "
        "installed), `uvloop`, or `asyncio` (the standard library's)",
        examples=["asyncio"],
    )
    """uvloop: a quarter fewer system calls per turn, 3-4% less CPU (docs/benchmarks.md)."""

    log_level: LogLevel = _process.LOG_LEVEL
    log_format: LogFormat = _process.LOG_FORMAT
    webhook_urls: _webhooks.Urls = _webhooks.WEBHOOK_URLS
    webhook_secret: _webhooks.Secret = _webhooks.WEBHOOK_SECRET
    webhook_private_hosts: _webhooks.Hosts = _webhooks.WEBHOOK_PRIVATE_HOSTS
    webhook_retry_seconds: float = _webhooks.WEBHOOK_RETRY_SECONDS
    webhook_give_up_seconds: float = _webhooks.WEBHOOK_GIVE_UP_SECONDS
    webhook_timeout_seconds: float = _webhooks.WEBHOOK_TIMEOUT_SECONDS

    # ------------------------------------------------------------------ the gateway's limits
    header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        lt=86400,
        validation_alias="THINK_HEADER_TIMEOUT_SECONDS",
        description="a connection must send its whole request headers within this after it "
        "opens (or after its previous answer), else 408 and closed: no slow loris",
        examples=["2.5"],
    )
    keep_alive_seconds: float = Field(
        default=5.0,
        gt=0,
        lt=86400,
        validation_alias="THINK_KEEP_ALIVE_SECONDS",
        description="an idle keep-alive connection is closed after this",
        examples=["30"],
    )
    submissions_per_minute: float | None = Field(
        default=None,
        ge=0,
        validation_alias="THINK_SUBMISSIONS_PER_MINUTE",
        description="turns a tenant may start a minute (submissions and regenerates) across "
        "every gateway of the deployment, beyond its burst; over it, 429 with `Retry-After`. "
        "`0`: off. Unset: off without `THINK_API_KEYS`, 600 with them (set it for a "
        "multi-tenant deployment: docs/operating.md, Limits)",
        examples=["120", "0"],
    )
    submission_burst: int = Field(
        default=60,
        ge=0,
        validation_alias="THINK_SUBMISSION_BURST",
        description="how many turns a tenant may start at once before the rate applies (a "
        "token bucket)",
        examples=["10"],
    )
    max_streams_per_tenant: int = Field(
        default=100,
        ge=0,
        validation_alias="THINK_MAX_STREAMS_PER_TENANT",
        description="SSE streams a tenant may hold open across every gateway; over it, 429. "
        "`0`: off",
        examples=["20"],
    )
    tenant_daily_tokens: int | None = Field(
        default=None,
        ge=1,
        validation_alias="THINK_TENANT_DAILY_TOKENS",
        description="input and output tokens a tenant's turns may use a UTC day; past it, "
        "submissions answer 429 (`/problems/budget-exhausted`) until midnight UTC. Unset: none",
        examples=["2000000"],
    )
    tenant_daily_cost: float | None = Field(
        default=None,
        gt=0,
        validation_alias="THINK_TENANT_DAILY_COST",
        description="US dollars a tenant's turns may spend a UTC day, at the prices of the "
        "models' endpoints (steps of unpriced models count nothing); past it, submissions "
        "answer 429 (`/problems/budget-exhausted`) until midnight UTC. Unset: none",
        examples=["25.00"],
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias="THINK_CORS_ORIGINS",
        description="comma-separated origins whose pages may call the API from a browser "
        "(`https://chat.example.com`); none: no CORS headers, so only same-origin pages can",
        examples=["https://chat.example.com,http://localhost:3000"],
    )
    max_body_bytes: int = Field(
        default=16 * _MiB,
        ge=1,
        validation_alias="THINK_MAX_BODY_BYTES",
        description="request bodies above it answer 413; a pasted document or an image must fit",
        examples=["1048576"],
    )

    # ------------------------------------------------------------------ workspace quotas
    workspace_max_file_bytes: int = Field(
        default=DEFAULT_WORKSPACE_MAX_FILE_BYTES,
        ge=0,
        validation_alias="THINK_WORKSPACE_MAX_FILE_BYTES",
        description="the largest workspace file a write may leave; `0`: off",
        examples=["1000000"],
    )
    workspace_max_bytes: int = Field(
        default=DEFAULT_WORKSPACE_MAX_BYTES,
        ge=0,
        validation_alias="THINK_WORKSPACE_MAX_BYTES",
        description="the bytes of one conversation's workspace; `0`: off",
        examples=["0"],
    )
    workspace_max_files: int = Field(
        default=DEFAULT_WORKSPACE_MAX_FILES,
        ge=0,
        validation_alias="THINK_WORKSPACE_MAX_FILES",
        description="the files of one conversation's workspace; `0`: off",
        examples=["500"],
    )
    tenant_workspace_max_bytes: int = Field(
        default=DEFAULT_TENANT_WORKSPACE_MAX_BYTES,
        ge=0,
        validation_alias="THINK_TENANT_WORKSPACE_MAX_BYTES",
        description="the bytes of all of one tenant's workspaces; `0`: off",
        examples=["53687091200"],
    )
    """A write past any of the four is refused (a tool error naming the variable), so that one
    conversation cannot fill the database, nor one model loop a worker's memory."""

    # ------------------------------------------------------------------ streams and workers
    chunk_retention_seconds: float = Field(
        default=_DAY,
        ge=0,
        validation_alias="THINK_CHUNK_RETENTION_SECONDS",
        description="how long a finished turn's stream can be replayed; the turn's record is "
        "kept as `THINK_TURN_RETENTION_DAYS` says, its message as long as its conversation",
        examples=["3600"],
    )
    turn_retention_days: float | None = Field(
        default=None,
        gt=0,
        validation_alias="THINK_TURN_RETENTION_DAYS",
        description="days an ended turn's record (its request, answer, stream and decisions) "
        "is kept after it was submitted; its messages stay in the conversation and its usage "
        "in every sum. Unset: forever (an agent's `turn_retention_days` overrides it)",
        examples=["30"],
    )
    conversation_retention_days: float | None = Field(
        default=None,
        gt=0,
        validation_alias="THINK_CONVERSATION_RETENTION_DAYS",
        description="days a conversation may stay idle (no turn, message or workspace write) "
        "before it is deleted with everything it owns. Unset: forever (an agent's "
        "`conversation_retention_days` overrides it)",
        examples=["365"],
    )
    retention_sweep_seconds: float = Field(
        default=3600.0,
        ge=10,
        validation_alias="THINK_RETENTION_SWEEP_SECONDS",
        description="how often the retention sweep (a Temporal Schedule) runs: expired turn "
        "records and idle conversations are gone within this",
        examples=["600"],
    )
    chunk_flush_interval: float = 0.05
    """Seconds a step's stream chunks are gathered before one write (not a variable)."""
    pending_sweep_seconds: float = Field(
        default=30.0,
        gt=0,
        validation_alias="THINK_PENDING_SWEEP_SECONDS",
        description="how often workers re-send to Temporal the turns still `pending` after "
        "this long (a gateway that died between its commit and its Temporal call leaves one)",
        examples=["10"],
    )
    model_endpoints: Annotated[dict[str, Endpoint], NoDecode] = Field(
        default_factory=dict,
        validation_alias=MODEL_ENDPOINTS_VAR,
        repr=False,  # an entry may hold a literal `api_key`
        description="named endpoints beside the default one, a JSON object: "
        '`{"cheap": {"base_url": "https://…/v1", "api_key_env": "CHEAP_KEY"}}`; the model '
        "`cheap/gpt-4o-mini` is then `gpt-4o-mini` there; an entry also takes "
        '`"native_output": false` and `"think_tags": "off"` (a leading `<think>` block stays text)',
        examples=['{"local": {"base_url": "http://localhost:11434/v1", "native_output": false}}'],
    )
    native_structured_output: bool = Field(
        default=True,
        validation_alias=NATIVE_OUTPUT_VAR,
        description="whether the default endpoint takes `response_format`; off: structured "
        "output goes through a final-answer tool",
        examples=["off"],
    )
    workflow_sandbox: bool = Field(
        default=False,
        validation_alias="THINK_WORKFLOW_SANDBOX",
        description="run workflows in Temporal's sandbox (see docs/architecture.md)",
        examples=["on"],
    )
    """Off by default: it re-imports the workflow modules for every run and proxies every
    activation, which cost a turn tens of milliseconds of worker CPU. The replay tests always
    use the sandbox, so a nondeterministic call in workflow code still fails CI."""
    workflow_tasks_inline: bool = Field(
        default=True,
        validation_alias="THINK_WORKFLOW_TASKS_INLINE",
        description="run workflow activations on the worker's event-loop thread; off: in a "
        "thread pool, with Temporal's deadlock detector",
        examples=["0"],
    )
    """Temporal's `debug_mode`: a tool turn 69 ms instead of 93, at the cost of the SDK's
    deadlock detector (docs/architecture.md, "Activations run on the worker's event-loop
    thread", says why that is safe here)."""
    early_first_step: bool = Field(
        default=True,
        validation_alias="THINK_EARLY_FIRST_STEP",
        description="the worker that starts a turn's workflow begins its first step, up to its "
        "model request, beside the start; off: the step begins when the workflow asks",
        examples=["no"],
    )
    """`think.engine.activities.EarlySteps`: the model's first words no longer wait for
    Temporal's start (docs/architecture.md, `THINK_EARLY_FIRST_STEP`, says what it costs)."""

    worker_max_activities: int = _process.WORKER_MAX_ACTIVITIES
    db_pool_size: int = _process.DB_POOL_SIZE
    worker_shutdown_grace_seconds: float = _process.WORKER_SHUTDOWN_GRACE_SECONDS
    api_shutdown_grace_seconds: float = _process.API_SHUTDOWN_GRACE_SECONDS

    # ------------------------------------------------------------------ reading the values
    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only the arguments: `Settings()` is the defaults wherever it runs (a test, a bench,
        `think dev`'s children), and the environment is read by `from_env` alone."""
        return (init_settings,)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, find_dev_stack: bool = True
    ) -> Settings:
        """The settings the variables describe, with what a Temporal profile adds (see
        `_temporal.py`) and a running `think dev`'s services filled in (see
        `with_dev_endpoints`) unless `find_dev_stack` is false (`think dev` itself).

        Raises `ConfigurationError` naming the variable of any value that cannot be read."""
        env = os.environ if env is None else env
        values = EnvironmentSource(cls, env)()
        if MODEL_ENDPOINTS_VAR in values:  # its entries name variables of `env` to read keys from
            values[MODEL_ENDPOINTS_VAR] = parse_model_endpoints(values[MODEL_ENDPOINTS_VAR], env)
        try:
            settings = cls(**values)
        except ValidationError as error:
            raise configuration_error(cls, error, env) from None
        settings = _temporal.with_profile(settings, env, "TEMPORAL_NAMESPACE" in values)
        if not find_dev_stack:
            return settings
        return settings.with_dev_endpoints(search_parents=not env.get("THINK_HOME", "").strip())

    # ------------------------------------------------------------------ reading one value
    @model_validator(mode="before")
    @classmethod
    def _keys_and_their_names(cls, data: Any) -> Any:
        """THINK_API_KEYS fills two fields: the tenant of each key, and the names of those
        given one."""
        raw = data.get("THINK_API_KEYS") if isinstance(data, dict) else None
        if not isinstance(raw, str):
            return data
        tenant = data.get("THINK_DEFAULT_TENANT") or data.get("default_tenant") or "default"
        keys, names = parse_api_keys(raw, str(tenant))
        return {**data, "THINK_API_KEYS": keys, "api_key_names": names}

    @field_validator("agents", "workflows", "activities", mode="before")
    @classmethod
    def _import_paths(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        paths = [a.strip() for a in value.split(",") if a.strip()]
        for path in paths:
            if not _IMPORT_PATH.fullmatch(path):
                raise ValueError(f"entry {path!r} is not of the form 'module:Class'")
        return paths

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        origins = [o.strip().rstrip("/") for o in value.split(",") if o.strip()]
        for origin in origins:
            if origin != "*" and not _ORIGIN.fullmatch(origin):
                raise ValueError(
                    f"origin {origin!r} is not scheme://host[:port] such as "
                    "https://chat.example.com (or *)"
                )
        return origins

    @field_validator("public_url", "temporal_ui_url", "openai_base_url", mode="before")
    @classmethod
    def _web_url(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str) and info.field_name != "openai_base_url":
            value = value.rstrip("/") or None  # the base of URLs the gateway builds
        if isinstance(value, str) and not _WEB_URL.fullmatch(value):
            example = _URL_EXAMPLES[info.field_name or ""]
            raise ValueError(f"expected an http:// or https:// URL such as {example}")
        return value

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(_POSTGRES_SCHEMES):
            raise ValueError("expected a Postgres URL such as postgresql://user:pass@db:5432/think")
        return value

    @field_validator("task_queue", "openai_api_key", "default_tenant")
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        if value is not None and not _NO_SPACES.fullmatch(value):
            raise ValueError("expected one word, without spaces")
        return value

    @field_validator("home")
    @classmethod
    def _written_out(cls, value: Path) -> Path:
        if str(value).startswith("~"):
            raise ValueError("`~` is not expanded here: write the directory out (/home/me/.think)")
        return value

    @field_validator("event_loop", "log_level", "log_format", mode="before")
    @classmethod
    def _any_case(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    def with_dev_endpoints(self, *, search_parents: bool = False) -> Settings:
        """Fill unset Postgres/Temporal addresses, and the deployment's configuration this
        environment does not set, from a running `think dev` (`_dev_stack.lend_dev_stack`)."""
        return lend_dev_stack(self, search_parents=search_parents)

    @property
    def submission_rate(self) -> float:
        """Submissions a tenant may start a minute, 0 for no limit: the variable's value when
        set; unset, none for a deployment without API keys (its one tenant is its operator)
        and `MULTI_TENANT_SUBMISSIONS_PER_MINUTE` for one with them."""
        if self.submissions_per_minute is not None:
            return self.submissions_per_minute
        return MULTI_TENANT_SUBMISSIONS_PER_MINUTE if self.api_keys else 0.0

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
                "no Temporal configured: set TEMPORAL_ADDRESS (or a TEMPORAL_PROFILE with an "
                "address), or start `think dev` "
                "(which runs the Temporal dev server) in this directory or one above it, or "
                "point THINK_HOME at the data directory of a running `think dev`"
            )
        return self.temporal_address


def variables() -> tuple[Variable, ...]:
    """Every variable `Settings` reads, in declaration order."""
    return declared_variables(Settings)
