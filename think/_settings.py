"""Settings read from the environment (the variables of API.md), in one place.

Every component (CLI, gateway, worker, tests) builds a `Settings` and passes it down; nothing
reads `os.environ` anywhere else, so a test can run several configurations in one process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field

DEFAULT_AGENTS = "examples.assistant:Assistant"
ENDPOINTS_FILE = "endpoints.json"


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
    home: Path = Path(".think")
    """Where `think dev` keeps embedded data and the endpoints file."""
    max_body_bytes: int = 1024 * 1024
    chunk_retention_seconds: float = 24 * 3600
    chunk_flush_interval: float = 0.05
    pending_sweep_seconds: float = 30.0
    """How often workers re-send turns still `pending` after this long to Temporal (a gateway
    that died between its Postgres commit and its Temporal call leaves such a turn)."""
    workflow_sandbox: bool = False
    """Run workflows in Temporal's sandbox. Off by default: it re-imports the workflow modules
    for every run and proxies every activation, which cost a turn tens of milliseconds of
    worker CPU. The replay tests always use the sandbox, so a nondeterministic call in workflow
    code still fails CI."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        api_keys: dict[str, str] = {}
        for pair in filter(None, (p.strip() for p in env.get("THINK_API_KEYS", "").split(","))):
            key, sep, tenant = pair.partition(":")
            api_keys[key] = tenant if sep and tenant else "default"
        agents = [
            a.strip() for a in env.get("THINK_AGENTS", DEFAULT_AGENTS).split(",") if a.strip()
        ]
        settings = cls(
            agents=agents,
            database_url=env.get("THINK_DATABASE_URL") or None,
            temporal_address=env.get("TEMPORAL_ADDRESS") or None,
            temporal_namespace=env.get("TEMPORAL_NAMESPACE") or "default",
            task_queue=env.get("THINK_TASK_QUEUE") or "think",
            openai_base_url=env.get("OPENAI_BASE_URL") or None,
            openai_api_key=env.get("OPENAI_API_KEY") or None,
            api_keys=api_keys,
            home=Path(env.get("THINK_HOME") or ".think"),
        )
        if "THINK_MAX_BODY_BYTES" in env:
            settings.max_body_bytes = int(env["THINK_MAX_BODY_BYTES"])
        if env.get("THINK_WORKFLOW_SANDBOX", "").lower() in ("1", "true", "yes"):
            settings.workflow_sandbox = True
        if "THINK_PENDING_SWEEP_SECONDS" in env:
            settings.pending_sweep_seconds = float(env["THINK_PENDING_SWEEP_SECONDS"])
        if "THINK_CHUNK_RETENTION_SECONDS" in env:
            settings.chunk_retention_seconds = float(env["THINK_CHUNK_RETENTION_SECONDS"])
        return settings.with_dev_endpoints()

    def with_dev_endpoints(self) -> Settings:
        """Fill unset Postgres/Temporal addresses from a running `think dev`, if there is one.

        `think dev` writes `.think/endpoints.json`; `think api` or `think worker` started beside
        it then find the embedded services without the user exporting anything.
        """
        path = self.home / ENDPOINTS_FILE
        if (self.database_url and self.temporal_address) or not path.exists():
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
            from think.exceptions import ConfigurationError

            raise ConfigurationError(
                "no Postgres configured: set THINK_DATABASE_URL, or start `think dev` "
                "(which runs an embedded Postgres) in this directory"
            )
        return self.database_url

    def require_temporal_address(self) -> str:
        if not self.temporal_address:
            from think.exceptions import ConfigurationError

            raise ConfigurationError(
                "no Temporal configured: set TEMPORAL_ADDRESS, or start `think dev` "
                "(which runs the Temporal dev server) in this directory"
            )
        return self.temporal_address
