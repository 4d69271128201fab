"""The patterns the OpenAPI document gives for what the gateway's validators check (a workspace
path, a search query that is not blank) accept exactly what those validators accept, in every
engine that reads the document: pydantic's Rust regex, the ECMA-262 of JSON Schema validators
(jsonschema_rs) and Python's `re`, which schemathesis draws with (tests/api/test_fuzz.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Annotated

import jsonschema_rs
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, TypeAdapter, ValidationError

from api.routes.search import _not_blank
from api.schemas import NOT_BLANK, WORKSPACE_PATH
from think.server import WorkspacePathError, workspace_path

# Patterns the document gives for what a validator with better messages checks: the same
# strings, in every engine that reads the document (pydantic's Rust regex, the ECMA-262 of
# JSON Schema validators, Python's `re`, which schemathesis draws with).
_TRICKY = list("ab./~\\ \t\n\r\x00\x01\x1c\x1f\x7f\x85\xa0\u2028\u3000\u200b\ufeff\u202e\x80é😀")
"""Separators, dots, whitespace by every engine's reading, control, C1 and bidi characters."""


def _engines(pattern: str) -> list[Callable[[str], bool]]:
    rust = TypeAdapter(Annotated[str, Field(pattern=pattern)])
    ecma = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
    python = re.compile(pattern.removesuffix("$") + r"\Z")

    def by_rust(value: str) -> bool:
        try:
            rust.validate_python(value)
        except ValidationError:
            return False
        return True

    return [by_rust, ecma.is_valid, lambda value: python.match(value) is not None]


def _accepts(check: Callable[[str], object], value: str) -> bool:
    try:
        check(value)
    except (ValueError, WorkspacePathError):
        return False
    return True


WORKSPACE_ENGINES = _engines(WORKSPACE_PATH)


@given(
    st.lists(st.sampled_from([*_TRICKY, "/workspace", "workspace", ".."]), max_size=12).map("".join)
)
@settings(max_examples=3000, derandomize=True, deadline=None, database=None)
def test_the_workspace_path_pattern_is_workspace_path(path: str) -> None:
    # Once workspace_path refuses bidi, C1 and separator characters too (branch h-quota),
    # this fails until WORKSPACE_PATH says so as well.
    accepted = _accepts(partial(workspace_path, allow_root=True), path)
    assert [engine(path) for engine in WORKSPACE_ENGINES] == [accepted] * 3, path


NOT_BLANK_ENGINES = _engines(NOT_BLANK)


@given(st.lists(st.sampled_from(_TRICKY), max_size=6).map("".join))
@settings(max_examples=1000, derandomize=True, deadline=None, database=None)
def test_the_not_blank_pattern_is_the_search_querys_check(text: str) -> None:
    accepted = _accepts(_not_blank, text)
    assert accepted == (bool(text.strip()) and "\x00" not in text)
    assert [engine(text) for engine in NOT_BLANK_ENGINES] == [accepted] * 3, text
