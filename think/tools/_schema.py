"""From a Python function to what a model reads: docstring, argument model, JSON Schema, errors.

The tool's description and its parameters' descriptions come from the docstring, in any of the
three common styles (Google `Args:`, NumPy `Parameters` + underline, Sphinx `:param x:`); the
sections that describe parameters, return values and exceptions are taken out of the
description, because the schema already says that better. One pydantic model per tool gives
both the JSON Schema the model sees and the validation of what it sends back.
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticUserError,
    ValidationError,
    create_model,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from think.exceptions import UserError

# Section titles, lower-cased. Parameters are read from the first set; all are dropped from the
# description. Other sections (Examples, Notes, ...) stay: they can help the model.
_PARAM_SECTIONS = {
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "other parameters",
}
_DROPPED_SECTIONS = _PARAM_SECTIONS | {
    "return",
    "returns",
    "yield",
    "yields",
    "raise",
    "raises",
    "receives",
}
_SPHINX_PARAM_FIELDS = {"param", "parameter", "arg", "argument", "key", "keyword"}
_SPHINX_DROPPED_FIELDS = _SPHINX_PARAM_FIELDS | {
    "type",
    "return",
    "returns",
    "rtype",
    "raise",
    "raises",
    "except",
    "exception",
    "yield",
    "yields",
    "ytype",
}
_GOOGLE_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*(.*)$")
_GOOGLE_ENTRY = re.compile(r"^\**(\w+)\s*(?:\(.*?\))?\s*:(?:\s+(.*))?$")
_NUMPY_ENTRY = re.compile(r"^(\**\w+(?:\s*,\s*\**\w+)*)\s*(?::.*)?$")
_SPHINX_FIELD = re.compile(r"^:(\w+)([^:]*):(?:\s+(.*))?$")
_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")

_ANNOTATED: Any = typing.Annotated  # subscripted at run time with a computed type

_MAX_ERRORS = 10
_MAX_INPUT_CHARS = 80


class Docstring(NamedTuple):
    description: str
    params: dict[str, str]


def parse_docstring(doc: str | None) -> Docstring:
    """Split a docstring into the description a model reads and per-parameter descriptions."""
    lines = inspect.cleandoc(doc or "").splitlines()
    kept: list[str] = []
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        section = _dropped_section(lines, i)
        if section is None:
            kept.append(lines[i].rstrip())
            i += 1
        else:
            i, found = section
            params.update(found)
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return Docstring(description, params)


def _dropped_section(lines: list[str], i: int) -> tuple[int, dict[str, str]] | None:
    """The section dropped from the description that starts at line `i` (NumPy, Google or
    Sphinx style), if one does: the line after it, and the parameter descriptions it holds."""
    stripped, indent = lines[i].strip(), _indent(lines[i])
    if _numpy_header_at(lines, i) and stripped.lower() in _DROPPED_SECTIONS:
        end = i + 2
        while end < len(lines) and not _numpy_header_at(lines, end):
            end += 1
        if stripped.lower() not in _PARAM_SECTIONS:
            return end, {}
        return end, _entries(lines[i + 2 : end], _NUMPY_ENTRY, inline=False)
    header = _GOOGLE_HEADER.match(stripped)
    if header and header.group(1).lower() in _DROPPED_SECTIONS:
        end = _block_end(lines, i, indent, stop_at_field=False)
        if header.group(1).lower() not in _PARAM_SECTIONS:
            return end, {}
        return end, _entries(lines[i + 1 : end], _GOOGLE_ENTRY, inline=True)
    field = _SPHINX_FIELD.match(stripped)
    if field and field.group(1).lower() in _SPHINX_DROPPED_FIELDS:
        end = _block_end(lines, i, indent, stop_at_field=True)
        words = field.group(2).split()
        if field.group(1).lower() not in _SPHINX_PARAM_FIELDS or not words:
            return end, {}
        text = [field.group(3) or "", *(x.strip() for x in lines[i + 1 : end])]
        return end, {words[-1].lstrip("*"): _join(text)}
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _numpy_header_at(lines: list[str], i: int) -> bool:
    return bool(lines[i].strip()) and i + 1 < len(lines) and bool(_UNDERLINE.match(lines[i + 1]))


def _block_end(lines: list[str], start: int, indent: int, *, stop_at_field: bool) -> int:
    """The end of a block: the first non-blank line not indented past the header line."""
    end = start + 1
    while end < len(lines):
        line = lines[end]
        if line.strip() and _indent(line) <= indent:
            break
        if stop_at_field and (not line.strip() or line.strip().startswith(":")):
            break
        end += 1
    return end


def _entries(body: list[str], entry: re.Pattern[str], *, inline: bool) -> dict[str, str]:
    """`name ...: text` entries at the body's outer indent, each continued by deeper lines."""
    margin = min((_indent(x) for x in body if x.strip()), default=0)
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body:
        match = entry.match(line.strip()) if line.strip() and _indent(line) == margin else None
        if match:
            current = [match.group(2) or ""] if inline else []
            for name in match.group(1).split(","):
                found[name.strip().lstrip("*")] = current
        elif current is not None:
            current.append(line.strip())
    return {name: _join(text) for name, text in found.items()}


def _join(parts: Iterable[str]) -> str:
    return " ".join(p for p in parts if p).strip()


