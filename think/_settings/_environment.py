"""A settings declaration read from an environment mapping, and described: the source that
reads it, the list of its variables (for `think settings` and the docs), and the errors that
name them. Generic over the `BaseSettings` class; `think._settings` declares the one we have.

A field is a variable exactly when it declares `validation_alias` (the variable's name);
`repr=False` marks a secret, whose value no error shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource

from think.exceptions import ConfigurationError


class EnvironmentSource(EnvSettingsSource):
    """pydantic-settings' own environment source, over a given mapping instead of
    `os.environ` (so a test passes its variables), reading only the fields that declare a
    variable. Values are stripped: ` No ` is `no`, and a blank value is unset."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self.env_vars = {name: value.strip() for name, value in env.items() if value.strip()}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if not isinstance(field.validation_alias, str):
            return None, field_name, False
        return super().get_field_value(field, field_name)


@dataclass(frozen=True)
class Variable:
    """One variable as `Settings` declares it, for `think settings`, the docs and the tests."""

    name: str
    field: str
    description: str
    default: object
    examples: tuple[str, ...]
    secret: bool


def declared_variables(settings_cls: type[BaseSettings]) -> tuple[Variable, ...]:
    """Every variable `settings_cls` reads, in declaration order."""
    return tuple(
        Variable(
            name=info.validation_alias,
            field=field,
            description=info.description or "",
            default=info.get_default(call_default_factory=True),
            examples=tuple(str(e) for e in info.examples or ()),
            secret=not info.repr,
        )
        for field, info in settings_cls.model_fields.items()
        if isinstance(info.validation_alias, str)
    )


def configuration_error(
    settings_cls: type[BaseSettings], error: ValidationError, env: Mapping[str, str]
) -> ConfigurationError:
    """One line per value that could not be read, each naming its variable (and the value,
    unless it is a secret), saying what was expected in the words of its declaration."""
    declared = declared_variables(settings_cls)
    by_name = {v.field: v for v in declared} | {v.name: v for v in declared}
    problems = []
    for problem in error.errors(include_url=False):
        variable = by_name[str(problem["loc"][0])]
        raw = env.get(variable.name, "")
        shown = variable.name if variable.secret else f"{variable.name}={raw!r}"
        if problem["type"] == "value_error":
            said = str(problem["ctx"]["error"])
        else:
            said = f"expected {_expected(settings_cls.model_fields[variable.field])}"
        problems.append(f"{shown}: {said}")
    return ConfigurationError("; ".join(problems))


def _expected(info: FieldInfo) -> str:
    """What a field takes, from its type and bounds: `a whole number, 0 or more`."""
    if get_origin(info.annotation) is Literal:
        *first, last = get_args(info.annotation)
        return f"{', '.join(first)} or {last}"
    # `int | None`: the number it takes when set.
    kind = next((t for t in get_args(info.annotation) if t is not type(None)), info.annotation)
    if kind is bool:
        return "1 or 0 (true/false, yes/no, on/off)"
    words = "a whole number" if kind is int else "a number"
    bounds = {type(m).__name__: getattr(m, type(m).__name__.lower()) for m in info.metadata}
    if "Ge" in bounds and "Le" in bounds:
        return f"{words} from {bounds['Ge']} to {bounds['Le']}"
    if "Gt" in bounds and "Lt" in bounds:
        return f"{words} above {bounds['Gt']} and below {bounds['Lt']}"
    if "Gt" in bounds:
        return f"{words} above {bounds['Gt']}"
    if "Ge" in bounds:
        return f"{words}, {bounds['Ge']} or more"
    return words
