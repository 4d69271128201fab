"""The turn's workflows: `TurnWorkflow` (one turn: model steps and tool calls until the model
answers without tools), `AfterTurnWorkflow` (what runs once a turn is over) and
`RunTurnWorkflow` (a turn run for a user's own workflow).

Workflow code only sequences activities; all I/O and all user code (model, tools, hooks) run
inside activities. Results passed between them are ids and small values: the transcript and
the growing assistant message live in Postgres.

The turn is started directly, once it is its conversation's turn to run (the queue is in
Postgres: `think.turns._dispatch`), and runs its steps as **local activities**: each is a marker in
the history, not a task round trip through the server, so a plain turn is one workflow task
and 7 history events, a tool turn 9. What that costs, and how it is paid for:
- a step's worker dies: the workflow task times out (`TASK_TIMEOUT`, 5 s) and another worker
  replays the turn; every activity is idempotent on Postgres, so the steps that finished
  answer from their record and a finished tool never runs again;
- a cancel: it reaches a streaming step through Postgres (`NOTIFY think_cancel`) at once,
  and the workflow through Temporal's cancel;
- a long step keeps its workflow task open by completing it every 4 s (three events each).

The first model step also starts the turn (appends the user's message) and the step that
answers without tools also ends it (stores the message), each in the transaction that records
the step.

Where each part is:
- `_workflow`: `TurnWorkflow`, the step loop, one tool call, and how the turn ends;
- `_approvals_and_client_tools`: what the turn pauses for (a person's answer to an approval
  request, a client's tool result): the Updates and Signals that answer it;
- `_progress`: what the turn shows operators: the Temporal UI's current details, the
  ThinkTurnStatus search attribute and the status Query;
- `_sub_agents`: an agent tool's call, waiting for the sub-agent's turn, and a sub-agent's
  turn telling its parent it has ended;
- `_after_turn`: `AfterTurnWorkflow` (`on_chat_response` and compaction, off the turn's path);
- `_run_turn`: `RunTurnWorkflow` (`think.RunTurn`: a turn for a user's own workflow code, as
  its child; `think.workflow.run_turn` starts it);
- `_activities`: the activities' timeouts and retry policies, and the short database step;
- `_parked_action`: `ParkedActionWorkflow` (`think.ParkedAction`: an action parked for a
  person's decision outside its turn, run once decided; `@action(approval="durable_pause")`);
- `_signals`: reading a Signal's payload, and dropping one the turn cannot use;
- `_webhooks`: starting a turn's outbound webhooks (only for agents that have some) and
  `WebhookDeliveryWorkflow` (`think.WebhookDelivery`: one event to one URL, retried).

This package is the workflow code the sandbox reloads for every run (`SANDBOXED` in
`think.engine._worker`); everything else of `think` it imports is passed through.
"""

from think.workflows._turn._after_turn import AfterTurnWorkflow
from think.workflows._turn._parked_action import ParkedActionWorkflow
from think.workflows._turn._run_turn import RunTurnWorkflow
from think.workflows._turn._webhooks import WebhookDeliveryWorkflow
from think.workflows._turn._workflow import TurnWorkflow

__all__ = [
    "AfterTurnWorkflow",
    "ParkedActionWorkflow",
    "RunTurnWorkflow",
    "TurnWorkflow",
    "WebhookDeliveryWorkflow",
]
