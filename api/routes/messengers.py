"""`POST /v1/messengers/{agent}/{messenger}/webhook`: a chat platform's webhook.

Not behind the API keys: the platform cannot send one. The platform's own verification (the
declaration's secret: Telegram's secret-token header, Slack's signature) is checked first,
and a request that fails it answers 401 with nothing stored. Everything after is
`think.messenger_turns.receive`: the answer is 200 once the update is durably accepted (its
turn admitted and its delivery recorded), fast, since platforms retry slow webhooks; a known
update id answers 200 and changes nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse

from api.deps import Res
from api.errors import Problem
from think.exceptions import UserError
from think.server import DispatchFailed, MessengerHub, PlatformError, receive

router = APIRouter(tags=["messengers"])

AgentName = Annotated[str, Path(min_length=1, max_length=200, description="The agent's name")]
MessengerName = Annotated[
    str, Path(min_length=1, max_length=64, description="The messenger's name (its declaration's)")
]


@router.post(
    "/v1/messengers/{agent}/{messenger}/webhook",
    responses={
        200: {"description": "Accepted (or a known update: nothing new), or a challenge echoed"},
        400: {"description": "The body is not the platform's"},
        401: {"description": "Not verified as the platform's: nothing stored"},
        503: {"description": "Temporal or the platform unreachable: retry (the platform does)"},
        404: {"description": "No such agent, or it declares no such messenger"},
    },
)
async def webhook(request: Request, res: Res, agent: AgentName, messenger: MessengerName) -> Any:
    """Receive one update from a chat platform (docs/messengers.md)."""
    hub: MessengerHub = request.app.state.messengers
    try:
        found = hub.messenger(agent, messenger)
    except UserError as exc:
        raise Problem(503, f"agent {agent!r}'s messengers cannot run: {exc}") from None
    if found is None:
        raise Problem(404, f"agent {agent!r} declares no messenger {messenger!r}")
    cls, declared = found
    body = await request.body()
    try:
        answer = await receive(hub, cls, declared, request.headers, body)
    except (DispatchFailed, PlatformError) as exc:
        # Recorded as far as it got; the platform retries a webhook it did not see answered
        # 200, and the retry converges on the same turn (its update id is the idempotency key).
        raise Problem(
            503, f"not accepted yet, retry: {exc}", headers={"Retry-After": "1"}
        ) from None
    if answer.status == 401:
        raise Problem(401, f"the request is not verified as {declared.platform}'s")
    if answer.status == 400:
        raise Problem(400, str(answer.body.get("detail", "the body is not the platform's")))
    return JSONResponse(answer.body, status_code=answer.status)
