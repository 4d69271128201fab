"""The typed UI message stream protocol (`think/_protocol.py`).

The chunk and part types are checked field by field against the AI SDK's own schemas, read out
of the installed `ai` package by `tests/node/schema.mjs`: each chunk of `uiMessageChunkSchema`
and each part of the SDK's message validation has a Python type with the same keys, the same
optional keys, and the same literals. Without the npm harness these checks skip locally and
fail in CI, like the other AI SDK conformance checks. The helpers are tested on their own.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import types
import typing
from pathlib import Path
from typing import Any, Literal

import pytest

from tests._stack import in_ci
from think.streaming import (
    DataChunk,
    DataUIPart,
    DynamicToolUIPart,
    ToolUIPart,
    UIMessageChunk,
    UIMessagePart,
    is_static_tool_part,
    is_tool_part,
    tool_name,
    tool_part_type,
)
from think.streaming._builder import MessageBuilder

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / "tests" / "node"

Shape = dict[str, Any]
"""One object schema as `schema.mjs` prints it: `{"type", "state"?, "fields"}`."""
Field = dict[str, Any]
"""One key of it: `{"optional", "kind", "values"?, "fields"?}`."""


def _harness_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not on PATH (install Node >= 22 with npm, then `make test`)"
    if not (NODE_DIR / "node_modules" / "ai").exists():
        return "tests/node has no node_modules (`make test` runs `npm ci` when npm is on PATH)"
    return None


HARNESS_MISSING = _harness_missing()
# Skipped only outside CI: in CI the checks run, and fail in `sdk_schemas` when the harness is
# missing, since a skip would let CI pass without comparing the types with the SDK's schemas.
needs_ai_sdk = pytest.mark.skipif(
    HARNESS_MISSING is not None and not in_ci(),
    reason=f"AI SDK schema check skipped: {HARNESS_MISSING}",
)


@pytest.fixture(scope="module")
def sdk_schemas() -> dict[str, Any]:
    if HARNESS_MISSING is not None:
        pytest.fail(f"CI must run the AI SDK schema checks, but {HARNESS_MISSING}", pytrace=False)
    done = subprocess.run(
        ["node", str(NODE_DIR / "schema.mjs")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    schemas: dict[str, Any] = json.loads(done.stdout)
    return schemas


# ---- the Python types against the SDK's schemas ----


def _merged(shapes: list[Shape]) -> dict[str, Field]:
    """One set of fields for shapes that are the states of one part (or one shape alone): a key
    is optional unless every state requires it; a key a state forbids (`never`) is absent from
    that state; literals of the states add up."""
    keys = {k for s in shapes for k, f in s["fields"].items() if f["kind"] != "never"}
    merged: dict[str, Field] = {}
    for key in keys:
        present = [s["fields"][key] for s in shapes if s["fields"].get(key, {}).get("kind")]
        present = [f for f in present if f["kind"] != "never"]
        # A literal in one state narrows a plain kind of another (`approved: true` / boolean).
        plain = {f["kind"] for f in present} - {"literal", "enum"}
        field: Field = {
            "optional": len(present) < len(shapes) or any(f["optional"] for f in present),
            "kind": "literal" if not plain else plain.pop() if len(plain) == 1 else "unknown",
        }
        if field["kind"] == "literal":
            field["values"] = {v for f in present for v in f["values"]}
        if field["kind"] == "object":
            nested = [{"fields": f["fields"]} for f in present]
            field["fields"] = _merged(nested)
        merged[key] = field
    return merged


_PLAIN = {"string": str, "boolean": bool, "record": dict, "array": list}


def _mismatches(python_type: Any, fields: dict[str, Field], where: str) -> list[str]:
    """How a TypedDict differs from the SDK's fields: missing or extra keys, optionality, and
    each key's type (a literal's values, a nested object's own fields)."""
    hints = typing.get_type_hints(python_type)
    found: list[str] = []
    if set(hints) != set(fields):
        found.append(f"{where}: keys {sorted(hints)} != the SDK's {sorted(fields)}")
    optional = {k for k, f in fields.items() if f["optional"]}
    if set(python_type.__optional_keys__) != optional:
        found.append(
            f"{where}: optional {sorted(python_type.__optional_keys__)} != the SDK's "
            f"{sorted(optional)}"
        )
    for key in sorted(set(hints) & set(fields)):
        found += _annotation_mismatches(hints[key], fields[key], f"{where}.{key}")
    return found


def _annotation_mismatches(annotation: Any, field: Field, where: str) -> list[str]:
    kind = field["kind"]
    if "values" in field:
        if typing.get_origin(annotation) is not Literal:
            return [f"{where}: {annotation} is not a Literal of {sorted(field['values'], key=str)}"]
        if set(typing.get_args(annotation)) != field["values"]:
            return [f"{where}: {typing.get_args(annotation)} != the SDK's {field['values']}"]
        return []
    if kind == "object":
        return _mismatches(annotation, field["fields"], where)
    if kind == "unknown":
        return [] if annotation is Any else [f"{where}: {annotation} should be any JSON value"]
    if kind == "number":
        return [] if annotation in (int, float) else [f"{where}: {annotation} is not a number"]
    expected = _PLAIN[kind]
    if (typing.get_origin(annotation) or annotation) is not expected:
        return [f"{where}: {annotation} is not {expected.__name__} ({kind})"]
    return []


