"""What routes receive: the app's shared resources and the caller's identity."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Path, Request
from pydantic import AfterValidator
from temporalio.client import Client

from api._limits import TenantLimits
from api.errors import Problem
from api.schemas import ID_PATTERN
from think.server import (
    AgentRegistry,
    ChunkListener,
    Conversation,
    DailyBudgets,
    Settings,
    Store,
    Think,
)


@dataclass
class Resources:
    """Opened once in the lifespan, shared by every request of the process."""

    settings: Settings
    store: Store
    temporal: Client
    listener: ChunkListener
    registry: AgentRegistry
    limits: TenantLimits
    budgets: DailyBudgets


# Every dependency is `async def`: FastAPI runs a plain `def` in its thread pool, a thread hop
# (and its CPU) for each one on every request.
async def _resources(request: Request) -> Resources:
    resources: Resources = request.app.state.resources
    return resources


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant, and the key's name when it has one (`key:tenant:name`)."""

    tenant: str
    key_name: str | None = None

    @property
    def label(self) -> str:
        """As recorded with a decision: `key:<name>`, or `tenant:<tenant>` for its own key."""
        return f"key:{self.key_name}" if self.key_name else f"tenant:{self.tenant}"


async def require_principal(
    request: Request, resources: Annotated[Resources, Depends(_resources)]
) -> Principal:
    """The caller: from the bearer key when keys are configured, else the tenant of keyless
    requests (`THINK_DEFAULT_TENANT`, `default` unless named)."""
    found = principal_of(resources.settings, request.headers.get("authorization", ""))
    if found is None:
        raise Problem(401, "a valid `Authorization: Bearer <key>` header is required")
    return found


def principal_of(settings: Settings, header: str) -> Principal | None:
    """The caller an `Authorization` header names (None: no valid key), for `/v1` and the
    protocol endpoints (`/mcp`) alike: the tenant of keyless requests when no keys are set."""
    keys = settings.api_keys
    if not keys:
        return Principal(settings.default_tenant)
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer":
        # The header's bytes exactly (Starlette decoded them as Latin-1), less ASCII spaces
        # only: `str.strip()` would also drop what Latin-1 reads as Unicode whitespace (0x85,
        # 0xA0, 0x1C-0x1F), and accept `key\xa0` as `key` where operating.md promises 401.
        given = token.strip(" ").encode("latin-1")
        for key, tenant in keys.items():
            # As bytes: `compare_digest` refuses a `str` that is not ASCII (a 500, not a 401).
            if secrets.compare_digest(given, key.encode()):
                return Principal(tenant, settings.api_key_names.get(key))
    return None


async def require_tenant(principal: Annotated[Principal, Depends(require_principal)]) -> str:
    """The caller's tenant (see `require_principal`)."""
    return principal.tenant


async def _agent(
    resources: Annotated[Resources, Depends(_resources)],
    agent: Annotated[str, Path(description="The agent's name")],
) -> type[Think]:
    return resources.registry.get(agent)


Res = Annotated[Resources, Depends(_resources)]
Tenant = Annotated[str, Depends(require_tenant)]
Caller = Annotated[Principal, Depends(require_principal)]
AgentClass = Annotated[type[Think], Depends(_agent)]
ConversationId = Annotated[str, Path(pattern=ID_PATTERN, description="The conversation id")]
# Turn ids are ours (`turn_<hex>`); checking their shape keeps e.g. a NUL out of the SQL (a 500).
TurnId = Annotated[str, Path(pattern=ID_PATTERN, description="The turn id")]


async def _conversation(
    resources: Res, tenant: Tenant, agent: AgentClass, cid: ConversationId
) -> Conversation:
    found = await resources.store.get_conversation(
        tenant=tenant, agent=agent.name, conversation_id=cid
    )
    if found is None:
        raise Problem(404, f"conversation {cid!r} does not exist for agent {agent.name!r}")
    return found


ExistingConversation = Annotated[Conversation, Depends(_conversation)]


def _printable_ascii(key: str | None) -> str | None:
    # A header arrives as bytes that Starlette reads as Latin-1: a UTF-8 `é` would be stored
    # as `Ã©` and never match the same key sent by a client that encodes it otherwise. Keys
    # are opaque tokens, so the honest answer is to refuse what is not plain ASCII.
    if key is not None and not all(" " <= c <= "~" for c in key):
        raise ValueError(
            "must be printable ASCII (a UUID or another token); this one holds other bytes"
        )
    return key


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        json_schema_extra={"pattern": "^[\\x20-\\x7e]+$"},
        description="Printable ASCII, at most 255 characters: a retry with it is the same turn",
    ),
    AfterValidator(_printable_ascii),
]
