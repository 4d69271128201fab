"""Temporal activities: where I/O and user code run."""

from think.engine.activities._debounce import DebounceActivities
from think.engine.activities._eager_first_step import EarlySteps
from think.engine.activities._parked_actions import ParkedActions
from think.engine.activities._resources import ActivityResources
from think.engine.activities._turn import TurnActivities
from think.engine.activities._turn_state import end_abandoned

__all__ = [
    "ActivityResources",
    "DebounceActivities",
    "EarlySteps",
    "ParkedActions",
    "TurnActivities",
    "end_abandoned",
]
