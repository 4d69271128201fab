"""The Postgres schema, as SQLAlchemy 2 typed tables.

ORM rows never leave the storage package: `_store.py` turns them into pydantic records.
The migration in `migrations/versions` is the source of truth for the live schema; these
classes mirror it for queries, and a test checks that the two agree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSONB, list[dict[str, Any]]: JSONB}


def _conversation_key() -> Mapped[str]:
    """`conversation_uid` as the first part of the primary key: one conversation's rows,
    deleted with it."""
    return mapped_column(ForeignKey("conversations.uid", ondelete="CASCADE"), primary_key=True)


def _conversation_ref() -> Mapped[str]:
    """`conversation_uid` outside the primary key: the conversation a row belongs to and is
    deleted with."""
    return mapped_column(ForeignKey("conversations.uid", ondelete="CASCADE"))


def _timestamp_now() -> Mapped[datetime]:
    """A `timestamptz` that defaults to the inserting transaction's `now()` (`created_at`,
    `updated_at`)."""
    return mapped_column(DateTime(timezone=True), server_default=func.now())


class ConversationRow(Base):
    """One conversation. `uid` is internal; (tenant, agent, id) is what clients name."""

    __tablename__ = "conversations"
    uid: Mapped[str] = mapped_column(String, primary_key=True)
    tenant: Mapped[str] = mapped_column(String)
    agent: Mapped[str] = mapped_column(String)
    id: Mapped[str] = mapped_column(String)
    created_at: Mapped[datetime] = _timestamp_now()
    active_leaf_id: Mapped[str | None] = mapped_column(String)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, server_default="{}")
    system_prompt: Mapped[str | None] = mapped_column(Text)
    config: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    turn_count: Mapped[int] = mapped_column(Integer, server_default="0")
    messages_revision: Mapped[int] = mapped_column(Integer, server_default="0")
    """Bumped when a stored message changes in place (migration 0008)."""

    __table_args__ = (
        UniqueConstraint("tenant", "agent", "id", name="conversations_name_key"),
        # The retention sweep: one agent's oldest conversations first (migration 0020).
        Index("conversations_agent_created_idx", "agent", "created_at"),
    )


class MessageRow(Base):
    """A node of the message tree, in the AI SDK UIMessage shape (`id`, `role`, `parts`)."""

    __tablename__ = "messages"
    conversation_uid: Mapped[str] = _conversation_key()
    id: Mapped[str] = mapped_column(String, primary_key=True)
    parent_id: Mapped[str | None] = mapped_column(String)
    role: Mapped[str] = mapped_column(String)
    parts: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSONB)
    turn_id: Mapped[str | None] = mapped_column(String)
    created_at: Mapped[datetime] = _timestamp_now()
    position: Mapped[int] = mapped_column(BigInteger, Identity())
    text_content: Mapped[str] = mapped_column(Text, server_default="")
    search: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('english', text_content)", persisted=True)
    )
    byte_size: Mapped[int] = mapped_column(Integer, server_default="0")

    __table_args__ = (
        Index("messages_parent_idx", "conversation_uid", "parent_id"),
        # One conversation's entries only (btree_gin); migration 0003.
        Index("messages_search_idx", "conversation_uid", "search", postgresql_using="gin"),
        Index("messages_position_idx", "conversation_uid", "position"),
    )


class TurnRow(Base):
    """A submission and its run: the idempotency record, the status, and the assistant draft."""

    __tablename__ = "turns"
    id: Mapped[str] = mapped_column(String, primary_key=True)
    conversation_uid: Mapped[str] = _conversation_ref()
    agent: Mapped[str] = mapped_column(String)
    idempotency_key: Mapped[str | None] = mapped_column(String)
    request_hash: Mapped[str] = mapped_column(String)
    request: Mapped[dict[str, Any]] = mapped_column(JSONB)
    status: Mapped[str] = mapped_column(String)
    created_at: Mapped[datetime] = _timestamp_now()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    message_id: Mapped[str] = mapped_column(String)
    parent_id: Mapped[str | None] = mapped_column(String)
    message: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
    steps_done: Mapped[int] = mapped_column(Integer, server_default="0")
    fences: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    checkpoints: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    """Per step fence, where its model's answer can be picked up again (migration 0015)."""
    steering: Mapped[list[Any]] = mapped_column(JSONB, server_default="[]")
    """The messages sent to the turn while it runs, each delivered at a step boundary (0017)."""
    recovery_data: Mapped[Any | None] = mapped_column(JSONB)
    """The latest value the turn gave `Think.stash`, for `on_chat_recovery` (0018)."""
    next_seq: Mapped[int] = mapped_column(Integer, server_default="0")
    usage: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    config: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    """What `before_turn` decided, for every later step of the turn (migration 0002)."""
    output: Mapped[Any | None] = mapped_column(JSONB)
    """The validated structured output, for turns that asked for one."""
    answered_by: Mapped[str | None] = mapped_column(String)
    """A merged submission's answering turn (migration 0004)."""
    seq: Mapped[int] = mapped_column(BigInteger, Identity(always=False))
    """Acceptance order (migration 0007): the conversation's running turn is its active turn
    with the smallest `seq`."""
    task_queue: Mapped[str | None] = mapped_column(String)
    """The task queue it was admitted for (migration 0013), which the sweeper keeps it on."""

    __table_args__ = (
        UniqueConstraint("conversation_uid", "idempotency_key", name="turns_idempotency_key"),
        Index("turns_conversation_idx", "conversation_uid", "created_at"),
        Index(
            "turns_completed_idx",
            "completed_at",
            postgresql_where=text("completed_at IS NOT NULL"),
        ),
        # The conversation's active (not yet ended) turns: what "drop" admission looks for.
        Index(
            "turns_active_idx",
            "conversation_uid",
            postgresql_where=text("completed_at IS NULL"),
        ),
        Index(
            "turns_queue_idx",
            "conversation_uid",
            "seq",
            postgresql_where=text("completed_at IS NULL"),
        ),
    )


