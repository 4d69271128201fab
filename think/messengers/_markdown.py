"""Markdown as models write it → Telegram MarkdownV2, and cutting a long reply to fit.

MarkdownV2 rejects a whole message over one unescaped reserved character, so the converter
escapes everything it does not turn into an entity, and takes any text, even a reply cut off
mid-word while it streams: an unmatched `**` or backtick is shown as written, an unclosed code
fence runs to the end. Escaping (core.telegram.org/bots/api#markdownv2-style): outside entities
every one of ``_*[]()~`>#+-=|{}.!\\``; inside `code` and ``pre`` only `` ` `` and ``\\``; inside a
link's URL only ``)`` and ``\\``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

RESERVED = frozenset("_*[]()~`>#+-=|{}.!\\")
LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*)$")
BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
FENCE = re.compile(r"^\s*```(.*)$")


def escape(text: str) -> str:
    """Plain text, safe anywhere outside entities."""
    return "".join(f"\\{c}" if c in RESERVED else c for c in text)


def _escape_code(text: str) -> str:
    return text.replace("\\", "\\\\").replace("`", "\\`")


def _escape_url(url: str) -> str:
    return url.replace("\\", "\\\\").replace(")", "\\)")


def _word_edge(s: str, i: int) -> bool:
    """Whether position `i` is outside a word (so `_` there may open or close italics)."""
    return i < 0 or i >= len(s) or not s[i].isalnum()


def _inline(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "`":
            j = s.find("`", i + 1)
            if j > i + 1:
                out.append(f"`{_escape_code(s[i + 1 : j])}`")
                i = j + 1
                continue
        pair = s[i : i + 2]
        if pair in ("**", "__", "~~"):
            j = s.find(pair, i + 2)
            if j > i + 2:
                mark = "~" if pair == "~~" else "*"
                out.append(f"{mark}{_inline(s[i + 2 : j])}{mark}")
                i = j + 2
                continue
        if c in "*_" and i + 1 < len(s) and not s[i + 1].isspace():
            j = s.find(c, i + 1)
            edges = c == "*" or (_word_edge(s, i - 1) and _word_edge(s, j + 1))
            if j > i + 1 and edges and not s[j - 1].isspace():
                out.append(f"_{_inline(s[i + 1 : j])}_")
                i = j + 1
                continue
        if c == "[":
            m = LINK.match(s, i)
            if m:
                out.append(f"[{_inline(m.group(1))}]({_escape_url(m.group(2))})")
                i = m.end()
                continue
        out.append(escape(c))
        i += 1
    return "".join(out)


def to_markdown_v2(markdown: str) -> str:
    """`markdown` in Telegram's MarkdownV2: bold, italics, strikethrough, code, code blocks,
    links, headings (as bold), bullets and quotes; everything else escaped."""
    lines = markdown.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            body: list[str] = []
            i += 1
            while i < len(lines) and not FENCE.match(lines[i]):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end of an unclosed block)
            lang = re.sub(r"[^\w+-]", "", fence.group(1))
            out.append(f"```{lang}\n{_escape_code(chr(10).join(body))}\n```")
            continue
        if m := HEADING.match(line):
            out.append(f"*{_inline(m.group(1))}*")
        elif m := BULLET.match(line):
            out.append(f"{m.group(1)}• {_inline(m.group(2))}")
        elif line.startswith(">"):
            out.append(f">{_inline(line[1:].lstrip())}")
        else:
            out.append(_inline(line))
        i += 1
    return "\n".join(out)


def split_markdown(markdown: str, limit: int, fmt: Callable[[str], str]) -> list[str]:
    """`markdown` cut into pieces whose formatted length (`fmt`) is at most `limit`: at
    paragraph breaks first, then lines, then spaces, then anywhere. Empty text: no piece.

    Pieces are packed by the sum of their parts' formatted lengths (formatting is local to a
    line, so the sum is the joined length but for an entity spanning lines), then each piece
    is checked whole and cut again in the rare case it is over: linear, not quadratic, in
    the reply's length."""
    if not markdown.strip():
        return []
    if len(fmt(markdown)) <= limit:
        return [markdown]
    for sep in ("\n\n", "\n", " "):
        parts = markdown.split(sep)
        if len(parts) > 1:
            out: list[str] = []
            for piece in _pack(parts, sep, limit, fmt):
                out += [piece] if len(fmt(piece)) <= limit else _cut(piece, limit, fmt)
            return out
    return _cut(markdown, limit, fmt)


def _cut(text: str, limit: int, fmt: Callable[[str], str]) -> list[str]:
    """Cut anywhere: the longest prefix whose formatted length fits (a binary search), then
    the rest the same way."""
    pieces: list[str] = []
    while text:
        if len(fmt(text)) <= limit:
            pieces.append(text)
            break
        low, high = 1, len(text)
        while low < high:
            mid = (low + high + 1) // 2
            if len(fmt(text[:mid])) <= limit:
                low = mid
            else:
                high = mid - 1
        pieces.append(text[:low])
        text = text[low:]
    return [p for p in pieces if p.strip()]


def _pack(parts: list[str], sep: str, limit: int, fmt: Callable[[str], str]) -> list[str]:
    sep_size = len(fmt(sep)) if sep.strip() else len(sep)
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for part in parts:
        part_size = len(fmt(part))
        if part_size > limit:
            if current:
                pieces.append(sep.join(current))
            pieces += split_markdown(part, limit, fmt)
            current, size = [], 0
            continue
        grown = size + part_size + (sep_size if current else 0)
        if current and grown > limit:
            pieces.append(sep.join(current))
            current, size = [part], part_size
        else:
            current.append(part)
            size = grown
    if current:
        pieces.append(sep.join(current))
    return [p for p in pieces if p.strip()]
