"""Regular expressions the model writes, matched so that no pattern can stall a worker.

A worker runs every tool call of every tenant on one event loop. Python's `re` backtracks:
`(a+)+$` over 28 `a`s and a `!` holds the loop (and the GIL) for 20 s, doubling with each
`a`, and a blocked loop cannot heartbeat, poll Temporal or honour a tool's timeout. So:

- **RE2** (`google-re2`) compiles every pattern. Its matching time is linear in the text, and
  it has no backreferences or lookaround, the features that need backtracking. A pattern
  that uses them is refused with `UnsupportedPattern`, which says what to write instead.
- **Off the loop, with a deadline.** Linear is not instant: a large pattern over megabytes
  can still take seconds in RE2's slower engine. Matching runs in a small thread pool of its
  own (RE2 releases the GIL while it matches), in slices of at most `SLICE_BYTES`, and stops
  between slices once `MATCH_DEADLINE_SECONDS` have passed (`PatternTooSlow`).
- **Bounded patterns.** Longer than `MAX_PATTERN_CHARS` is refused (`PatternTooLong`).

`LinePattern` keeps `grep`'s meaning, a pattern searched in each line on its own, while
searching a file in one pass: the lines are joined with `\\n`, and RE2 runs with `(?m)` (so
`^` and `$` are each line's ends) and `never_nl` (so no match crosses a line).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar, cast

import re2

from think.exceptions import ToolError

T = TypeVar("T")

RE2Error: type[Exception] = re2.error
"""What RE2 raises for a pattern it cannot compile."""

MAX_PATTERN_CHARS = 1000
"""The longest regular expression or glob the workspace tools accept."""
MATCH_DEADLINE_SECONDS = 10.0
"""How long one tool call's matching may take, waiting for a thread included."""
SLICE_BYTES = 64 * 1024
"""Text searched per RE2 call (cut at a line's end); the deadline is checked between them."""
MATCH_THREADS = 2
"""Threads matching at once in a process: a slow pattern occupies at most this many cores."""


class PatternError(ToolError):
    """A regular expression or glob the workspace tools will not run; the message says why
    and what to do instead, for the model."""


class PatternTooLong(PatternError):
    """A pattern over `MAX_PATTERN_CHARS`."""


class InvalidPattern(PatternError):
    """A pattern that is not a regular expression (nor a glob) at all."""


class UnsupportedPattern(PatternError):
    """A valid Python regular expression that RE2 cannot run in linear time."""


class PatternTooSlow(PatternError):
    """Matching that did not finish within its deadline."""


class RE2Match(Protocol):
    def start(self, group: int = 0) -> int: ...


class RE2Pattern(Protocol):
    """What we use of a compiled `re2` pattern (the package ships no type hints)."""

    def search(
        self, text: str | bytes, pos: int | None = None, endpos: int | None = None
    ) -> RE2Match | None: ...

    def fullmatch(self, text: str | bytes) -> RE2Match | None: ...


def re2_compile(
    pattern: str, *, ignore_case: bool = False, dot_nl: bool = False, never_nl: bool = False
) -> RE2Pattern:
    """`pattern` compiled by RE2 (UTF-8, Perl-like syntax); raises `re2.error`, or
    `UnicodeEncodeError` for a lone surrogate. Errors are not logged to stderr by RE2."""
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.dot_nl = dot_nl
    options.never_nl = never_nl
    return cast(RE2Pattern, re2.compile(pattern, options))


def check_length(pattern: str, what: str) -> None:
    """Refuse a pattern longer than `MAX_PATTERN_CHARS`: RE2's work grows with its size."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternTooLong(
            f"the {what} is {len(pattern)} characters long, over the {MAX_PATTERN_CHARS} "
            "allowed: search for a shorter, more specific pattern"
        )


class Deadline:
    """When one call's matching must stop, and whether its caller gave up (a cancelled
    tool call): checked by the matching thread between slices."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.what = what
        self.at = time.monotonic() + seconds
        self.abandoned = threading.Event()

    def check(self) -> None:
        if self.abandoned.is_set() or time.monotonic() > self.at:
            raise self.exceeded()

    def exceeded(self) -> PatternTooSlow:
        return PatternTooSlow(
            f"the {self.what} did not finish within {self.seconds:g} s and was stopped: "
            "use a simpler pattern (fewer nested or counted repetitions), or narrow the "
            "search with `path` or `glob`"
        )


_executor: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    # Our own pool, not the loop's default one: DNS lookups (fetch) and other `to_thread`
    # work must not queue behind a slow pattern.
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(MATCH_THREADS, thread_name_prefix="think-match")
    return _executor


