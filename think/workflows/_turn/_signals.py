"""A Signal's payload, read as plain JSON and validated by the turn itself, and the one log
line for a Signal the turn cannot use.

A Signal cannot be refused: its sender was told "succeeded" whatever the turn makes of it. A
typed parameter would make the SDK drop a misspelt key with a traceback in the worker's log and
nothing else, so the handlers take `Any` and validate it here.
"""

from __future__ import annotations

from typing import Any, TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # pydantic validates a Signal's raw JSON here, so a bad payload is one log line (below).
    from pydantic import BaseModel, ValidationError

PayloadT = TypeVar("PayloadT", bound=BaseModel)


def signal_payload(
    name: str, model: type[PayloadT], payload: Any, expected: str
) -> PayloadT | None:
    """`payload` as a `model`, or None (dropped with one line) when it is not one; `expected`
    shows the form it should have taken."""
    try:
        return model.model_validate(payload)
    except ValidationError as error:
        drop_signal(name, _input_problem(error, expected))
        return None


def drop_signal(name: str, why: str) -> None:
    """One warning line for a Signal the turn cannot use: the sender was told "succeeded"."""
    workflow.logger.warning(
        "dropped %s signal for turn %s: %s", name, workflow.info().workflow_id, why
    )


def _input_problem(error: ValidationError, expected: str) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
        for e in error.errors(include_url=False, include_input=False)
    )
    return f"its input is not of the form {expected} ({problems})"
