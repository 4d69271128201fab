"""The engine: the activities where a turn's I/O and user code run (model steps, tool calls,
the end of a turn), as a worker registers them.

Imported by `server` and the worker entry point only.
"""

from think.engine._declarations import check_agents
from think.engine._expected_failures import quiet_expected_failures
from think.engine._worker import build_worker, run_worker, sweep_once, workflow_runner
from think.engine.activities import DebounceActivities, TurnActivities

__all__ = [
    "DebounceActivities",
    "TurnActivities",
    "build_worker",
    "check_agents",
    "quiet_expected_failures",
    "run_worker",
    "sweep_once",
    "workflow_runner",
]
