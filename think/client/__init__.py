"""A Python client of the Think gateway's HTTP API (API.md), sync and async.

    from think.client import ThinkClient

    with ThinkClient("http://127.0.0.1:8000") as client:
        turn = client.wait("assistant", "demo", "Hello!")
        print(turn.text)
        for chunk in client.stream("assistant", "demo", "And now?"):
            if chunk["type"] == "text-delta":
                print(chunk["delta"], end="", flush=True)

Streams resume by themselves after a dropped connection (`Last-Event-ID`), so every chunk
arrives once, in order; errors are `ThinkAPIError`s carrying the gateway's problem document.

There is one implementation, `AsyncThinkClient`; `ThinkClient` is its blocking face (the same
code, run on a private event loop in a background thread: see `think/client/_sync.py`).
`run_chat` is the terminal chat built on it (`think chat`).
"""

from think.client._async import AsyncThinkClient, AsyncTurnStream
from think.client._chat import run_chat
from think.client._errors import (
    AuthenticationError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    ThinkAPIError,
    ThinkConnectionError,
    ThinkStreamError,
)
from think.client._models import (
    PAUSED_STATUSES,
    TERMINAL_STATUSES,
    Agent,
    AgentTool,
    ClientTool,
    Conversation,
    Message,
    PendingApproval,
    PendingClientTool,
    QueuedBehind,
    SearchHit,
    StreamChunk,
    Turn,
    WorkspaceFile,
    new_idempotency_key,
)
from think.client._sync import ThinkClient, TurnStream

__all__ = [
    "PAUSED_STATUSES",
    "TERMINAL_STATUSES",
    "Agent",
    "AgentTool",
    "AsyncThinkClient",
    "AsyncTurnStream",
    "AuthenticationError",
    "ClientTool",
    "ConflictError",
    "Conversation",
    "InvalidRequestError",
    "Message",
    "NotFoundError",
    "PendingApproval",
    "PendingClientTool",
    "QueuedBehind",
    "SearchHit",
    "StreamChunk",
    "ThinkAPIError",
    "ThinkClient",
    "ThinkConnectionError",
    "ThinkStreamError",
    "Turn",
    "TurnStream",
    "WorkspaceFile",
    "new_idempotency_key",
    "run_chat",
]
