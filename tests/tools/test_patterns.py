"""Globs and grep patterns without backtracking (issue 31): the same answers as before for
ordinary patterns, time linear in the text for hostile ones, clear errors for what RE2 cannot
run, and a deadline that stops slow matching without ever holding the event loop.

The hostile inputs are sized so that the code before this change takes seconds on them (it
is measured in docs/architecture.md), not minutes: each timing test fails on it, and ends."""

from __future__ import annotations

import asyncio
import random
import re
import time

import pytest

from think.exceptions import ToolError
from think.tools._glob import glob_match, glob_source
from think.tools._match import (
    MAX_PATTERN_CHARS,
    Deadline,
    InvalidPattern,
    LinePattern,
    PatternTooLong,
    PatternTooSlow,
    UnsupportedPattern,
    off_loop,
)


def reference_glob(pattern: str, path: str) -> bool:
    """The glob semantics as they were defined before, with Python's `re` (short inputs only)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.fullmatch("".join(out), path, re.DOTALL) is not None


# -- globs ----------------------------------------------------------------------------------------


def test_repeated_double_stars_collapse() -> None:
    assert glob_source("**/**/**/**/x") == glob_source("**/x") == "(?:.*/)?x"
    assert glob_source("a/**/**/**/b") == glob_source("a/**/b")
    assert glob_source("a/**/**") == glob_source("a/**")
    assert glob_source("a/*****") == glob_source("a/**")
    # `***/` is `**` then `*/`: it needs a `/`, where `**/` does not, so it stays distinct.
    assert glob_match("a/***/b", "a/x/b") and not glob_match("a/***/b", "a/b")
    assert glob_match("a/**/b", "a/b")


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.md", "notes/todo.md", True),
        ("**/*.md", "todo.md", True),
        ("**/*.md", "a/b/c/todo.md", True),
        ("*.md", "notes/todo.md", False),
        ("notes/*.txt", "notes/a.txt", True),
        ("notes/*.txt", "notes/x/a.txt", False),
        ("notes/**", "notes/x/a.txt", True),
        ("a**b", "a/x/b", True),
        ("?.md", "a.md", True),
        ("?.md", "ab.md", False),
        ("?.md", "/.md", False),
        ("a+b(1)/[x].md", "a+b(1)/[x].md", True),
        ("a+b(1)/[x].md", "aab(1)/x.md", False),
        ("é?.txt", "éx.txt", True),
        ("dir with space/$x^.{1}|", "dir with space/$x^.{1}|", True),
        ("a.b", "axb", False),
        ("\\d", "\\d", True),
        ("", "", True),
    ],
)
def test_glob_semantics(pattern: str, path: str, matches: bool) -> None:
    assert glob_match(pattern, path) is matches
    assert reference_glob(pattern, path) is matches


def test_globs_match_as_they_always_did() -> None:
    """Random globs over a small alphabet, against the old definition: collapsing changes no
    answer."""
    rng = random.Random(31)
    for _ in range(4000):
        pattern = "".join(rng.choice("a/*?**/.") for _ in range(rng.randint(0, 8)))
        path = "".join(rng.choice("ab/.") for _ in range(rng.randint(0, 8)))
        assert glob_match(pattern, path) is reference_glob(pattern, path), (pattern, path)


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("**/**/**/**/x", "a/" * 250 + "y"),  # the code before: 3.3 s (69 s at 500 levels)
        ("*a*a*a*a*a*a*b", "a" * 50),  # the code before: 0.6 s, 13x per 10 more `a`s
    ],
)
def test_no_glob_takes_exponential_time(pattern: str, path: str) -> None:
    started = time.perf_counter()
    assert glob_match(pattern, path) is False
    assert time.perf_counter() - started < 0.1
    longest = "/".join(["a"] * 512)
    started = time.perf_counter()
    assert glob_match(pattern, longest) is False
    assert time.perf_counter() - started < 0.1


# -- grep patterns --------------------------------------------------------------------------------

TEXT = (
    "import os\n\ndef tea():\r\n    return 'tea time'  \nTEA\x0bafter a vertical tab\n"
    "\u2028x\n  # end$\nTab\there\nlast"
)
ORDINARY = [
    "tea",
    "^def",
    "^$",
    "$",
    "",
    r"\s+$",
    r"^\s*#",
    "te.",
    "(?i)tea",
    r"\btime\b",
    r"\Aimport",
    r"last\Z",
    r"e\s",
    "a|^$",
    "x$",
    "[^a-z]+$",
    r"(?-m:^def)",
    r"\w+ \w+",
    r"o\n",
    "(?s).+",
    r"\t",
    r"(?P<word>t\w+)",
    "[A-Z]{3}",
    r"\d+|\$",
]


@pytest.mark.parametrize("pattern", ORDINARY)
def test_grep_finds_the_lines_python_re_finds(pattern: str) -> None:
    """Line by line, as `re.search` on each of `str.splitlines()`, though RE2 searches the
    whole file in one pass."""
    want = [(n, line) for n, line in enumerate(TEXT.splitlines(), 1) if re.search(pattern, line)]
    assert list(LinePattern(pattern).lines(TEXT, Deadline(10, "t"))) == want
    folded = [
        (n, line) for n, line in enumerate(TEXT.splitlines(), 1) if re.search(pattern, line, re.I)
    ]
    assert list(LinePattern(pattern, ignore_case=True).lines(TEXT, Deadline(10, "t"))) == folded


def test_grep_over_many_lines_counts_them_right() -> None:
    rng = random.Random(7)
    lines = ["".join(rng.choice("ab c\t") for _ in range(rng.randint(0, 40))) for _ in range(5000)]
    text = "\n".join(lines) * 6  # about 600 KB: some ten slices of SLICE_BYTES
    for pattern in ("abc", "^a", "c$", "^$", "b a"):
        want = [n for n, line in enumerate(text.splitlines(), 1) if re.search(pattern, line)]
        got = [n for n, _ in LinePattern(pattern).lines(text, Deadline(30, "t"))]
        assert got == want, pattern


def test_a_catastrophic_pattern_takes_linear_time() -> None:
    """`(a+)+$` over 28 `a`s and a `!` took Python's `re` 20 s; over ten thousand, for ever."""
    text = "a" * 10_000 + "!\n" + "a" * 28 + "!"
    started = time.perf_counter()
    assert list(LinePattern("(a+)+$").lines(text, Deadline(10, "t"))) == []
    assert list(LinePattern("(x+x+)+y").lines("x" * 5000, Deadline(10, "t"))) == []
    assert time.perf_counter() - started < 0.1


