"""Structured output: a pydantic model or a JSON Schema, as the provider wants it and back.

`output_spec` turns what an agent asks for into the `OutputSpec` a `ModelRequest` carries, in
OpenAI's strict mode whenever the schema can be expressed in it; `validate_output` turns the
model's answer back into the object, or into an `OutputValidationError` a client can read.

Strict mode changes the schema the model sees, never the one the answer is checked against.
It needs every object closed and every property required, so an optional property becomes a
required, nullable one, and `null` then means "not given": before validation it is dropped
wherever the original schema does not accept null, so the field's default applies as if the
model had left it out. Keywords strict mode rejects (`maxLength`, ...) move into the description
as a hint; the original schema still enforces them.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.errors import PydanticInvalidForJsonSchema

from think.exceptions import OutputValidationError, UserError
from think.models._base import OutputSpec

Output = type[BaseModel] | dict[str, Any]
"""What an agent may ask for: a pydantic model class, or a JSON Schema as a dict."""

DEFAULT_OUTPUT_NAME = "output"
"""The spec's name for a plain JSON Schema (a model class is named after the class)."""

MAX_PROBLEMS = 5
"""How many validation problems an error message lists before it says how many more."""

_NAME_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")  # OpenAI: ^[a-zA-Z0-9_-]{1,64}$
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n?\s*```$", re.DOTALL)

# Strict mode rejects these; the answer is checked against the original schema, which keeps
# them, so the model is only told about them, in the description.
_HINT_KEYWORDS = (
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "unevaluatedItems",
)
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# These change which objects are valid in ways a closed, all-required object cannot express.
_NO_STRICT_EQUIVALENT = (
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
)
_DROPPED = ("title", "$schema", "discriminator", "default")
_TYPE_KEYWORDS = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const")
_MAX_REF_HOPS = 32


def output_spec(
    output: Output, *, name: str | None = None, strict: bool | None = None
) -> OutputSpec:
    """The `OutputSpec` for a pydantic model class or a JSON Schema dict.

    `name` defaults to the class name, or `"output"` for a dict. `strict=None` (the default)
    uses strict mode when `strict_json_schema` can express the schema and sends the schema as
    it is otherwise; `True` insists (a `UserError` when it cannot); `False` never uses it.
    """
    if isinstance(output, dict):
        _validator(output)  # a malformed schema fails here, not when the answer comes back
        schema, default_name = output, DEFAULT_OUTPUT_NAME
    elif _is_model_class(output):
        schema, default_name = _model_schema(output), output.__name__
    else:
        raise UserError(
            f"output must be a pydantic model class or a JSON Schema dict, not {output!r}"
        )
    spec_name = _NAME_UNSAFE.sub("_", name or default_name)[:64] or DEFAULT_OUTPUT_NAME
    if strict is not False:
        try:
            return OutputSpec(name=spec_name, schema=strict_json_schema(schema), strict=True)
        except ValueError as exc:
            if strict:
                raise UserError(f"output {spec_name!r} cannot use strict mode: {exc}") from exc
    return OutputSpec(name=spec_name, schema=copy.deepcopy(schema), strict=False)


def strict_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` rewritten for OpenAI's strict mode, as a new dict (`schema` is left alone).

    Every object gets `additionalProperties: false` and all its properties required, optional
    ones made nullable; `$defs` are kept and rewritten too, a root `$ref` (pydantic's recursive
    models) is inlined, `oneOf` becomes `anyOf`, `title`s and `default`s go, and keywords strict
    mode rejects become a note in the description. Raises `ValueError`, naming the place, when
    the schema cannot be expressed without changing what it accepts: a root that is not an
    object, free-form objects (`dict[str, int]`), untyped arrays, `not`, `if`...
    """
    root = copy.deepcopy(schema)
    ref = root.get("$ref")
    if isinstance(ref, str) and not {"type", "properties", "anyOf"} & root.keys():
        target = _resolve(root, ref)
        if not isinstance(target, dict):
            raise ValueError(f"#: $ref {ref!r} does not resolve to a schema")
        del root["$ref"]
        root = {**copy.deepcopy(target), **root}
        # The root now is that definition: point its recursive references at the root.
        name = ref.removeprefix("#/$defs/")
        if name != ref and isinstance(root.get("$defs"), dict):
            root["$defs"].pop(name, None)
            root = _replace_ref(root, ref, "#")
            if not root["$defs"]:
                del root["$defs"]
    if root.get("type") != "object":
        raise ValueError(f"#: the root must be an object, not {root.get('type', 'untyped')!r}")
    return _strict(root, "#")


def validate_output(output: Output, text: str) -> Any:
    """The model's answer `text` as the validated object, or an `OutputValidationError`.

    A model class gives an instance of it; a JSON Schema dict gives the parsed JSON, checked
    with `jsonschema`. A Markdown code fence around the JSON is tolerated. `null` for a property
    the schema makes optional but not nullable (strict mode's way of leaving it out) is dropped
    first, so the default applies.
    """
    data = _parse(text)
    if isinstance(output, dict):
        _drop_unset_nulls(data, output, output)
        problems = _schema_problems(output, data)
        if problems:
            raise OutputValidationError(_mismatch(problems), text=text)
        return data
    if not _is_model_class(output):
        raise UserError(
            f"output must be a pydantic model class or a JSON Schema dict, not {output!r}"
        )
    schema = _model_schema(output)
    _drop_unset_nulls(data, schema, schema)
    try:
        # Through JSON again, so the model validates in JSON mode (dates from strings, ...).
        return output.model_validate_json(json.dumps(data))
    except ValidationError as exc:
        raise OutputValidationError(_mismatch(_pydantic_problems(exc)), text=text) from exc


# --- strict mode ---


def _strict(node: Any, path: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise ValueError(f"{path}: {node!r} is not a schema object")
    for key in _NO_STRICT_EQUIVALENT:
        if key in node:
            raise ValueError(f"{path}: {key!r} has no strict-mode equivalent")
    for key in _DROPPED:
        node.pop(key, None)
    for defs_key in ("$defs", "definitions"):
        defs = node.get(defs_key)
        if isinstance(defs, dict):
            node[defs_key] = {
                name: _strict(sub, f"{path}/{defs_key}/{name}") for name, sub in defs.items()
            }
    all_of = node.pop("allOf", None)
    if all_of is not None:
        if not (isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict)):
            raise ValueError(f"{path}: 'allOf' with several schemas has no strict-mode equivalent")
        node = {**all_of[0], **node}
        return _strict(node, path)
    if "oneOf" in node:
        if "anyOf" in node:
            raise ValueError(f"{path}: 'oneOf' beside 'anyOf' has no strict-mode equivalent")
        node["anyOf"] = node.pop("oneOf")
    _move_to_description(node)
    types = node.get("type")
    if types == "object" or (isinstance(types, list) and "object" in types) or "properties" in node:
        _strict_object(node, path)
    if types == "array" or (isinstance(types, list) and "array" in types):
        _strict_array(node, path)
    if "anyOf" in node:
        branches = node["anyOf"]
        if not isinstance(branches, list):
            raise ValueError(f"{path}/anyOf: not a list")
        node["anyOf"] = [_strict(sub, f"{path}/anyOf/{i}") for i, sub in enumerate(branches)]
    ref = node.get("$ref")
    if ref is not None and len(node) > 1:
        # Strict mode allows no siblings beside `$ref` (a field's description, say), but it
        # does beside `anyOf`.
        if "anyOf" in node:
            raise ValueError(f"{path}: '$ref' beside 'anyOf' has no strict-mode equivalent")
        node["anyOf"] = [{"$ref": node.pop("$ref")}]
    return node


def _strict_object(node: dict[str, Any], path: str) -> None:
    properties = node.get("properties")
    if properties is None:
        raise ValueError(
            f"{path}: an object without 'properties' (a free-form dict) cannot be strict"
        )
    if not isinstance(properties, dict):
        raise ValueError(f"{path}/properties: not an object")
    extra = node.get("additionalProperties", False)
    if extra is not False:
        raise ValueError(f"{path}: 'additionalProperties' {extra!r} cannot be strict")
    required = set(node.get("required", ()))
    strict_properties: dict[str, Any] = {}
    for name, sub in properties.items():
        prop = _strict(sub, f"{path}/properties/{name}")
        strict_properties[name] = prop if name in required else _nullable(prop)
    node["properties"] = strict_properties
    node["required"] = list(strict_properties)
    node["additionalProperties"] = False


def _strict_array(node: dict[str, Any], path: str) -> None:
    items = node.get("items")
    prefix = node.get("prefixItems")
    if isinstance(prefix, list):
        node["prefixItems"] = [
            _strict(sub, f"{path}/prefixItems/{i}") for i, sub in enumerate(prefix)
        ]
        if items is None or items is False:
            return
    if not (isinstance(items, dict) and any(key in items for key in _TYPE_KEYWORDS)):
        raise ValueError(f"{path}: an array without typed 'items' cannot be strict")
    node["items"] = _strict(items, f"{path}/items")


def _replace_ref(node: Any, old: str, new: str) -> Any:
    if isinstance(node, dict):
        return {
            key: new if key == "$ref" and value == old else _replace_ref(value, old, new)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_replace_ref(value, old, new) for value in node]
    return node


def _move_to_description(node: dict[str, Any]) -> None:
    notes = [f"{key}={node.pop(key)!r}" for key in _HINT_KEYWORDS if key in node]
    fmt = node.get("format")
    if isinstance(fmt, str) and fmt not in _STRICT_FORMATS:
        notes.append(f"format={node.pop('format')!r}")
    if notes:
        note = ", ".join(notes)
        description = node.get("description")
        node["description"] = f"{description} ({note})" if description else note


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    """`prop`, also accepting `null` (unchanged when it already does)."""
    if _allows_null(prop, None):
        return prop
    if isinstance(prop.get("anyOf"), list):
        return {**prop, "anyOf": [*prop["anyOf"], {"type": "null"}]}
    outer = {"description": prop.pop("description")} if "description" in prop else {}
    return {"anyOf": [prop, {"type": "null"}], **outer}


# --- validation ---


def _parse(text: str) -> Any:
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise OutputValidationError("the answer is not valid JSON: it is empty", text=text)
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        begins = body[:60] + ("…" if len(body) > 60 else "")
        raise OutputValidationError(
            f"the answer is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            f" (it begins {begins!r})",
            text=text,
        ) from exc


def _mismatch(problems: list[str]) -> str:
    shown = "; ".join(problems[:MAX_PROBLEMS])
    more = len(problems) - MAX_PROBLEMS
    return f"the answer does not match the schema: {shown}" + (
        f" (and {more} more)" if more > 0 else ""
    )


def _pydantic_problems(exc: ValidationError) -> list[str]:
    problems = []
    for error in exc.errors(include_url=False, include_context=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"])
        problems.append(f"{where}: {error['msg']}" if where else error["msg"])
    return problems


def _schema_problems(schema: dict[str, Any], data: Any) -> list[str]:
    from jsonschema.exceptions import best_match, relevance

    problems = []
    for error in sorted(_validator(schema).iter_errors(data), key=relevance):
        error = best_match([error])  # the most specific reason inside an anyOf, say
        where = ".".join(str(part) for part in error.absolute_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return problems


def _validator(schema: dict[str, Any]) -> Any:
    # Imported here: only agents with a JSON Schema output pay for loading jsonschema.
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise UserError(f"the output schema is not a valid JSON Schema: {exc.message}") from exc
    return cls(schema)


def _drop_unset_nulls(data: Any, schema: Any, root: dict[str, Any]) -> None:
    """Remove `null`s strict mode put where the original schema has an optional property."""
    schema = _deref(schema, root)
    if not isinstance(schema, dict):
        return
    if isinstance(data, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict):
            required = schema.get("required") or ()
            for key in [k for k in data if k in properties]:
                prop = properties[key]
                if data[key] is None and key not in required and not _allows_null(prop, root):
                    del data[key]
                else:
                    _drop_unset_nulls(data[key], prop, root)
    elif isinstance(data, list):
        items, prefix = schema.get("items"), schema.get("prefixItems")
        for i, value in enumerate(data):
            sub = prefix[i] if isinstance(prefix, list) and i < len(prefix) else items
            _drop_unset_nulls(value, sub, root)
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            for branch in branches:
                _drop_unset_nulls(data, branch, root)


def _allows_null(schema: Any, root: dict[str, Any] | None, depth: int = 0) -> bool:
    schema = _deref(schema, root) if root is not None else schema
    if not isinstance(schema, dict) or depth > _MAX_REF_HOPS:
        return schema is True
    types = schema.get("type")
    if types == "null" or (isinstance(types, list) and "null" in types):
        return True
    if "const" in schema and schema["const"] is None:
        return True
    if isinstance(schema.get("enum"), list) and None in schema["enum"]:
        return True
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and any(
            _allows_null(branch, root, depth + 1) for branch in branches
        ):
            return True
    return False


def _deref(schema: Any, root: dict[str, Any] | None) -> Any:
    for _ in range(_MAX_REF_HOPS):
        if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)) or root is None:
            return schema
        target = _resolve(root, schema["$ref"])
        if target is None:
            return schema
        schema = target
    return schema


def _resolve(root: dict[str, Any], ref: str) -> Any:
    """A local `#/...` JSON pointer into `root`, or None."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in filter(None, ref[1:].split("/")):
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node


def _is_model_class(output: object) -> bool:
    return isinstance(output, type) and issubclass(output, BaseModel)


@functools.lru_cache(maxsize=256)  # bounded: agents may build output models on the fly
def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema, built once per class (callers must not mutate it)."""
    try:
        return model.model_json_schema()
    except PydanticInvalidForJsonSchema as exc:
        raise UserError(f"output {model.__name__!r} has no JSON Schema: {exc.message}") from exc
