"""Your own Temporal workflows and activities, hosted by Think's worker beside the turns
(`THINK_WORKFLOWS`, `THINK_ACTIVITIES`): the workflows that call `think.workflow.run_turn`, and
the activities they call. Loaded when the worker starts, so a wrong path stops it at once,
naming the variable, instead of failing the first workflow that needs it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from think._settings import Settings
from think.exceptions import ConfigurationError

# What `@workflow.defn` and `@activity.defn` leave on what they decorate (the SDK reads them
# the same way when a worker registers it).
_WORKFLOW_MARK = "__temporal_workflow_definition"
_ACTIVITY_MARK = "__temporal_activity_definition"


def _load(variable: str, path: str) -> Any:
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"{variable} entry {path!r} is not of the form 'module:name'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"{variable} entry {path!r}: cannot import it: {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ConfigurationError(
                f"{variable} entry {path!r}: module {module_name!r} has no {attr!r}"
            )
    return target


def hosted_workflows(settings: Settings) -> list[type]:
    """The classes `THINK_WORKFLOWS` names, each a `@workflow.defn` class."""
    found: list[type] = []
    for path in settings.workflows:
        target = _load("THINK_WORKFLOWS", path)
        if not (isinstance(target, type) and hasattr(target, _WORKFLOW_MARK)):
            raise ConfigurationError(
                f"THINK_WORKFLOWS entry {path!r} is not a workflow: decorate the class with "
                "@workflow.defn"
            )
        found.append(target)
    return found


def hosted_activities(settings: Settings) -> list[Callable[..., Any]]:
    """The functions `THINK_ACTIVITIES` names, each an `@activity.defn` function."""
    found: list[Callable[..., Any]] = []
    for path in settings.activities:
        target = _load("THINK_ACTIVITIES", path)
        if not (callable(target) and hasattr(target, _ACTIVITY_MARK)):
            raise ConfigurationError(
                f"THINK_ACTIVITIES entry {path!r} is not an activity: decorate the function "
                "with @activity.defn"
            )
        found.append(target)
    return found