def type_hints(fn: Callable[..., Any], tool_name: str) -> dict[str, Any]:
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    if not inspect.isroutine(target):  # a callable object: its __call__ has the annotations
        target = type(target).__call__
    try:
        return typing.get_type_hints(target, include_extras=True)
    except (NameError, TypeError) as exc:
        raise UserError(
            f"tool {tool_name!r}: cannot resolve a type annotation ({exc}); define the type "
            "at module level or import it outside `if TYPE_CHECKING:`"
        ) from exc


def arguments_model(
    fn: Callable[..., Any],
    tool_name: str,
    *,
    skip: str | None,
    docs: dict[str, str],
) -> type[BaseModel]:
    """A pydantic model of the parameters the model fills in (all but `skip`)."""
    fields: dict[str, Any] = {}
    hints = type_hints(fn, tool_name)
    for param in inspect.signature(fn).parameters.values():
        if param.name == skip:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserError(
                f"tool {tool_name!r}: *args and **kwargs cannot be described to a model; "
                "name each parameter"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise UserError(
                f"tool {tool_name!r}: parameter {param.name!r} is positional-only, but a tool "
                "is called by keyword; remove the `/`"
            )
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        described = _annotated_description(annotation)
        if isinstance(default, FieldInfo) and default.description:
            described = True
        if described is not True:
            text = described or docs.get(param.name)
            if text:  # the annotation wins over the docstring; a Field() in it wins over both
                annotation = _ANNOTATED[annotation, Field(description=text)]
        fields[param.name] = (annotation, default)
    try:
        return create_model(
            f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
    except (PydanticUserError, NameError) as exc:  # no schema for a type, or an unknown name
        raise UserError(
            f"tool {tool_name!r}: a parameter type cannot be described to a model ({exc}); "
            "use JSON-like types, pydantic models, dataclasses or TypedDicts"
        ) from exc


def _annotated_description(annotation: Any) -> str | bool | None:
    """`Annotated[int, "text"]` gives "text"; `Field(description=...)` in it gives True."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return None
    found: str | bool | None = None
    for meta in annotation.__metadata__:
        if isinstance(meta, FieldInfo) and meta.description:
            return True  # pydantic applies it itself
        if isinstance(meta, str):
            found = meta
    return found


def json_schema(model: type[BaseModel], tool_name: str) -> dict[str, Any]:
    """The model's JSON Schema, self-contained, without pydantic's `title` on every node.

    References are inlined, except to a recursive type, which keeps its `$defs` entry (OpenAI
    accepts `$ref` into `$defs`, and nothing else can describe recursion).
    """
    try:
        schema = model.model_json_schema()
    except PydanticUserError as exc:  # PydanticInvalidForJsonSchema: e.g. a Callable parameter
        raise UserError(f"tool {tool_name!r}: its parameters have no JSON Schema ({exc})") from exc
    defs: dict[str, Any] = schema.pop("$defs", {})
    edges = {name: _refs(node) for name, node in defs.items()}
    recursive = {name for name in defs if name in _reachable(name, edges)}

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(x) for x in node]
        if not isinstance(node, dict):
            return node
        name = _ref_name(node)
        if name is None or name in recursive:
            return {k: inline(v) for k, v in node.items()}
        siblings = {k: inline(v) for k, v in node.items() if k != "$ref"}  # e.g. a description
        return {**inline(defs[name]), **siblings}

    result: dict[str, Any] = inline(schema)
    if recursive:
        result["$defs"] = {name: inline(defs[name]) for name in sorted(recursive)}
    _drop_titles(result)
    return result


def _ref_name(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref.removeprefix("#/$defs/") if isinstance(ref, str) else None


def _refs(node: Any) -> set[str]:
    if isinstance(node, list):
        return set().union(*(_refs(x) for x in node))
    if not isinstance(node, dict):
        return set()
    own = _ref_name(node)
    return set().union({own} if own else set(), *(_refs(v) for v in node.values()))


def _reachable(start: str, edges: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(edges[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(edges.get(name, ()))
    return seen


_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMAS = (
    "items",
    "additionalProperties",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
)


def _drop_titles(node: Any) -> None:
    """Remove `title` keywords, walking the schema's structure (a property may be named title)."""
    if not isinstance(node, dict):
        return
    if isinstance(node.get("title"), str):
        del node["title"]
    for key in _SUBSCHEMA_MAPS:
        for sub in (node.get(key) or {}).values():
            _drop_titles(sub)
    for key in _SUBSCHEMA_LISTS:
        for sub in node.get(key) or []:
            _drop_titles(sub)
    for key in _SUBSCHEMAS:
        _drop_titles(node.get(key))


def describe_errors(tool_name: str, exc: ValidationError) -> str:
    """One line the model can act on: each wrong field by path, what was expected, what came."""
    errors = exc.errors()
    problems = [_problem(e) for e in errors[:_MAX_ERRORS]]
    if len(errors) > _MAX_ERRORS:
        problems.append(f"and {len(errors) - _MAX_ERRORS} more")
    return f"invalid arguments for tool {tool_name!r}: " + "; ".join(problems)


def _problem(error: ErrorDetails) -> str:
    path = ""
    for part in error["loc"]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    text = f"{path or 'arguments'}: {error['msg']}"
    if error["type"] != "missing":
        received = repr(error.get("input"))
        if len(received) > _MAX_INPUT_CHARS:
            received = received[: _MAX_INPUT_CHARS - 1] + "…"
        text += f" (got {received})"
    return text
