"""Scheduled tasks: recurring prompts and handlers an agent declares in
`get_scheduled_tasks()`, each armed as a Temporal Schedule (docs/scheduled-tasks.md).

An occurrence is a small workflow (`think.ScheduledOccurrence`) whose one activity either
admits a turn through the normal admission, keyed by the occurrence, or runs the handler.
"""

from think.schedules._dsl import ACCEPTED_FORMS, ScheduleDeclarationError, ScheduleKind
from think.schedules._names import OCCURRENCE_WORKFLOW, ScheduleRef
from think.schedules._occurrence import ScheduleActivities
from think.schedules._operations import (
    ScheduleNotFound,
    ScheduleSummary,
    check_deployment,
    delete_conversation_schedules,
    list_schedules,
    reconcile_conversation,
    reconcile_conversations,
    reconcile_deployment,
    trigger,
)
from think.schedules._reconcile import CATCHUP_WINDOW, OVERLAP
from think.schedules._task import ScheduledRun, ScheduledTask, ScheduledTasksScope
from think.schedules._workflow import ScheduledOccurrence

__all__ = [
    "ACCEPTED_FORMS",
    "CATCHUP_WINDOW",
    "OCCURRENCE_WORKFLOW",
    "OVERLAP",
    "ScheduleActivities",
    "ScheduleDeclarationError",
    "ScheduleKind",
    "ScheduleNotFound",
    "ScheduleRef",
    "ScheduleSummary",
    "ScheduledOccurrence",
    "ScheduledRun",
    "ScheduledTask",
    "ScheduledTasksScope",
    "check_deployment",
    "delete_conversation_schedules",
    "list_schedules",
    "reconcile_conversation",
    "reconcile_conversations",
    "reconcile_deployment",
    "trigger",
]
