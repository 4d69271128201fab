"""Temporal activities: where I/O and user code run."""

from think.activities._submissions import SubmissionActivities
from think.activities._turn import TurnActivities

__all__ = ["SubmissionActivities", "TurnActivities"]