async def off_loop(
    work: Callable[[Deadline], T], *, what: str, seconds: float = MATCH_DEADLINE_SECONDS
) -> T:
    """Run `work` in the matching threads and return its answer, or raise `PatternTooSlow`
    once `seconds` have passed (time spent waiting for a thread counts). The event loop stays
    free throughout. A thread cannot be interrupted inside one RE2 call, so a late one
    finishes its slice and then stops; the caller does not wait for it."""
    deadline = Deadline(seconds, what)
    future = asyncio.get_running_loop().run_in_executor(_pool(), work, deadline)
    try:
        # A little grace over the thread's own deadline, which it checks between slices.
        return await asyncio.wait_for(future, seconds + 0.5)
    except TimeoutError:
        raise deadline.exceeded() from None
    finally:
        deadline.abandoned.set()


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_FLAGS_OFF = re.compile(r"\(\?[a-zA-Z]*-")


def _to_re2(pattern: str) -> tuple[str, bool]:
    """Python's spelling of `pattern` in RE2's (`\\Z` is `\\z`), and whether it needs each line
    searched on its own: `\\A`, `\\z` and `\\C` mean the text's ends (or any byte) in RE2, and a
    `(?-m)` would undo the line anchors of the one-pass search."""
    per_line = bool(_FLAGS_OFF.search(pattern))

    def swap(escape: re.Match[str]) -> str:
        nonlocal per_line
        char = escape.group(1)
        if char in "AZzC":
            per_line = True
        return "\\z" if char == "Z" else escape.group(0)

    return _ESCAPE.sub(swap, pattern), per_line


class LinePattern:
    """A `grep` pattern: the lines of a text in which it matches, as Python's `re.search`
    would find them line by line, in time linear in the text."""

    def __init__(self, pattern: str, *, ignore_case: bool = False) -> None:
        """Compile `pattern` (a Python regular expression) for RE2; raises `PatternTooLong`,
        `InvalidPattern` or `UnsupportedPattern` with what to do instead."""
        check_length(pattern, "pattern")
        translated, self._per_line = _to_re2(pattern)
        try:
            self._line = re2_compile(translated, ignore_case=ignore_case)
            # Valid alone, so balanced: wrapping it cannot change what it means.
            self._text = re2_compile(f"(?m:{translated})", ignore_case=ignore_case, never_nl=True)
        except UnicodeEncodeError:
            raise InvalidPattern(
                f"the pattern {pattern!r} is not valid Unicode (a lone surrogate)"
            ) from None
        except RE2Error as exc:
            raise _refusal(pattern, exc) from None

    def lines(self, text: str, deadline: Deadline) -> Iterator[tuple[int, str]]:
        """(number from 1, line) of each line of `text` (`str.splitlines`) the pattern
        matches. Raises `PatternTooSlow` from `deadline` between slices."""
        lines = text.splitlines()
        if self._per_line:
            for n, line in enumerate(lines, start=1):
                if n % 256 == 0:
                    deadline.check()
                if self._line.search(line) is not None:
                    yield n, line
            return
        if not lines:
            return
        data = "\n".join(lines).encode()
        end = len(data)
        pos, number = 0, 1  # `pos` is always the start of line `number`
        while pos <= end:
            deadline.check()
            stop = data.find(b"\n", min(pos + SLICE_BYTES, end))
            stop = end if stop < 0 else stop
            found = self._text.search(data, pos, stop)
            if found is None:
                if stop >= end:
                    return
                number += data.count(b"\n", pos, stop) + 1
                pos = stop + 1
                continue
            start = found.start()
            number += data.count(b"\n", pos, start)
            yield number, lines[number - 1]
            after = data.find(b"\n", start)
            if after < 0:
                return
            number, pos = number + 1, after + 1


def _refusal(pattern: str, exc: Exception) -> PatternError:
    """Why RE2 refused `pattern`: not a regular expression at all, or one it cannot run."""
    raw = exc.args[0] if exc.args else exc
    reason = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    try:
        re.compile(pattern)  # compiling runs no match: this cannot stall
    except re.error as python:
        return InvalidPattern(
            f"the pattern {pattern!r} is not a valid regular expression: {python}"
        )
    except (RecursionError, OverflowError, ValueError) as python:
        return InvalidPattern(f"the pattern {pattern!r} cannot be compiled: {python}")
    return UnsupportedPattern(
        f"the pattern {pattern!r} cannot be run by grep's engine (RE2, which takes time linear "
        f"in the text): {reason}. Backreferences (\\1, (?P=name)), lookahead and lookbehind "
        "((?=, (?!, (?<=, (?<!), atomic groups, possessive quantifiers, conditionals and "
        "counted repetition over 1000 are not supported: rewrite the pattern without them, "
        "for example grep for a simpler pattern and read the lines it finds"
    )
