"""`think api` and `think worker` run on uvloop (THINK_EVENT_LOOP), and say so clearly when
asked for a loop they cannot have; the worker's other runtime switches refuse a value they
cannot read, as clearly."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import uvloop

from tests._stack import Stack
from think._settings import Settings
from think.cli._commands import _event_loop_factory, _uvicorn_loop
from think.exceptions import ConfigurationError


def test_auto_takes_uvloop_and_asyncio_keeps_the_standard_loop() -> None:
    auto = Settings.from_env({}, find_dev_stack=False)
    assert auto.event_loop == "auto"
    assert _event_loop_factory(auto) is uvloop.new_event_loop
    assert _uvicorn_loop(auto) == "uvloop"
    plain = Settings.from_env({"THINK_EVENT_LOOP": " AsyncIO "}, find_dev_stack=False)
    assert _event_loop_factory(plain) is None
    assert _uvicorn_loop(plain) == "asyncio"
    with asyncio.Runner(loop_factory=_event_loop_factory(auto)) as runner:
        assert isinstance(runner.get_loop(), uvloop.Loop)


def test_an_unknown_loop_is_a_configuration_error_naming_the_variable() -> None:
    with pytest.raises(
        ConfigurationError, match=r"THINK_EVENT_LOOP='trio'.*auto, uvloop or asyncio"
    ):
        Settings.from_env({"THINK_EVENT_LOOP": "trio"}, find_dev_stack=False)


def test_uvloop_asked_for_but_missing_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` now raises ImportError
    wanted = Settings.from_env({"THINK_EVENT_LOOP": "uvloop"}, find_dev_stack=False)
    with pytest.raises(ConfigurationError, match="pip install uvloop"):
        _event_loop_factory(wanted)
    assert _event_loop_factory(Settings.from_env({}, find_dev_stack=False)) is None


def test_the_running_worker_and_api_have_uvloop_loaded(stack: Stack) -> None:
    """The processes of the suite's own stack (started as `think worker` / `think api`)."""
    for role in ("worker", "api"):
        (pid,) = stack.pids[role][:1]
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert "uvloop" in maps, f"{role} (pid {pid}) has no uvloop module mapped"


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("THINK_WORKFLOW_TASKS_INLINE", "workflow_tasks_inline"),
        ("THINK_EARLY_FIRST_STEP", "early_first_step"),
    ],
)
def test_the_workers_switches_read_0_and_1_and_refuse_anything_else(name: str, field: str) -> None:
    assert getattr(Settings.from_env({}, find_dev_stack=False), field) is True
    for off in ("0", "false", " No "):
        assert getattr(Settings.from_env({name: off}, find_dev_stack=False), field) is False
    assert getattr(Settings.from_env({name: "1"}, find_dev_stack=False), field) is True
    with pytest.raises(ConfigurationError, match=f"{name}='maybe'"):
        Settings.from_env({name: "maybe"}, find_dev_stack=False)
