"""The stream log (Postgres + NOTIFY), its writer for activities and its listener for readers."""

from think.storage._stream_log import (
    CANCEL_CHANNEL,
    CHANNEL,
    TERMINAL_CHUNKS,
    Fence,
    StaleAttempt,
    append,
    claim,
    count_failure,
    read,
    step_is_open,
)
from think.streaming._listener import ChunkListener
from think.streaming._writer import ChunkWriter

__all__ = [
    "CANCEL_CHANNEL",
    "CHANNEL",
    "TERMINAL_CHUNKS",
    "ChunkListener",
    "ChunkWriter",
    "Fence",
    "StaleAttempt",
    "append",
    "claim",
    "count_failure",
    "read",
    "step_is_open",
]
