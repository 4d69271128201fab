"""Postgres storage: schema, migrations and the conversation store."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from psycopg_pool import PoolTimeout
from sqlalchemy import create_engine

from think._settings import Settings
from think.exceptions import ServiceUnreachable
from think.storage._admission import ANNOUNCE_CHANNEL, ConversationBusy, SubmissionConflict
from think.storage._answers import (
    AnswerKind,
    first_answer,
    record_answer,
    unapplied_answers,
)
from think.storage._budgets import DailyBudgets, Overspent
from think.storage._compactions import (
    Compaction,
    insert_summary,
    summaries_on_path,
    turn_compactions,
)
from think.storage._conversation_config import (
    conversation_config,
    conversation_mcp_servers,
    delete_conversation_mcp_server,
    put_conversation_mcp_server,
    set_conversation_config,
)
from think.storage._conversation_deletes import (
    CLEAR_HISTORY,
    ClearHistory,
    ConversationNotFound,
    ConversationStillActive,
    clear_history,
    delete_conversation_rows,
    skip_queue,
)
from think.storage._db import Conn, Database, collector_paused, fetch_one
from think.storage._errors import (
    IdempotencyConflict,
    MessageIdConflict,
    MessageNotFound,
    NotRegenerable,
    ParentNotFound,
    TurnNotRecorded,
)
from think.storage._failures import (
    NON_TRANSIENT_ATTEMPTS,
    bounded_failures,
    gives_up,
    is_transient,
    non_transient_failure,
)
from think.storage._fork import ForkPointNotFound, ForkTargetExists, fork_conversation
from think.storage._frozen_prompt import (
    PromptState,
    clear_system_prompt,
    freeze_prompt,
    prompt_state,
    read_memory,
    write_memory,
)
from think.storage._limits import (
    STREAM_LEASE,
    Refused,
    close_stream,
    open_stream,
    renew_streams,
    take_submission,
)
from think.storage._message_upserts import upsert_messages
from think.storage._path_cache import PathCache
from think.storage._queue import (
    answer_parent,
    begin_turn,
    prepare_start,
    queue_head,
    quiet_left,
    skipped_chunks,
)
from think.storage._records import (
    ACTIVE_STATUSES,
    PAUSED_STATUSES,
    TERMINAL_STATUSES,
    Admission,
    Conversation,
    Delegation,
    MessageConcurrency,
    QueueLock,
    SteeringMessage,
    StoredMessage,
    TurnRecord,
    TurnRequest,
    TurnStatus,
    chain_leaf,
)
from think.storage._recovery_data import (
    RecoveryNote,
    note_recovery,
    progress_of,
    recovery_data,
    stash_recovery_data,
)
from think.storage._retention import (
    ExportedRows,
    conversations_with_expired_turns,
    export_rows,
    forget_tenant,
    idle_conversations,
    tenant_conversations,
)
from think.storage._search import MAX_SEARCH_LIMIT, SearchHit, search_messages
from think.storage._steering import (
    TurnNotSteerable,
    delivered_ids,
    pending_steering,
    steer_turn,
    steering_chunk,
)
from think.storage._store import Store
from think.storage._tree import Appended, Siblings, TreeNode
from think.storage._turn_columns import NOW
from think.storage._turn_deletes import TurnNotFound, TurnStillActive, delete_turn, delete_turns
from think.storage._turn_ids import public_turn_id, public_turn_id_or_none
from think.storage._usage import (
    TOKEN_KINDS,
    StepUsage,
    TenantSpend,
    TurnUsage,
    UsageGroup,
    UsageGrouping,
    UsageSum,
    UsageTotals,
    conversation_usage,
    record_model_calls,
    tenant_spend,
    tenant_usage,
)
from think.storage._workspace import (
    Workspace,
    WorkspaceEntry,
    WorkspaceFile,
    WorkspaceLimits,
    WorkspacePathError,
    WorkspaceQuotaError,
    delete_files,
    guess_media_type,
    lock_for_write,
    read_file,
    workspace_path,
    write_file,
)

MIGRATIONS = Path(__file__).parent / "migrations"

__all__ = [
    "ACTIVE_STATUSES",
    "ANNOUNCE_CHANNEL",
    "CLEAR_HISTORY",
    "MAX_SEARCH_LIMIT",
    "NON_TRANSIENT_ATTEMPTS",
    "NOW",
    "PAUSED_STATUSES",
    "STREAM_LEASE",
    "TERMINAL_STATUSES",
    "TOKEN_KINDS",
    "Admission",
    "AnswerKind",
    "Appended",
    "ClearHistory",
    "Compaction",
    "Conn",
    "Conversation",
    "ConversationBusy",
    "ConversationNotFound",
    "ConversationStillActive",
    "DailyBudgets",
    "Database",
    "Delegation",
    "ExportedRows",
    "ForkPointNotFound",
    "ForkTargetExists",
    "IdempotencyConflict",
    "MessageConcurrency",
    "MessageIdConflict",
    "MessageNotFound",
    "NotRegenerable",
    "Overspent",
    "ParentNotFound",
    "PathCache",
    "PromptState",
    "QueueLock",
    "RecoveryNote",
    "Refused",
    "SearchHit",
    "Siblings",
    "SteeringMessage",
    "StepUsage",
    "Store",
    "StoredMessage",
    "SubmissionConflict",
    "TenantSpend",
    "TreeNode",
    "TurnNotFound",
    "TurnNotRecorded",
    "TurnNotSteerable",
    "TurnRecord",
    "TurnRequest",
    "TurnStatus",
    "TurnStillActive",
    "TurnUsage",
    "UsageGroup",
    "UsageGrouping",
    "UsageSum",
    "UsageTotals",
    "Workspace",
    "WorkspaceEntry",
    "WorkspaceFile",
    "WorkspaceLimits",
    "WorkspacePathError",
    "WorkspaceQuotaError",
    "answer_parent",
    "begin_turn",
    "bounded_failures",
    "chain_leaf",
    "clear_history",
    "clear_system_prompt",
    "close_stream",
    "collector_paused",
    "conversation_config",
    "conversation_mcp_servers",
    "conversation_usage",
    "conversations_with_expired_turns",
    "delete_conversation_mcp_server",
    "delete_conversation_rows",
    "delete_files",
    "delete_turn",
    "delete_turns",
    "delivered_ids",
    "export_rows",
    "fetch_one",
    "first_answer",
    "forget_tenant",
    "fork_conversation",
    "freeze_prompt",
    "gives_up",
    "guess_media_type",
    "idle_conversations",
    "insert_summary",
    "is_transient",
    "lock_for_write",
    "migrate",
    "migrate_now",
    "non_transient_failure",
    "note_recovery",
    "open_database",
    "open_stream",
    "pending_steering",
    "prepare_start",
    "progress_of",
    "prompt_state",
    "public_turn_id",
    "public_turn_id_or_none",
    "put_conversation_mcp_server",
    "queue_head",
    "quiet_left",
    "read_file",
    "read_memory",
    "record_answer",
    "record_model_calls",
    "recovery_data",
    "renew_streams",
    "search_messages",
    "set_conversation_config",
    "skip_queue",
    "skipped_chunks",
    "stash_recovery_data",
    "steer_turn",
    "steering_chunk",
    "summaries_on_path",
    "take_submission",
    "tenant_conversations",
    "tenant_spend",
    "tenant_usage",
    "turn_compactions",
    "unapplied_answers",
    "upsert_messages",
    "workspace_path",
    "write_file",
    "write_memory",
]


async def open_database(settings: Settings, *, max_size: int = 10) -> Database:
    """The process's one pool. Opened by the app's lifespan or the worker, never at import.
    Raises `ServiceUnreachable` when Postgres does not answer in time."""
    try:
        return await Database(settings.libpq_url, max_size=max_size).open()
    except PoolTimeout as error:
        where = re.sub(r"(://[^:/@]+):[^@]+@", r"\1:***@", settings.require_database_url())
        raise ServiceUnreachable(
            f"cannot reach Postgres at {where} (THINK_DATABASE_URL): {error}"
        ) from None


def _migrate_sync(url: str) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            # One migrator at a time, even when several containers start together.
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7243531)")
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    finally:
        engine.dispose()


def migrate_now(settings: Settings) -> None:
    """`migrate` for callers without an event loop (scripts, the CLI before it starts one)."""
    _migrate_sync(settings.sqlalchemy_url)


async def migrate(settings: Settings) -> None:
    """Bring the schema to the newest migration; safe to run again and concurrently."""
    await asyncio.to_thread(_migrate_sync, settings.sqlalchemy_url)
