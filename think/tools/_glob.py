"""Glob patterns over `/`-separated paths, as the fetch allowlist and `find` read them: `**`
matches any characters (`/` included), `*` any except `/`, `?` one character except `/`;
everything else is literal."""

from __future__ import annotations

import functools
import re


@functools.lru_cache(maxsize=1024)
def glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")  # `a/**/b` matches `a/b` too
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
    return re.compile("".join(out), re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    return glob_regex(pattern).fullmatch(path) is not None


def has_glob(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern
