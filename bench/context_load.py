"""Loading a long conversation's context for a model step: 10,000 messages on one path.

python -m bench.context_load [--messages 10000] [--runs 30]

Every model step of a turn reads the transcript from the root to the turn's parent within the
agent's `hydration_byte_budget` (`Store.path`, a recursive query over the message tree), cuts
older messages (`truncate`, `truncation_step` 8) and turns them into Chat Completions messages
(`to_chat_messages`), as `think/engine/activities/_turn.py` and `_assembly.py` do; then the request
is encoded as JSON for the model. This measures the three at several depths of one conversation
whose messages are a single parent chain: user questions and assistant answers of 20-60
words, one answer in four with a tool call (input and output) between two steps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.search import Texts
from think._messages import search_text
from think._settings import Settings
from think.agent._think import Think
from think.dev import start_postgres
from think.models._transcript import to_chat_messages
from think.sessions._truncation import truncate
from think.storage import Database, Store, migrate_now

CONVERSATION = "uid-long"
SYSTEM = "You are a helpful assistant."


def message(i: int, texts: Texts, rng: random.Random) -> tuple[str, list[dict[str, Any]]]:
    if i % 2 == 0:
        return "user", [{"type": "text", "text": texts.message()}]
    parts: list[dict[str, Any]] = [{"type": "step-start"}]
    if i % 8 == 1:
        city = rng.choice(["Oslo", "Lima", "Hanoi", "Perth", "Quito"])
        parts += [
            {"type": "text", "text": "Let me check.", "state": "done"},
            {
                "type": "tool-get_weather",
                "toolCallId": f"call_{i}",
                "state": "output-available",
                "input": {"city": city},
                "output": {"city": city, "temp_c": rng.randint(-10, 35), "sky": "clear"},
            },
            {"type": "step-start"},
        ]
    parts.append({"type": "text", "text": texts.message(), "state": "done"})
    return "assistant", parts


def load(url: str, total: int) -> None:
    rng = random.Random(5)
    texts = Texts(rng)
    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(
            "INSERT INTO conversations (uid, tenant, agent, id) VALUES (%s, 'default', 'a', 'c')",
            (CONVERSATION,),
        )
        columns = "conversation_uid, id, parent_id, role, parts, text_content, byte_size"
        with cur.copy(f"COPY messages ({columns}) FROM STDIN") as copy:
            for i in range(total):
                role, parts = message(i, texts, rng)
                encoded = json.dumps(parts)
                parent = f"m{i - 1}" if i else None
                copy.write_row(
                    (CONVERSATION, f"m{i}", parent, role, encoded, search_text(parts), len(encoded))
                )
        cur.execute("VACUUM ANALYZE messages")
    print(f"loaded {total:,} messages on one path in {time.perf_counter() - t0:.1f} s")


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


async def measure(url: str, depths: list[int], runs: int) -> None:
    db = await Database(url, max_size=2).open()
    store = Store(db)
    print(
        f"{'messages':>9} {'path p50/p95 ms':>16} {'to_chat p50/p95':>16} "
        f"{'json p50/p95':>14} {'total p50/p95':>15} {'chat msgs':>9} {'request MB':>10}"
    )
    try:
        for depth in depths:
            leaf = f"m{depth - 1}"
            path_t: list[float] = []
            chat_t: list[float] = []
            json_t: list[float] = []
            size = count = 0
            for _ in range(runs + 2):  # the first two warm the caches and are dropped
                async with db.connection() as conn:
                    t0 = time.perf_counter()
                    transcript = await store.path(
                        CONVERSATION, leaf, conn, byte_budget=Think.hydration_byte_budget
                    )
                    t1 = time.perf_counter()
                messages = to_chat_messages(SYSTEM, truncate(transcript, Think.truncation_step))
                t2 = time.perf_counter()
                body = json.dumps({"model": "m", "messages": messages, "stream": True})
                t3 = time.perf_counter()
                path_t.append(t1 - t0)
                chat_t.append(t2 - t1)
                json_t.append(t3 - t2)
                assert len(transcript) == depth
                size, count = len(body), len(messages)
            path_t, chat_t, json_t = path_t[2:], chat_t[2:], json_t[2:]
            total = [a + b + c for a, b, c in zip(path_t, chat_t, json_t, strict=True)]
            print(
                f"{depth:>9,} {pct(path_t, 0.5):>7.1f} / {pct(path_t, 0.95):>6.1f} "
                f"{pct(chat_t, 0.5):>7.1f} / {pct(chat_t, 0.95):>6.1f} "
                f"{pct(json_t, 0.5):>5.1f} / {pct(json_t, 0.95):>6.1f} "
                f"{pct(total, 0.5):>6.1f} / {pct(total, 0.95):>6.1f} "
                f"{count:>9,} {size / 1e6:>10.2f}"
            )
    finally:
        await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="think-bench-context-") as tmp:
        pg = start_postgres(Path(tmp) / "pg")
        try:
            migrate_now(Settings(database_url=pg.url))
            load(pg.url, args.messages)
            depths = sorted({d for d in (100, 1000, args.messages) if d <= args.messages})
            asyncio.run(measure(pg.url, depths, args.runs))
        finally:
            pg.stop()


if __name__ == "__main__":
    main()
