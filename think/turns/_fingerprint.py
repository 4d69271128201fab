"""The idempotency fingerprint of a submission: what a retry with the same Idempotency-Key
(or submission id) must repeat exactly, and its hash as `turns.request_hash` stores it.

One definition for every door, so a key used over HTTP and then from Python (or the other
way round) is the same turn when the request is the same, and a conflict when it is not. The
hash of a key already stored must never change: fields added after the first release count
only when given.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from think.storage import TurnRequest


def turn_fingerprint(
    request: TurnRequest,
    *,
    input: Any,
    concurrency: str | None = None,
    submission_id: str | None = None,
) -> dict[str, Any]:
    """What identifies a submission, as JSON: its request as the caller gave it.

    `input` is the input as HTTP's body carries it (a string, a message's JSON or a list of
    them; ignored for a continuation, which has none); `concurrency` is the caller's override,
    not the mode admission resolved. The mode and `wait_timeout` are not part of it: a retry
    may wait where the first call submitted.
    """
    found: dict[str, Any] = {
        "parent_id": request.parent_id,
        "body": request.body,
        "client_tools": request.client_tools,
    }
    if request.continuation:
        found["continuation"] = True
    else:
        found["input"] = input
    if concurrency is not None:
        found["concurrency"] = concurrency
    if request.output is not None:
        found["output"] = request.output
    if submission_id is not None:
        found["submission_id"] = submission_id
    return found


def request_hash(fingerprint: dict[str, Any]) -> str:
    """What an idempotent retry must repeat exactly, hashed."""
    canonical = json.dumps(fingerprint, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
