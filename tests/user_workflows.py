"""A user's own workflow that runs Think turns (`think.workflow.run_turn`), hosted by the
test stacks' workers (`THINK_WORKFLOWS`) beside `examples.webhook_reply`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from think.workflow import run_turn


class Answer(BaseModel):
    """The structured answer the workflow asks for."""

    severity: Literal["low", "high"]
    reason: str


class Ask(BaseModel):
    conversation_id: str
    input: str
    agent: str = "helper"
    typed: bool = True
    idempotency_key: str | None = None
    calls: int = 1
    """How many times to call `run_turn` (with the same `idempotency_key`, one turn)."""


class Asked(BaseModel):
    results: list[dict[str, Any]]
    output_classes: list[str | None]


@workflow.defn(name="tests.AskThink")
class AskThink:
    @workflow.run
    async def run(self, ask: Ask) -> Asked:
        results: list[dict[str, Any]] = []
        classes: list[str | None] = []
        for _ in range(ask.calls):
            if ask.typed:
                typed = await run_turn(
                    ask.agent,
                    ask.conversation_id,
                    ask.input,
                    output_type=Answer,
                    idempotency_key=ask.idempotency_key,
                )
                if typed.output is not None:
                    assert isinstance(typed.output, Answer)  # the class itself, not a dict
                classes.append(None if typed.output is None else type(typed.output).__name__)
                results.append(typed.model_dump(mode="json"))
            else:
                plain = await run_turn(
                    ask.agent,
                    ask.conversation_id,
                    ask.input,
                    idempotency_key=ask.idempotency_key,
                )
                classes.append(None)
                results.append(plain.model_dump(mode="json"))
        return Asked(results=results, output_classes=classes)