@pytest.mark.parametrize(
    ("pattern", "error", "says"),
    [
        (r"(a)\1", UnsupportedPattern, "Backreferences"),
        (r"(?P<x>a)(?P=x)", UnsupportedPattern, "RE2"),
        (r"(?<=a)b", UnsupportedPattern, "lookbehind"),
        (r"a(?!b)", UnsupportedPattern, "lookahead"),
        (r"(?>a+)b", UnsupportedPattern, "atomic groups"),
        ("a{1001}", UnsupportedPattern, "counted repetition over 1000"),
        ("(", InvalidPattern, "not a valid regular expression"),
        ("a)(b", InvalidPattern, "unbalanced parenthesis"),
        ("\ud800", InvalidPattern, "lone surrogate"),
        ("a" * (MAX_PATTERN_CHARS + 1), PatternTooLong, "over the 1000 allowed"),
    ],
)
def test_patterns_refused_with_a_reason(pattern: str, error: type[ToolError], says: str) -> None:
    with pytest.raises(error) as refused:
        LinePattern(pattern)
    assert says in str(refused.value)
    assert isinstance(refused.value, ToolError)  # the model reads it as the call's result


async def test_the_deadline_stops_slow_matching_and_the_loop_stays_free() -> None:
    """A pattern that is slow even for RE2 (its DFA does not fit in memory: about 10 s over
    these 2 MB) is stopped at the deadline, and meanwhile the event loop keeps its pace."""
    rng = random.Random(3)
    chars = "".join(rng.choices("ab", k=2_000_000))
    text = "\n".join(chars[i : i + 1000] for i in range(0, len(chars), 1000))
    pattern = LinePattern(r"[ab]*a[ab]{900}c")
    lags: list[float] = []

    async def ticker() -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - before - 0.01)

    ticking = asyncio.create_task(ticker())
    started = time.perf_counter()
    with pytest.raises(PatternTooSlow) as slow:
        await off_loop(lambda d: list(pattern.lines(text, d)), what="search", seconds=0.5)
    took = time.perf_counter() - started
    ticking.cancel()
    assert 0.5 <= took < 1.5
    assert "did not finish within 0.5 s" in str(slow.value) and "simpler pattern" in str(slow.value)
    assert len(lags) > 20 and max(lags) < 0.2