class StreamChunkRow(Base):
    """One UI message stream chunk of a turn; pruned after the retention period."""

    __tablename__ = "stream_chunks"
    turn_id: Mapped[str] = mapped_column(String, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer)
    chunk: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _timestamp_now()


class CompactionRow(Base):
    """A summary that stands in for a span of messages when the model reads the path
    (migration 0005); the messages themselves stay as they are."""

    __tablename__ = "compactions"
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    conversation_uid: Mapped[str] = _conversation_ref()
    first_message_id: Mapped[str] = mapped_column(String)
    last_message_id: Mapped[str] = mapped_column(String)
    summary: Mapped[str] = mapped_column(Text)
    tokens_before: Mapped[int] = mapped_column(Integer)
    tokens_after: Mapped[int] = mapped_column(Integer)
    trigger: Mapped[str] = mapped_column(String)
    turn_id: Mapped[str | None] = mapped_column(String)
    created_at: Mapped[datetime] = _timestamp_now()

    __table_args__ = (
        UniqueConstraint(
            "conversation_uid", "first_message_id", "last_message_id", name="compactions_span_key"
        ),
        Index("compactions_turn_idx", "turn_id", postgresql_where=text("turn_id IS NOT NULL")),
    )


class ModelCallRow(Base):
    """A model call beside a turn's steps, with what it spent (migration 0016): a compaction's
    summarising request. `usage` is a `StepUsage`."""

    __tablename__ = "model_calls"
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    conversation_uid: Mapped[str] = _conversation_ref()
    turn_id: Mapped[str | None] = mapped_column(String)
    purpose: Mapped[str] = mapped_column(String)
    usage: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _timestamp_now()

    __table_args__ = (Index("model_calls_conversation_idx", "conversation_uid", "created_at"),)


class ContextBlockRow(Base):
    """One context block of a conversation (migration 0006): a memory block's content, and the
    fingerprint of the content its frozen system prompt was built with."""

    __tablename__ = "context_blocks"
    conversation_uid: Mapped[str] = _conversation_key()
    label: Mapped[str] = mapped_column(String, primary_key=True)
    content: Mapped[str | None] = mapped_column(Text)
    frozen: Mapped[str | None] = mapped_column(String)
    updated_at: Mapped[datetime] = _timestamp_now()