def _by_tag(union: Any) -> dict[str, type]:
    """Each TypedDict of a union by its `type` literal; `data-*` for the one whose type is any
    string (data chunks and parts; tool parts are matched by name)."""
    tagged: dict[str, type] = {}
    for member in typing.get_args(union):
        annotation = typing.get_type_hints(member)["type"]
        tag = typing.get_args(annotation)[0] if typing.get_origin(annotation) is Literal else "*"
        tagged[tag] = member
    return tagged


def _typed_shape(shape: Shape) -> dict[str, Field]:
    """A shape's fields with its `type` as the literal Python holds: a prefix check (`data-*`,
    `tool-*`) is a plain string there."""
    fields = _merged([shape])
    if shape["type"].endswith("-*"):
        fields["type"] = {"optional": False, "kind": "string"}
    return fields


@needs_ai_sdk
def test_chunk_types_match_the_sdk_schema(sdk_schemas: dict[str, Any]) -> None:
    ours = _by_tag(UIMessageChunk)
    ours["data-*"] = ours.pop("*")
    assert ours["data-*"] is DataChunk
    sdk = {s["type"]: s for s in sdk_schemas["chunks"]}
    assert sorted(ours) == sorted(sdk)
    found = [m for tag, s in sdk.items() for m in _mismatches(ours[tag], _typed_shape(s), tag)]
    assert found == []


@needs_ai_sdk
def test_part_types_match_the_sdk_schema(sdk_schemas: dict[str, Any]) -> None:
    parts = sdk_schemas["parts"]
    static = {s["type"]: s for s in parts["static"]}
    ours = _by_tag(UIMessagePart)
    ours.pop("*")  # data and static tool parts: checked below by name
    assert ours.pop("dynamic-tool") is DynamicToolUIPart
    assert sorted(ours) == sorted(static)
    found = [m for tag, s in static.items() for m in _mismatches(ours[tag], _typed_shape(s), tag)]
    tool = _merged(parts["tool"])
    tool["type"] = {"optional": False, "kind": "string"}
    found += _mismatches(ToolUIPart, tool, "tool-*")
    found += _mismatches(DynamicToolUIPart, _merged(parts["dynamicTool"]), "dynamic-tool")
    found += _mismatches(DataUIPart, _typed_shape(parts["data"][0]), "data-*")
    assert found == []
    members = set(typing.get_args(UIMessagePart))
    assert {ToolUIPart, DataUIPart} <= members


def test_the_unions_are_unions_of_typed_dicts() -> None:
    for union in (UIMessageChunk, UIMessagePart):
        assert isinstance(union, types.UnionType)
        assert all(typing.is_typeddict(m) for m in typing.get_args(union))


# ---- the helpers ----


def test_tool_part_type_and_tool_name_round_trip() -> None:
    for name in ("get_weather", "a-b", "tool-x", ""):
        part = {"type": tool_part_type(name), "toolCallId": "c", "state": "input-available"}
        assert is_tool_part(part) and is_static_tool_part(part)
        assert tool_name(part) == name
    assert tool_part_type("get_weather") == "tool-get_weather"


def test_dynamic_tool_parts_are_named_by_tool_name() -> None:
    part = {
        "type": "dynamic-tool",
        "toolName": "lookup",
        "toolCallId": "c",
        "state": "output-error",
    }
    assert is_tool_part(part)
    assert not is_static_tool_part(part)
    assert tool_name(part) == "lookup"


@pytest.mark.parametrize(
    "part",
    [
        {"type": "text", "text": "tool-call"},
        {"type": "step-start"},
        {"type": "data-tool-x", "data": {}},
        {"type": "reasoning", "text": ""},
        {"text": "no type"},
        {"type": None},
        {"type": 7},
    ],
)
def test_other_parts_call_no_tool(part: dict[str, Any]) -> None:
    assert not is_tool_part(part)
    assert not is_static_tool_part(part)
    with pytest.raises(ValueError, match="calls no tool"):
        tool_name(part)


def test_the_builder_names_tool_parts_with_the_helper() -> None:
    builder = MessageBuilder()
    builder.apply({"type": "tool-input-start", "toolCallId": "c1", "toolName": "get_weather"})
    builder.apply(
        {"type": "tool-input-available", "toolCallId": "c2", "toolName": "dyn", "input": {}}
    )
    assert [tool_name(p) for p in builder.parts] == ["get_weather", "dyn"]
    assert builder.parts[0]["type"] == tool_part_type("get_weather")


# A tool part's type is cut or built by hand nowhere but in `_protocol.py`.
_HAND_SLICED = re.compile(
    r"""\[5:\]|len\(["']tool-["']\)|startswith\(["']tool-["']\)|f["']tool-\{"""
)


def test_no_hand_sliced_tool_part_types() -> None:
    sliced = {
        path.relative_to(ROOT).as_posix()
        for folder in ("think", "api", "workers")
        for path in (ROOT / folder).rglob("*.py")
        if path.name != "_protocol.py" and _HAND_SLICED.search(path.read_text())
    }
    assert sliced == set()
