"""What a worker keeps after a large value has passed through it (issue 31: one 14 MiB
`write` took a worker from 310 to 607 MB, kept after). Each holder found then is checked
here for letting go; the figures themselves are a measurement (`python -m bench.workspace_memory`,
docs/benchmarks.md), not a timed test.
"""

from __future__ import annotations

import gc
import sys
from typing import Any, cast

from think._current import BOUND, bound_turn
from think._messages import UIMessage
from think._settings import Settings
from think.cli._malloc import return_freed_memory
from think.models._transcript import _conversions, converted, interrupted_tool_error
from think.sessions._chat_history import ChatHistories
from think.storage import Database, TurnRecord

BIG = 2 * 1024 * 1024


def big_call(i: int) -> UIMessage:
    return UIMessage(
        id=f"a{i}",
        role="assistant",
        parts=[
            {
                "type": "tool-write",
                "toolCallId": f"call_{i}",
                "state": "output-available",
                "input": {"path": "big.txt", "content": "x" * BIG},
                "output": "Wrote it.",
            }
        ],
    )


def test_a_conversion_goes_with_its_message() -> None:
    """The conversions cache held each message it converted until 20,000 later ones came: a
    large tool call's input stayed, twice (the message and its JSON arguments)."""
    message = big_call(1)
    chats, _ = converted(message, interrupted_tool_error)
    assert converted(message, interrupted_tool_error)[0] is chats  # kept while it lives
    key = id(message)
    del message, chats
    gc.collect()
    assert key not in _conversions._entries


def test_a_huge_history_is_not_kept() -> None:
    """A conversation's history over an eighth of the byte budget is converted each step,
    not kept for the next one (it held its JSON, its conversion and its transcript)."""
    histories = ChatHistories(max_bytes=8 * BIG)
    small = ChatHistories(max_bytes=64 * BIG)
    question = UIMessage(id="u1", role="user", parts=[{"type": "text", "text": "Write it."}])
    transcript = [question, big_call(1)]
    for kept in (histories, small):
        made = kept.convert(
            "c1", transcript, eviction=None, truncation_step=None, repair=interrupted_tool_error
        )
        kept.keep(made)
    assert list(small._histories) == ["c1"]
    assert list(histories._histories) == []


def test_a_bound_turn_lets_go_of_its_record() -> None:
    """A task begun inside an activity keeps a copy of its context, and the binding in it:
    that copy held the turn's record, whose draft holds a tool call's whole input."""
    service = cast(Any, None)
    with bound_turn(service, "turn_1"):
        binding = BOUND.get()
        assert binding is not None
        binding._turn = cast(TurnRecord, object())
    assert binding._turn is None


async def test_a_connection_that_carried_a_large_value_is_not_kept(settings: Settings) -> None:
    """libpq keeps a connection's buffers at the largest message it carried: such a
    connection is closed when released, and the pool opens a new one."""
    db = await Database(settings.libpq_url, min_size=1, max_size=1).open()
    try:

        async def backend() -> int:
            async with db.connection() as conn:
                cursor = await conn.execute("SELECT pg_backend_pid() AS pid")
                row = await cursor.fetchone()
                assert row is not None
                return int(row["pid"])

        first = await backend()
        async with db.connection() as conn:
            await conn.execute("SELECT to_jsonb(repeat('x', 1000)) AS small")
        assert await backend() == first  # a small value: kept
        async with db.connection() as conn:
            cursor = await conn.execute("SELECT to_jsonb(repeat('x', %(n)s)) AS big", {"n": BIG})
            row = await cursor.fetchone()
            assert row is not None and len(row["big"]) == BIG
        second = await backend()
        assert second != first
        async with db.transaction() as conn:  # a parameter this time, in a transaction
            await conn.execute("SELECT %(d)s::bytea", {"d": b"y" * BIG})
        assert await backend() != second
    finally:
        await db.close()


def test_the_processes_give_freed_memory_back() -> None:
    """`think api` and `think worker` fix glibc's thresholds (`think.cli._malloc`): past one
    large value, glibc otherwise kept the next ones' memory in its heap."""
    if sys.platform.startswith("linux"):
        assert return_freed_memory()