class ConversationMcpServerRow(Base):
    """An MCP server added to one conversation (0011): `think.tools.McpServer`'s fields."""

    __tablename__ = "conversation_mcp_servers"
    conversation_uid: Mapped[str] = _conversation_key()
    name: Mapped[str] = mapped_column(String, primary_key=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _timestamp_now()


class TurnAnswerRow(Base):
    """An approval decision or a client tool's result, recorded as it arrives (0007)."""

    __tablename__ = "turn_answers"
    turn_id: Mapped[str] = mapped_column(
        ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String, primary_key=True)
    key: Mapped[str] = mapped_column(String, primary_key=True)
    answer: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _timestamp_now()


class WorkspaceFileRow(Base):
    """One file of a conversation's workspace (migration 0010), by its relative path."""

    __tablename__ = "workspace_files"
    conversation_uid: Mapped[str] = _conversation_key()
    path: Mapped[str] = mapped_column(String, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    media_type: Mapped[str] = mapped_column(String)
    size: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = _timestamp_now()


class WorkspaceUsageRow(Base):
    """The bytes and files of all of a tenant's workspaces (0014), kept by triggers on
    `workspace_files` in the transaction of every change to them."""

    __tablename__ = "workspace_usage"
    tenant: Mapped[str] = mapped_column(String, primary_key=True)
    bytes: Mapped[int] = mapped_column(BigInteger, server_default="0")
    files: Mapped[int] = mapped_column(BigInteger, server_default="0")


class WorkspaceOpRow(Base):
    """A workspace write a tool call applied, with what it answered (0010)."""

    __tablename__ = "workspace_ops"
    conversation_uid: Mapped[str] = _conversation_key()
    key: Mapped[str] = mapped_column(String, primary_key=True)
    result: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = _timestamp_now()


class ActionLedgerRow(Base):
    """One run of an `@action` (migration 0019): its key is live while `pending`, `parked` or
    `settled` (one live row per key: the partial unique index); `failed`, `rejected` and
    `expired` rows are the audit trail. Not tied to a conversation by a foreign key."""

    __tablename__ = "action_ledger"
    id: Mapped[str] = mapped_column(String, primary_key=True)
    tenant: Mapped[str] = mapped_column(String)
    agent: Mapped[str] = mapped_column(String)
    key: Mapped[str] = mapped_column(String)
    action: Mapped[str] = mapped_column(String)
    status: Mapped[str] = mapped_column(String)
    input: Mapped[dict[str, Any]] = mapped_column(JSONB)
    input_hash: Mapped[str] = mapped_column(String)
    conversation_id: Mapped[str] = mapped_column(String)
    turn_id: Mapped[str | None] = mapped_column(String)
    tool_call_id: Mapped[str | None] = mapped_column(String)
    requested_by: Mapped[str | None] = mapped_column(String)
    claims: Mapped[int] = mapped_column(Integer, server_default="0")
    attempt: Mapped[int] = mapped_column(Integer, server_default="0")
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    approval_id: Mapped[str | None] = mapped_column(String)
    approval_kind: Mapped[str | None] = mapped_column(String)
    decision: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    approved_by: Mapped[str | None] = mapped_column(String)
    approved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    result: Mapped[Any] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)
    attachments: Mapped[Any] = mapped_column(JSONB)
    replays: Mapped[int] = mapped_column(Integer, server_default="0")
    requested_at: Mapped[datetime] = _timestamp_now()
    ran_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    settled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index(
            "action_ledger_live_key",
            "tenant",
            "agent",
            "key",
            unique=True,
            postgresql_where=text("status IN ('pending', 'parked', 'settled')"),
        ),
        Index(
            "action_ledger_approval",
            "approval_id",
            unique=True,
            postgresql_where=text("approval_id IS NOT NULL"),
        ),
        Index("action_ledger_audit", "tenant", "agent", "requested_at"),
        Index(
            "action_ledger_parked",
            "tenant",
            "requested_at",
            postgresql_where=text("status = 'parked'"),
        ),
    )


