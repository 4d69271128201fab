"""Temporal activities: where I/O and user code run."""

from think.engine.activities._early_steps import EarlySteps
from think.engine.activities._submissions import SubmissionActivities
from think.engine.activities._turn import TurnActivities

__all__ = ["EarlySteps", "SubmissionActivities", "TurnActivities"]
