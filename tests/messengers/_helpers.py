"""What the messenger tests share: posting an update to the webhook as Telegram does."""

from __future__ import annotations

from typing import Any

import httpx

SECRET = "s3cret-token_value"
HEADER = "X-Telegram-Bot-Api-Secret-Token"


async def post_update(
    client: httpx.AsyncClient,
    update: dict[str, Any],
    *,
    agent: str = "tg_chatty",
    secret: str | None = SECRET,
) -> httpx.Response:
    headers = {HEADER: secret} if secret is not None else {}
    return await client.post(
        f"/v1/messengers/{agent}/telegram/webhook", json=update, headers=headers
    )
