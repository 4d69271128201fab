"""Glob patterns over `/`-separated paths, as the fetch allowlist and `find` read them: `**`
matches any characters (`/` included), `*` any except `/`, `?` one character except `/`;
everything else is literal.

A glob becomes a regular expression run by RE2 (`think.tools._match`), whose time is linear
in the path: as a backtracking `re` pattern, `**/**/**/**/x` over a deep path held a worker's
event loop for 9.6 s. Repeated `**/` (and runs of stars) collapse, since they match the same
paths as one: `a/**/**/b` is `a/**/b`.
"""

from __future__ import annotations

import functools

from think.tools._match import InvalidPattern, RE2Error, RE2Pattern, re2_compile

_DIRS, _ANY, _STAR, _ONE = "(?:.*/)?", ".*", "[^/]*", "[^/]"
_MERGED = {
    (_DIRS, _DIRS): _DIRS,  # `**/**/` is `**/`
    (_DIRS, _ANY): _ANY,  # `**/**` is `**`
    (_ANY, _DIRS): _ANY,
    (_ANY, _ANY): _ANY,
    (_ANY, _STAR): _ANY,  # `***` is `**`
    (_STAR, _ANY): _ANY,
    (_STAR, _STAR): _STAR,
}
"""Neighbouring wildcards whose concatenation matches what one of them does alone."""


def glob_source(pattern: str) -> str:
    """The RE2 regular expression (to be matched whole) for the glob `pattern`. Wildcards
    that follow each other collapse where one matches the same paths (`_MERGED`): however
    many `**/` a glob repeats, its expression has one."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            piece = _DIRS  # `a/**/b` matches `a/b` too
            i += 3
        elif pattern.startswith("**", i):
            piece = _ANY
            i += 2
        elif pattern[i] == "*":
            piece = _STAR
            i += 1
        elif pattern[i] == "?":
            piece = _ONE
            i += 1
        else:
            char = pattern[i]
            literal = char.isascii() and (char.isalnum() or char == "_")
            piece = char if literal else f"\\x{{{ord(char):x}}}"
            i += 1
        merged = _MERGED.get((out[-1], piece)) if out else None
        if merged is not None:
            out[-1] = merged
        else:
            out.append(piece)
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def glob_regex(pattern: str) -> RE2Pattern:
    """`pattern` compiled (cached); raises `InvalidPattern` for a glob that holds a lone
    surrogate, the only thing that cannot be written as RE2."""
    try:
        return re2_compile(glob_source(pattern), dot_nl=True)
    except (RE2Error, UnicodeEncodeError) as exc:
        raise InvalidPattern(f"the glob {pattern!r} cannot be matched: {exc}") from None


def glob_match(pattern: str, path: str) -> bool:
    return glob_regex(pattern).fullmatch(path) is not None


def has_glob(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern
