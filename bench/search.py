"""Full-text search at scale: 1,000,000 messages, searched in one huge conversation and in
ordinary ones, through the SQL function and through the HTTP endpoint.

python -m bench.search [--messages 1000000] [--big 100000] [--searches 300]

The messages are bulk-loaded with COPY into a fresh embedded Postgres (through the same
`search_text` a turn uses, so `text_content` and the generated `tsvector` are what production
stores). Their words are drawn from the frequency distribution of real English prose (the
docstrings and comments of Python's standard library), 20 to 60 words each, so common words
match many messages and rare ones few, as in a real conversation. The searches are spread over
that distribution: very common words, common, uncommon and rare ones, two-word queries,
phrases, and words that match nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import keyword
import random
import re
import statistics
import sysconfig
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg

from tests._stack import Stack, stack_env
from think._messages import search_text
from think._settings import Settings
from think.dev import start_services
from think.storage import Database, migrate_now, search_messages

AGENT = "helper"
BIG = "big"
_WORD = re.compile(r"[a-z]{3,14}")
# Words of code rather than prose; the stdlib's text is full of them.
_CODE = frozenset(k.lower() for k in keyword.kwlist) | {
    *("self", "cls", "args", "kwargs", "obj", "str", "int", "dict", "list", "tuple", "bytes"),
    *("len", "isinstance", "init", "repr"),
}


def vocabulary(size: int = 20_000) -> tuple[list[str], list[int]]:
    """The `size` most frequent words of the standard library's prose, with their counts."""
    counts: Counter[str] = Counter()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")):
        source = path.read_text(errors="replace")
        # Docstrings and comments only: lines that are prose, not code.
        prose = re.findall(r'"""(.*?)"""|#([^\n]*)', source, re.S)
        for doc, comment in prose:
            counts.update(w for w in _WORD.findall((doc or comment).lower()) if w not in _CODE)
    common = counts.most_common(size)
    return [w for w, _ in common], [c for _, c in common]


