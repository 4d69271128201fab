"""Think turns inside your own Temporal workflows.

    from temporalio import workflow

    with workflow.unsafe.imports_passed_through():
        from think.workflow import run_turn

    @workflow.defn
    class Triage:
        @workflow.run
        async def run(self, ticket: Ticket) -> str:
            result = await run_turn("assistant", f"ticket-{ticket.id}", ticket.text,
                                    output_type=Verdict)
            return result.output.severity if result.output else "unknown"

`run_turn` runs one turn of a hosted agent's conversation as a child workflow of the calling
workflow (`think.RunTurn`, on Think's task queue) and returns how it ended, its answer and
its structured output parsed into your pydantic model. It is workflow code: deterministic, no
I/O; a retried or replayed call never submits twice. Host your workflows (and their
activities) on Think's worker with `THINK_WORKFLOWS` and `THINK_ACTIVITIES`, or on a worker
of your own that uses `pydantic_data_converter` (then pass `task_queue=`). docs/workflows.md
has the whole guide; `examples/webhook_reply.py` is a sample.
"""

from think.workflow._run_turn import TurnEnding, TurnResult, run_turn

__all__ = ["TurnEnding", "TurnResult", "run_turn"]
