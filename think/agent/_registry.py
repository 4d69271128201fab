"""The agents a deployment hosts, loaded from `THINK_AGENTS` import paths."""

from __future__ import annotations

import difflib
import importlib
import logging
from collections.abc import Iterable, Iterator

from think.agent._agent_tool import agent_tools
from think.agent._think import Think
from think.exceptions import AgentNotFoundError, ConfigurationError

log = logging.getLogger("think.agent")


class AgentRegistry:
    """Agent classes by name. Both the gateway and the worker build one from the same setting.

    The sub-agents of a listed agent (its `agent_tool`s' agents and its `sub_agents`) are
    hosted too, and theirs in turn: a child's conversation is reachable over HTTP (drill-in)
    and its turns run on the same workers as its parent's."""

    def __init__(self, agents: Iterable[type[Think]]) -> None:
        self._by_name: dict[str, type[Think]] = {}
        listed = list(agents)
        for cls in listed:
            if cls.name in self._by_name:
                raise ConfigurationError(f"two agents are named {cls.name!r}")
            self._by_name[cls.name] = cls
        pending = [child for cls in listed for child in children_of(cls)]
        while pending:
            child = pending.pop()
            known = self._by_name.get(child.name)
            if known is child:
                continue
            if known is not None:
                raise ConfigurationError(
                    f"sub-agent {child.__module__}.{child.__qualname__} is named "
                    f"{child.name!r}, as is {known.__module__}.{known.__qualname__}: give one "
                    "of them another `name`"
                )
            self._by_name[child.name] = child
            pending.extend(children_of(child))

    @classmethod
    def from_paths(cls, paths: Iterable[str]) -> AgentRegistry:
        return cls(load_agent(p) for p in paths)

    def get(self, name: str) -> type[Think]:
        try:
            return self._by_name[name]
        except KeyError:
            raise AgentNotFoundError(name, sorted(self._by_name)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[type[Think]]:
        return iter(self._by_name.values())


def load_agent(path: str) -> type[Think]:
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"THINK_AGENTS entry {path!r} is not of the form 'module:Class'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import agent module {module_name!r}: {exc}") from exc
    obj = getattr(module, attr, None)
    if isinstance(obj, type) and issubclass(obj, Think):
        return obj
    found = sorted(
        name
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, Think) and value is not Think
    )
    has = (
        f"its Think subclasses: {', '.join(found)}"
        if found
        else "it has no Think subclass (is it the right module?)"
    )
    if obj is None:
        close = difflib.get_close_matches(attr, found, n=1)
        hint = f"; did you mean {module_name}:{close[0]}?" if close else ""
        raise ConfigurationError(
            f"THINK_AGENTS entry {path!r}: module {module_name!r} has no attribute "
            f"{attr!r}{hint} ({has})"
        )
    raise ConfigurationError(
        f"THINK_AGENTS entry {path!r}: {attr!r} is a {type(obj).__name__}, not a subclass "
        f"of think.Think ({has})"
    )


def children_of(cls: type[Think]) -> list[type[Think]]:
    """The agents `cls` delegates to: its `sub_agents` and its agent tools' agents (found by
    calling `get_tools()` outside any conversation, as `GET /v1/agents` does)."""
    found = list(cls.sub_agents)
    try:
        tools = cls().get_tools()
    except Exception:
        log.warning("could not list the tools of agent %s for its sub-agents", cls.name)
        tools = []
    found.extend(t.agent for t in agent_tools(list(tools)))
    return found
