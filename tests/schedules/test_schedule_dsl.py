"""The schedule DSL: every accepted form, timezones, and refusals that say how to fix them."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from temporalio.client import ScheduleRange

from think.schedules import ACCEPTED_FORMS, ScheduleDeclarationError, ScheduledTask, ScheduleRef
from think.schedules._dsl import parse_schedule
from think.schedules._reconcile import check_task


@pytest.mark.parametrize(
    ("text", "kind", "every"),
    [
        ("every 5 minutes", "minutes", timedelta(minutes=5)),
        ("every 1 minute", "minutes", timedelta(minutes=1)),
        ("every 2 hours", "hours", timedelta(hours=2)),
        ("  Every   90 MINUTES ", "minutes", timedelta(minutes=90)),
    ],
)
def test_intervals(text: str, kind: str, every: timedelta) -> None:
    parsed = parse_schedule("t", text)
    assert parsed.kind == kind
    assert [i.every for i in parsed.spec.intervals] == [every]
    assert parsed.timezone is None and not parsed.spec.calendars


@pytest.mark.parametrize(
    ("text", "kind", "hour", "minute", "days"),
    [
        ("every day at 09:00", "daily", 9, 0, None),
        ("every day at 7:05", "daily", 7, 5, None),
        ("every weekday at 07:30", "weekdays", 7, 30, [ScheduleRange(1, 5)]),
        ("every week on monday at 09:00", "weekly", 9, 0, [ScheduleRange(1)]),
        (
            "every week on wednesday, monday,sunday at 23:59",
            "weekly",
            23,
            59,
            [ScheduleRange(0), ScheduleRange(1), ScheduleRange(3)],
        ),
    ],
)
def test_wall_clock(
    text: str, kind: str, hour: int, minute: int, days: list[ScheduleRange]
) -> None:
    parsed = parse_schedule("t", text, "Europe/London")
    [calendar] = parsed.spec.calendars
    assert parsed.kind == kind
    assert calendar.hour == [ScheduleRange(hour)] and calendar.minute == [ScheduleRange(minute)]
    assert list(calendar.day_of_week) == (days or [ScheduleRange(0, 6)])
    assert parsed.spec.time_zone_name == parsed.timezone == "Europe/London"


def test_inline_zone_wins_and_keeps_its_case() -> None:
    parsed = parse_schedule("t", "every day at 08:00 in America/New_York", "Europe/London")
    assert parsed.timezone == parsed.spec.time_zone_name == "America/New_York"
    assert parse_schedule("t", "every 5 minutes in Asia/Tokyo").timezone == "Asia/Tokyo"


@pytest.mark.parametrize(
    ("text", "zone", "problem"),
    [
        ("every day at 09:00", None, "needs a timezone"),
        ("every day at 25:00", "UTC", "'25:00' is not a time of day"),
        ("every day at 09:60", "UTC", "'09:60' is not a time of day"),
        ("every 0 minutes", None, "at least 1"),
        ("every week on funday at 09:00", "UTC", "unknown day 'funday'"),
        ("every day at 09:00 in Mars/Olympus", None, "unknown timezone 'Mars/Olympus'"),
        ("every day at 09:00", "Not/AZone", "unknown timezone 'Not/AZone'"),
        ("daily at nine", "UTC", "not a schedule this DSL understands"),
        ("every 5 seconds", None, "not a schedule this DSL understands"),
        ("", None, "not a schedule this DSL understands"),
    ],
)
def test_refusals_name_task_text_and_forms(text: str, zone: str | None, problem: str) -> None:
    with pytest.raises(ScheduleDeclarationError) as caught:
        parse_schedule("digest", text, zone)
    message = str(caught.value)
    assert message.startswith(f"scheduled task 'digest' (schedule {text!r}): ")
    assert problem.replace("'", "") in message.replace("'", "")
    assert all(form in message for form in ACCEPTED_FORMS)


@pytest.mark.parametrize(
    "ref",
    [
        ScheduleRef("think", "a", "b"),
        ScheduleRef("think", "a:b", "c"),
        ScheduleRef("think", "a", "b:c"),
        ScheduleRef("q:1", "a%3Ab", "c", "t:1", "conv:1"),
        ScheduleRef("think", "a", "b", "default", "c"),
    ],
)
def test_schedule_ids_are_unambiguous(ref: ScheduleRef) -> None:
    if ref.conversation_id is None:
        ref = ScheduleRef(ref.task_queue, ref.agent, ref.task)
    assert ScheduleRef.parse(ref.schedule_id) == ref


def test_separator_in_a_name_cannot_collide() -> None:
    assert ScheduleRef("q", "a:b", "c").schedule_id != ScheduleRef("q", "a", "b:c").schedule_id
    assert ScheduleRef.parse("someone-else:x:y:z") is None


async def _noop(run: object) -> None:
    return None


@pytest.mark.parametrize(
    ("task", "problem"),
    [
        (ScheduledTask(schedule="every 5 minutes"), "give exactly one of prompt or handler"),
        (
            ScheduledTask(schedule="every 5 minutes", prompt="p", handler=_noop),
            "give exactly one of prompt or handler",
        ),
        (ScheduledTask(schedule="every 5 minutes", prompt="p", retry=-1), "retry=-1"),
        (
            ScheduledTask(schedule="every 5 minutes", prompt="p", conversation_id="no spaces"),
            "conversation_id 'no spaces' is not a valid id",
        ),
        ({"schedule": "every 5 minutes", "prompt": "p"}, "is not a think.ScheduledTask"),
    ],
)
def test_declaration_refusals(task: object, problem: str) -> None:
    with pytest.raises(ScheduleDeclarationError, match=re.escape(problem)) as caught:
        check_task("digest", task, None)
    assert str(caught.value).startswith("scheduled task 'digest'")


def test_a_prompt_task_needs_an_id_usable_as_conversation() -> None:
    with pytest.raises(ScheduleDeclarationError, match="set conversation_id"):
        check_task("weekly report", ScheduledTask(schedule="every 1 hours", prompt="p"), None)
    ok = ScheduledTask(schedule="every 1 hours", prompt="p", conversation_id="reports")
    assert check_task("weekly report", ok, None).kind == "hours"