class TenantLimitRow(Base):
    """A tenant's submission token bucket (migration 0020), shared by every gateway:
    `THINK_SUBMISSIONS_PER_MINUTE`, taken by one atomic upsert per submission."""

    __tablename__ = "tenant_limits"
    tenant: Mapped[str] = mapped_column(String, primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    refilled_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.clock_timestamp()
    )
    granted: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))


class StreamLeaseRow(Base):
    """One open SSE stream of a tenant (migration 0020), renewed by its gateway while open:
    `THINK_MAX_STREAMS_PER_TENANT` counts the unexpired ones across gateways."""

    __tablename__ = "stream_leases"
    id: Mapped[str] = mapped_column(String, primary_key=True)
    tenant: Mapped[str] = mapped_column(String)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("stream_leases_tenant_idx", "tenant", "expires_at"),)


class MessengerEventRow(Base):
    """An update or event id a messenger's webhook accepted (migration 0021): the dedupe."""

    __tablename__ = "messenger_events"
    tenant: Mapped[str] = mapped_column(String, primary_key=True)
    agent: Mapped[str] = mapped_column(String, primary_key=True)
    messenger: Mapped[str] = mapped_column(String, primary_key=True)
    event_id: Mapped[str] = mapped_column(String, primary_key=True)
    turn_id: Mapped[str | None] = mapped_column(String)
    done: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    created_at: Mapped[datetime] = _timestamp_now()


class MessengerThreadRow(Base):
    """A chat thread → its conversation, and whether a mention subscribed it (0021)."""

    __tablename__ = "messenger_threads"
    tenant: Mapped[str] = mapped_column(String, primary_key=True)
    agent: Mapped[str] = mapped_column(String, primary_key=True)
    messenger: Mapped[str] = mapped_column(String, primary_key=True)
    thread_key: Mapped[str] = mapped_column(String, primary_key=True)
    chat: Mapped[str] = mapped_column(String)
    thread: Mapped[str | None] = mapped_column(String)
    conversation_id: Mapped[str] = mapped_column(String)
    subscribed: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    created_at: Mapped[datetime] = _timestamp_now()

    __table_args__ = (
        Index("messenger_threads_conversation", "tenant", "agent", "messenger", "conversation_id"),
    )


class MessengerDeliveryRow(Base):
    """One reply or notice to post in a thread, with its stage and posted message ids (0021):
    `think.storage.messenger_store` says what each stage means to a recovery."""

    __tablename__ = "messenger_deliveries"
    id: Mapped[str] = mapped_column(String, primary_key=True)
    tenant: Mapped[str] = mapped_column(String)
    agent: Mapped[str] = mapped_column(String)
    messenger: Mapped[str] = mapped_column(String)
    conversation_id: Mapped[str] = mapped_column(String)
    turn_id: Mapped[str | None] = mapped_column(String, unique=True)
    chat: Mapped[str] = mapped_column(String)
    thread: Mapped[str | None] = mapped_column(String)
    kind: Mapped[str] = mapped_column(String, server_default="reply")
    notice: Mapped[str | None] = mapped_column("text", Text)
    stage: Mapped[str] = mapped_column(String, server_default="accepted")
    message_ids: Mapped[list[str]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    created_at: Mapped[datetime] = _timestamp_now()
    updated_at: Mapped[datetime] = _timestamp_now()

    __table_args__ = (
        Index(
            "messenger_deliveries_open",
            "created_at",
            postgresql_where=text("stage IN ('accepted', 'streaming')"),
        ),
    )


class MessengerButtonRow(Base):
    """An approval posted as buttons → the turn that asked (0021)."""

    __tablename__ = "messenger_buttons"
    approval_id: Mapped[str] = mapped_column(String, primary_key=True)
    delivery_id: Mapped[str] = mapped_column(String)
    turn_id: Mapped[str] = mapped_column(String)
    message_id: Mapped[str | None] = mapped_column(String)
    created_at: Mapped[datetime] = _timestamp_now()
