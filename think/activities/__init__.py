"""Temporal activities: where I/O and user code run."""

from think.activities._turn import TurnActivities

__all__ = ["TurnActivities"]
