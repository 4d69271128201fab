"""The agents a deployment hosts, loaded from `THINK_AGENTS` import paths."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Iterator

from think.agent._think import Think
from think.exceptions import AgentNotFoundError, ConfigurationError


class AgentRegistry:
    """Agent classes by name. Both the gateway and the worker build one from the same setting."""

    def __init__(self, agents: Iterable[type[Think]]) -> None:
        self._by_name: dict[str, type[Think]] = {}
        for cls in agents:
            if cls.name in self._by_name:
                raise ConfigurationError(f"two agents are named {cls.name!r}")
            self._by_name[cls.name] = cls

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
