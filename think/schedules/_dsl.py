"""The schedule DSL (`every 5 minutes`, `every weekday at 07:30 in Europe/London`, ...) and
its translation into a Temporal `ScheduleSpec`.

Parsing happens when a worker starts, so a typo is refused there, with the accepted forms,
instead of surfacing as a schedule that silently never fires. Wall-clock forms become calendar
specs carrying `time_zone_name`: Temporal then handles clock changes (a 09:00 in London is
09:00 GMT in winter and 09:00 BST in summer), which no fixed interval could.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from temporalio.client import (
    ScheduleCalendarSpec,
    ScheduleIntervalSpec,
    ScheduleRange,
    ScheduleSpec,
)

from think.exceptions import ConfigurationError

ScheduleKind = Literal["minutes", "hours", "daily", "weekdays", "weekly"]

ACCEPTED_FORMS = (
    "every <n> minutes",
    "every <n> hours",
    "every day at HH:mm",
    "every weekday at HH:mm",
    "every week on monday,wednesday at HH:mm",
)
"""What `ScheduleDeclarationError` lists; each may end in `in <Area/City>`."""

DAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
"""Temporal's day-of-week numbering: 0 is Sunday."""

_ZONE = r"(?:\s+in\s+(?P<zone>\S+))?"
_AT = r"\s+at\s+(?P<hh>\d{1,2}):(?P<mm>\d{2})"
_INTERVAL = re.compile(r"every\s+(?P<n>\d+)\s+(?P<unit>minutes?|hours?)" + _ZONE)
_DAILY = re.compile(r"every\s+(?P<which>day|weekday)" + _AT + _ZONE)
_WEEKLY = re.compile(r"every\s+week\s+on\s+(?P<days>[a-z]+(?:\s*,\s*[a-z]+)*)" + _AT + _ZONE)


class ScheduleDeclarationError(ConfigurationError):
    """A declared task the worker cannot arm. Its message names the agent's task, the
    schedule text and what would have been accepted, so it can be fixed from the message
    alone; the worker refuses to start with it (one line, no traceback)."""

    def __init__(self, task: str, schedule: str, problem: str) -> None:
        forms = "; ".join(f"{f!r}" for f in ACCEPTED_FORMS)
        super().__init__(
            f"scheduled task {task!r} (schedule {schedule!r}): {problem}. Accepted forms: "
            f"{forms}, each optionally followed by 'in <Area/City>'"
        )
        self.task = task
        self.schedule = schedule


@dataclass(frozen=True)
class ParsedSchedule:
    """A schedule text, understood: what kind, in which zone, and the Temporal spec."""

    text: str
    kind: ScheduleKind
    timezone: str | None
    """None only for interval forms with no zone given anywhere (they need none)."""
    spec: ScheduleSpec


def check_timezone(task: str, schedule: str, name: str) -> str:
    """`name` if the tz database knows it (a check Temporal would only make later, in a less
    helpful message)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleDeclarationError(
            task, schedule, f"unknown timezone {name!r} (use an IANA name such as 'Europe/London')"
        ) from None
    return name


def parse_schedule(task: str, text: str, timezone: str | None = None) -> ParsedSchedule:
    """Parse `text`; `timezone` is the fallback (the task's, else the agent's default) for a
    wall-clock form without an inline `in <zone>`."""
    normal = " ".join(text.strip().lower().split())
    if match := _INTERVAL.fullmatch(normal):
        n = int(match["n"])
        if n < 1:
            raise ScheduleDeclarationError(task, text, "the interval must be at least 1")
        zone = _zone(task, text, match["zone"], timezone, required=False)
        unit: ScheduleKind = "minutes" if match["unit"].startswith("minute") else "hours"
        every = timedelta(minutes=n) if unit == "minutes" else timedelta(hours=n)
        spec = ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)], time_zone_name=zone)
        return ParsedSchedule(text, unit, zone, spec)
    if match := _DAILY.fullmatch(normal):
        days = [ScheduleRange(1, 5)] if match["which"] == "weekday" else None
        kind: ScheduleKind = "weekdays" if days else "daily"
        return _calendar(task, text, match, days, kind, timezone)
    if match := _WEEKLY.fullmatch(normal):
        names = [d.strip() for d in match["days"].split(",")]
        unknown = [d for d in names if d not in DAYS]
        if unknown:
            raise ScheduleDeclarationError(
                task,
                text,
                f"unknown day {unknown[0]!r} (days are {', '.join(DAYS[1:] + DAYS[:1])})",
            )
        ranges = [ScheduleRange(DAYS.index(d)) for d in sorted(set(names), key=DAYS.index)]
        return _calendar(task, text, match, ranges, "weekly", timezone)
    raise ScheduleDeclarationError(task, text, "not a schedule this DSL understands")


def _calendar(
    task: str,
    text: str,
    match: re.Match[str],
    days: list[ScheduleRange] | None,
    kind: ScheduleKind,
    timezone: str | None,
) -> ParsedSchedule:
    hour, minute = int(match["hh"]), int(match["mm"])
    if hour > 23 or minute > 59:
        raise ScheduleDeclarationError(
            task, text, f"{match['hh']}:{match['mm']} is not a time of day"
        )
    zone = _zone(task, text, match["zone"], timezone, required=True)
    calendar = ScheduleCalendarSpec(hour=[ScheduleRange(hour)], minute=[ScheduleRange(minute)])
    if days:
        calendar = dataclasses.replace(calendar, day_of_week=days)
    return ParsedSchedule(text, kind, zone, ScheduleSpec(calendars=[calendar], time_zone_name=zone))


def _zone(
    task: str, text: str, inline: str | None, fallback: str | None, *, required: bool
) -> str | None:
    if inline is not None:
        # The text was lowercased for matching; zone names are case-sensitive.
        original = text.split()[-1]
        return check_timezone(task, text, original)
    if fallback is not None:
        return check_timezone(task, text, fallback)
    if required:
        raise ScheduleDeclarationError(
            task,
            text,
            "a wall-clock schedule needs a timezone: add 'in <Area/City>', set the task's "
            "timezone, or override get_default_timezone()",
        )
    return None
