"""A gateway that cannot start says why in one line.

The lifespan opens Postgres and Temporal; when one of them fails with an error of ours (a
`ThinkError`: Temporal unreachable, a TLS handshake that failed, a bad certificate file, each
naming its setting), Starlette hands uvicorn the whole traceback as the failure's message and
uvicorn logs it. Here that message is the error's one line instead; anything unexpected keeps
its traceback.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from think.exceptions import ThinkError


class OneLineStartupErrors:
    """Outermost ASGI wrapper: only the lifespan's startup failure is touched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        held: list[Message] = []

        async def sending(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed":
                held.append(message)  # sent below, once the failure's cause is known
                return
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except ThinkError as error:
            if not held:
                raise
            # Not raised again: uvicorn would log it with its traceback a second time.
            await send({"type": "lifespan.startup.failed", "message": f"think api: {error}"})
        except BaseException:
            for message in held:
                await send(message)
            raise
