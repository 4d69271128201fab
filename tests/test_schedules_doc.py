"""docs/scheduled-tasks.md shows examples/digest.py as it is, and that agent arms."""

from __future__ import annotations

import re
from pathlib import Path

from examples.digest import Digest
from think.schedules._reconcile import arm

ROOT = Path(__file__).resolve().parent.parent


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
