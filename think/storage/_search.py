"""Full-text search over the messages of one conversation, every branch included.

`messages.search` is a stored `tsvector` over `text_content` (the message's text and its tool
calls, HTML-escaped: `think._messages.search_text`). Migration 0003 indexes it together with
the conversation (`GIN (conversation_uid, search)`, through `btree_gin`) and adds a btree on
`(conversation_uid, position)`.

Ranking reads every candidate row from the table, and a common word matches tens of thousands
of rows of a long conversation (two seconds to rank them all at a million messages), so the
rows read are bounded rather than proportional to the matches:

- A conversation of fewer than `WINDOW` messages: every match is ranked. Exact.
- A longer one: the matches among its newest `WINDOW` messages are ranked (a backward scan of
  the position index). Only when they are fewer than `limit` are older matches added: at most
  `OLDER` rows, as the index yields them. A common word thus shows the best recent hits; a
  rarer one is found anywhere, exactly so while it has at most `OLDER` older matches.

Every scan that could run long is capped by a `LIMIT` that a bitmap scan honours early, or
gated off by a one-time filter, so a misestimated plan cannot read a whole conversation.
Ties go to the newest (`position`, the insertion order). `ts_headline`, which re-parses the
text and costs far more than ranking, runs only for the hits returned. docs/benchmarks.md has
the figures at a million messages.

Because `text_content` is stored HTML-escaped, a snippet is safe HTML: the message's own text
escaped, and the matched words wrapped in `<mark>`…`</mark>`.
"""

from __future__ import annotations

from pydantic import BaseModel

from think.storage._db import Conn, Database

MAX_SEARCH_LIMIT = 100
WINDOW = 1000
"""Messages of a long conversation, newest first, whose matches are always ranked."""
OLDER = 1000
"""Older matches at most added when the newest `WINDOW` messages hold fewer than `limit`."""
SNIPPET_CHARS = 10_000
"""The characters of a message a snippet is cut from: `ts_headline` takes 25-80 ms for 90,000
(a big tool output). A match further in is found and ranked; its snippet shows the start."""

# MaxFragments > 0 picks the best fragments anywhere in the text instead of its start; a few
# words each keep a hit list readable.
_HEADLINE_OPTIONS = (
    "StartSel=<mark>, StopSel=</mark>, MaxFragments=2, MaxWords=24, MinWords=8, "
    'ShortWord=2, FragmentDelimiter=" … "'
)

# `websearch_to_tsquery` accepts any input without a syntax error ("a phrase", `or`, `-word`);
# stop words or punctuation alone make an empty query, which matches nothing. It is immutable,
# so with the statement planned for its parameters (never prepared: see `_search`) it is folded
# into a constant the indexes can use.
_QUERY = "websearch_to_tsquery('english', %(q)s)"
# The query with its phrases loosened to AND, and its negations dropped (`querytree`, which is
# 'T' when nothing is left): it matches a superset of the query's rows, and the index answers
# it without reading a row. Only older matches use it, to cap the rows read: a rare phrase of
# two common words is checked row by row, which would read every row holding both.
_LOOSE = (
    f"(CASE WHEN querytree({_QUERY}) = 'T' THEN {_QUERY} "
    f"ELSE regexp_replace(querytree({_QUERY}), '<(-|[0-9]+)>', '&', 'g')::tsquery END)"
)
# Rank normalization 1 | 32: divided by 1 + log(length), so that a huge tool output does not
# outrank a sentence for mentioning a word more often, then scaled into [0, 1).
_SEARCH = f"""
WITH size AS MATERIALIZED (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM messages WHERE conversation_uid = %(c)s LIMIT %(window)s
    ) AS s
), newest AS MATERIALIZED (
    SELECT m.id, m.role, m.position, m.search
    FROM messages m
    WHERE m.conversation_uid = %(c)s AND (SELECT n FROM size) = %(window)s
    ORDER BY m.position DESC
    LIMIT %(window)s
), candidates AS MATERIALIZED (
    SELECT n.id, n.role, n.position, n.search
    FROM newest n
    WHERE n.search @@ {_QUERY}
  UNION ALL
    SELECT m.id, m.role, m.position, m.search
    FROM messages m
    WHERE m.conversation_uid = %(c)s
      AND m.search @@ {_QUERY}
      AND (SELECT n FROM size) < %(window)s
), older AS (
    SELECT o.id, o.role, o.position, o.search
    FROM (
        -- No ORDER BY on purpose: a bitmap scan stops after LIMIT rows, a sort would not.
        SELECT m.id, m.role, m.position, m.search
        FROM messages m
        WHERE m.conversation_uid = %(c)s
          AND m.search @@ {_LOOSE}
          AND m.position < (SELECT min(n.position) FROM newest n)
          AND (SELECT count(*) FROM candidates) < %(limit)s
        LIMIT %(older)s
    ) AS o
    WHERE o.search @@ {_QUERY}
), top AS (
    SELECT c.id, c.role, c.position, ts_rank_cd(c.search, {_QUERY}, 1 | 32) AS rank
    FROM (SELECT * FROM candidates UNION ALL SELECT * FROM older) AS c
    ORDER BY rank DESC, c.position DESC
    LIMIT %(limit)s
)
SELECT top.id, top.role, top.rank,
       ts_headline('english', left(m.text_content, %(chars)s), {_QUERY}, %(options)s) AS snippet
FROM top JOIN messages m ON m.conversation_uid = %(c)s AND m.id = top.id
ORDER BY top.rank DESC, top.position DESC
"""


class SearchHit(BaseModel):
    """One message that matches a search, best first."""

    message_id: str
    role: str
    snippet: str
    """Safe HTML: the escaped text around the matches, each match in `<mark>`…`</mark>`."""
    rank: float


async def search_messages(
    db: Database | Conn,
    conversation_uid: str,
    query: str,
    *,
    limit: int = 20,
    window: int = WINDOW,
    older: int = OLDER,
) -> list[SearchHit]:
    """The messages of the conversation that match `query` (web-search syntax), best first;
    ties go to the newest. At most `limit` hits (1 to `MAX_SEARCH_LIMIT`); `window` and
    `older` bound the work in a long conversation (see the module's docstring)."""
    if not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_SEARCH_LIMIT}, not {limit!r}")
    if window < 1 or older < 0:
        raise ValueError(f"window must be positive and older not negative: {window!r}, {older!r}")
    # Postgres refuses a NUL in a string; to the search it is a word separator like any other.
    query = query.replace("\x00", " ")
    if not query.strip():
        return []
    params = _params(conversation_uid, query, limit, window=window, older=older)
    if isinstance(db, Database):
        async with db.connection() as conn:
            return await _search(conn, params)
    return await _search(db, params)


def _params(
    conversation_uid: str, query: str, limit: int, *, window: int = WINDOW, older: int = OLDER
) -> dict[str, object]:
    """The parameters of `_SEARCH` (also for the benchmark's EXPLAIN)."""
    return {
        "c": conversation_uid,
        "q": query,
        "limit": limit,
        "window": window,
        "older": older,
        "chars": SNIPPET_CHARS,
        "options": _HEADLINE_OPTIONS,
    }


async def _search(conn: Conn, params: dict[str, object]) -> list[SearchHit]:
    # Never a prepared statement: a generic plan, made without the query's words, cannot use
    # the GIN index well or tell a common word from a rare one (psycopg prepares a statement
    # after it has run five times on a connection).
    cursor = await conn.execute(_SEARCH, params, prepare=False)
    return [
        SearchHit(message_id=r["id"], role=r["role"], snippet=r["snippet"], rank=r["rank"])
        for r in await cursor.fetchall()
    ]