class Texts:
    """Random messages of 20-60 words with the vocabulary's word frequencies."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words, counts = vocabulary()
        self.cum: list[float] = []
        total = 0.0
        for count in counts:
            total += count
            self.cum.append(total)

    def message(self) -> str:
        words = self.rng.choices(self.words, cum_weights=self.cum, k=self.rng.randint(20, 60))
        words[0] = words[0].capitalize()
        return " ".join(words) + "."


def conversation_sizes(total: int, big: int, rng: random.Random) -> Iterator[int]:
    """The big conversation first, then ordinary ones of 10 to 400 messages."""
    yield big
    left = total - big
    while left > 0:
        size = min(left, rng.randint(10, 400))
        left -= size
        yield size


def load(url: str, *, total: int, big: int, seed: int = 7) -> dict[str, str]:
    """COPY `total` messages in; returns conversation id -> uid.

    The conversations grow side by side, as they do in production: the messages of the big
    one are spread over the whole table, one every ten rows or so, not stored together. The
    indexes are dropped for the load and rebuilt after it, as any bulk load does.
    """
    rng = random.Random(seed)
    texts = Texts(rng)
    sizes = list(conversation_sizes(total, big, rng))
    uids = {(BIG if n == 0 else f"c{n}"): f"uid-{n}" for n in range(len(sizes))}
    order = [n for n, size in enumerate(sizes) for _ in range(size)]
    rng.shuffle(order)
    written = [0] * len(sizes)
    start = datetime.now(UTC) - timedelta(seconds=total)
    with psycopg.connect(url, autocommit=True) as conn:
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'messages' "
            "AND indexname <> 'messages_pkey'"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')  # names read from the catalog
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            with cur.copy("COPY conversations (uid, tenant, agent, id) FROM STDIN") as copy:
                for n, (cid, uid) in enumerate(uids.items()):
                    # Every third ordinary conversation belongs to another tenant.
                    copy.write_row((uid, "other" if n % 3 == 2 else "default", AGENT, cid))
            columns = (
                "conversation_uid, id, parent_id, role, parts, text_content, byte_size, created_at"
            )
            with cur.copy(f"COPY messages ({columns}) FROM STDIN") as copy:
                for row, n in enumerate(order):
                    i = written[n]
                    written[n] += 1
                    parts = [{"type": "text", "text": texts.message()}]
                    encoded = json.dumps(parts)
                    copy.write_row(
                        (
                            f"uid-{n}",
                            f"m{i}",
                            f"m{i - 1}" if i else None,
                            "user" if i % 2 == 0 else "assistant",
                            encoded,
                            search_text(parts),
                            len(encoded),
                            start + timedelta(seconds=row),
                        )
                    )
                    if row % 100_000 == 99_999:
                        elapsed = time.perf_counter() - t0
                        print(f"  {row + 1:>9,} messages, {elapsed:4.0f} s", flush=True)
            cur.execute(
                "UPDATE conversations c SET active_leaf_id = 'm' || (m.n - 1) "
                "FROM (SELECT conversation_uid, count(*) AS n FROM messages GROUP BY 1) m "
                "WHERE m.conversation_uid = c.uid"
            )
        copied = time.perf_counter() - t0
        conn.execute("SET maintenance_work_mem = '1GB'")
        t0 = time.perf_counter()
        for _, definition in indexes:
            conn.execute(definition)
        conn.execute("VACUUM ANALYZE conversations")
        conn.execute("VACUUM ANALYZE messages")
        indexed = time.perf_counter() - t0
        size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('messages'))").fetchone()
    print(
        f"loaded {total:,} messages in {len(uids):,} conversations: COPY {copied:.0f} s, "
        f"indexes and VACUUM ANALYZE {indexed:.0f} s, table + indexes {size[0] if size else '?'}"
    )
    return uids


def queries(url: str, rng: random.Random, n: int) -> list[tuple[str, str]]:
    """`n` searches as (kind, q), spread evenly over the kinds."""
    words, _ = vocabulary()
    with psycopg.connect(url, autocommit=True) as conn:
        # Stop words ("the", "and") make an empty query; leave them to the `stop words` kind.
        row = conn.execute(
            "SELECT array_agg(w ORDER BY i) FROM unnest(%s::text[]) WITH ORDINALITY AS u(w, i) "
            "WHERE to_tsvector('english', w) <> ''",
            (words,),
        ).fetchone()
    assert row is not None
    indexed: list[str] = row[0]
    kinds = {
        "very common word": lambda: rng.choice(indexed[:30]),
        "common word": lambda: rng.choice(indexed[30:300]),
        "uncommon word": lambda: rng.choice(indexed[300:3000]),
        "rare word": lambda: rng.choice(indexed[3000:]),
        "two words": lambda: f"{rng.choice(indexed[:300])} {rng.choice(indexed[:3000])}",
        "phrase": lambda: f'"{rng.choice(indexed[:100])} {rng.choice(indexed[:100])}"',
        "either word": lambda: f"{rng.choice(indexed[:300])} or {rng.choice(indexed[300:3000])}",
        "no match": lambda: f"zqx{rng.randrange(10**6)}",
    }
    names = list(kinds)
    return [(names[i % len(names)], kinds[names[i % len(names)]]()) for i in range(n)]


def summary(label: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (
        f"  {label:<20} n={len(ordered):>4}  p50 {statistics.median(ordered) * 1000:6.1f} ms  "
        f"p95 {p95 * 1000:6.1f} ms  max {ordered[-1] * 1000:6.1f} ms"
    )


def report(title: str, timings: list[tuple[str, float, int]]) -> None:
    print(title)
    print(summary("all", [t for _, t, _ in timings]))
    by_kind: dict[str, list[float]] = {}
    hits: dict[str, list[int]] = {}
    for kind, elapsed, found in timings:
        by_kind.setdefault(kind, []).append(elapsed)
        hits.setdefault(kind, []).append(found)
    for kind, samples in by_kind.items():
        print(summary(kind, samples) + f"  hits returned p50 {statistics.median(hits[kind]):.0f}")


async def measure_sql(
    url: str, searches: list[tuple[str, str, str]], limit: int
) -> list[tuple[str, float, int]]:
    """(kind, uid, q) -> (kind, seconds, hits) through `search_messages`."""
    db = await Database(url, max_size=2).open()
    try:
        for _, uid, q in searches[:20]:  # warm the caches and the pool
            await search_messages(db, uid, q, limit=limit)
        out = []
        for kind, uid, q in searches:
            t0 = time.perf_counter()
            hits = await search_messages(db, uid, q, limit=limit)
            out.append((kind, time.perf_counter() - t0, len(hits)))
        return out
    finally:
        await db.close()


async def measure_http(
    api_url: str, searches: list[tuple[str, str, str]], limit: int
) -> list[tuple[str, float, int]]:
    """(kind, conversation id, q) -> (kind, seconds, hits) through the gateway."""
    async with httpx.AsyncClient(base_url=api_url, timeout=30) as api:

        async def one(cid: str, q: str) -> int:
            r = await api.get(
                f"/v1/agents/{AGENT}/conversations/{cid}/search", params={"q": q, "limit": limit}
            )
            r.raise_for_status()
            return len(r.json()["hits"])

        for _, cid, q in searches[:20]:
            await one(cid, q)
        out = []
        for kind, cid, q in searches:
            t0 = time.perf_counter()
            found = await one(cid, q)
            out.append((kind, time.perf_counter() - t0, found))
        return out


def explain(url: str, uid: str, q: str) -> None:
    """The plan of one search, for the record."""
    from think.storage._search import _SEARCH, _params

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF) " + _SEARCH, _params(uid, q, 20)
        ).fetchall()
    print(f"plan of {q!r} in {uid}:")
    for (line,) in rows:
        print("   ", line)


def run(args: argparse.Namespace) -> None:
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="think-bench-search-") as tmp:
        home = Path(tmp)
        with start_services(home) as services:
            url = services.database_url
            migrate_now(services.settings(Settings()))
            uids = load(url, total=args.messages, big=args.big)
            mix = queries(url, rng, args.searches)
            others = [cid for cid in uids if cid != BIG]
            ordinary = [(kind, rng.choice(others), q) for kind, q in mix]
            default_tenant = [cid for n, cid in enumerate(uids) if n % 3 != 2 and n]
            ordinary_http = [(kind, rng.choice(default_tenant), q) for kind, q in mix]

            sql_big = asyncio.run(measure_sql(url, [(k, uids[BIG], q) for k, q in mix], args.limit))
            report(f"search_messages, conversation of {args.big:,} messages:", sql_big)
            sql_other = asyncio.run(
                measure_sql(url, [(k, uids[c], q) for k, c, q in ordinary], args.limit)
            )
            report("search_messages, random ordinary conversations (10-400 messages):", sql_other)

            env = stack_env(
                database_url=url,
                temporal_address=services.temporal_address,
                task_queue="bench",
                agents="tests.agents:Helper",
                model_url=None,
                home=home,
            )
            gateway = Stack(env=env, logs=home)
            try:
                gateway.start_api()
                http_big = asyncio.run(
                    measure_http(gateway.api_url, [(k, BIG, q) for k, q in mix], args.limit)
                )
                report(f"GET …/search over HTTP, conversation of {args.big:,} messages:", http_big)
                http_other = asyncio.run(measure_http(gateway.api_url, ordinary_http, args.limit))
                report("GET …/search over HTTP, random ordinary conversations:", http_other)
            finally:
                gateway.stop()
            slowest = max(zip(mix, sql_big, strict=True), key=lambda pair: pair[1][1])
            explain(url, uids[BIG], slowest[0][1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--big", type=int, default=100_000, help="messages of the big one")
    parser.add_argument("--searches", type=int, default=320, help="per set (four sets)")
    parser.add_argument("--limit", type=int, default=20)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
