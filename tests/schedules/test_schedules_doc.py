"""docs/scheduled-tasks.md shows examples/digest.py as it is, and that agent arms."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from examples.digest import Digest
from think import ScheduledRun
from think.schedules._reconcile import arm

ROOT = Path(__file__).resolve().parents[2]


def test_doc_example_is_the_example_file() -> None:
    doc = (ROOT / "docs" / "scheduled-tasks.md").read_text()
    block = re.findall(r"```python\n(.*?)```", doc, re.S)[0]
    source = (ROOT / "examples" / "digest.py").read_text()
    assert block.strip() in source


def test_example_agent_arms_its_three_tasks() -> None:
    armed = {t.ref.task: t for t in arm(Digest(), "think")}
    assert set(armed) == {"weekly", "ticks", "ledger"}
    assert armed["weekly"].parsed.timezone == "Europe/London"
    assert armed["ledger"].parsed.timezone == "America/New_York"
    assert armed["ledger"].occurrence_input().attempts == 4
    assert armed["weekly"].ref.schedule_id == "think-schedule:think:digest:weekly"


async def test_example_handler_writes_each_occurrence_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    task = Digest().get_scheduled_tasks()["ledger"]
    assert task.handler is not None
    run = ScheduledRun(
        task_id="ledger",
        scheduled_for=datetime(2026, 12, 1, 12, 30, tzinfo=UTC),
        occurrence_key="k@2026-12-01T12:30:00Z",
        idempotency_key="occ_1",
        schedule="every weekday at 07:30",
        schedule_kind="weekdays",
        timezone="America/New_York",
    )
    for _ in range(2):  # a second delivery of the same occurrence
        await task.handler(run)
    [line] = (tmp_path / ".think" / "ledger.jsonl").read_text().splitlines()
    assert json.loads(line) == {
        "key": "occ_1",
        "for": "2026-12-01T12:30:00+00:00",
        "zone": "America/New_York",
    }
