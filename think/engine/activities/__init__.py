"""Temporal activities: where I/O and user code run."""

from think.engine.activities._debounce import SubmissionActivities
from think.engine.activities._eager_first_step import EarlySteps
from think.engine.activities._turn import TurnActivities

__all__ = ["EarlySteps", "SubmissionActivities", "TurnActivities"]
