"""The stream log's fenced append, on real Postgres: a write that sets turn columns refuses a
stale attempt, and, `while_open`, a turn that has ended (a cancel won the race) — saying which,
so a step that skipped its lock still leaves a cancelled turn as the cancel left it."""

from __future__ import annotations

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from think._settings import Settings
from think.streaming import Fence, StaleAttempt, TurnEnded, append, claim
from think.testing import FakeOpenAIServer, text


async def test_an_ended_turn_and_a_stale_attempt_are_told_apart(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, settings: Settings, cid: str
) -> None:
    fake_model.script(cid, text("done"))
    r = await api.post(
        f"/v1/agents/helper/conversations/{cid}/turns", json={"input": "hi", "mode": "wait"}
    )
    turn_id = r.json()["turn_id"]
    async with await psycopg.AsyncConnection.connect(
        settings.libpq_url, autocommit=True, row_factory=dict_row
    ) as conn:
        fence = await claim(conn, turn_id, "probe")
        chunk = {"type": "data-probe", "data": 1, "transient": True}
        with pytest.raises(TurnEnded):
            await append(conn, turn_id, [chunk], fence, while_open=True, error="late")
        stale = Fence(key="probe", attempt=fence.attempt - 1)
        with pytest.raises(StaleAttempt):
            await append(conn, turn_id, [chunk], stale, error="late")
        row = await (
            await conn.execute("SELECT error, status FROM turns WHERE id = %s", (turn_id,))
        ).fetchone()
        assert row == {"error": None, "status": "completed"}  # neither write landed
        await append(conn, turn_id, [chunk], fence)  # the current attempt still may
