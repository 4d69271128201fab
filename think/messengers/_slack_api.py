"""Slack's Web API, as delivery uses it: post in a thread, edit, buttons, who said it.

Through `slack_sdk`'s `AsyncWebClient` with `base_url` the declaration's `api_url` (tests
point it at a fake on 127.0.0.1). The SDK's own retry handlers are off, so nothing here
retries on its own: a 429 raises `SlackRateLimited` with Slack's `Retry-After` (the delivery
core waits it out, or skips an edit a later one supersedes: chat.update is limited to about
one a second per channel), `ok: false` raises `SlackCallFailed` naming Slack's error, and
anything else fails the activity, which Temporal retries.
"""

from collections.abc import Mapping
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

SLACK_API_URL = "https://slack.com/api/"
SLACK_EDIT_INTERVAL = 1.0
"""Seconds between two edits of messages in one channel: Slack's chat.update rate (~1/s)."""
SECTION_LIMIT = 3000
"""The most characters of text one section block holds."""
BUTTON_ACTION = "think_button_"
_STYLES = {"approve": "primary", "deny": "danger"}


class SlackCallFailed(RuntimeError):
    """A Web API call answered `ok: false` (or kept answering 429): the method and Slack's error."""

    def __init__(self, method: str, error: str) -> None:
        super().__init__(f"Slack's {method} failed: {error!r}")
        self.method = method
        self.error = error


class SlackRateLimited(SlackCallFailed):
    """HTTP 429: Slack accepts the same call again after `retry_after` seconds."""

    def __init__(self, method: str, retry_after: float) -> None:
        super().__init__(method, "ratelimited")
        self.retry_after = retry_after


class SlackApi:
    """One bot's Web API client: the token, the base URL and the per-channel edit clock."""

    def __init__(self, token: str, api_url: str = SLACK_API_URL) -> None:
        self._client = AsyncWebClient(token=token, base_url=api_url, retry_handlers=[])
        self._labels: dict[str, str] = {}

    async def bot_user_id(self) -> str:
        """The bot's own user id (`auth.test`), so its own messages are never answered."""
        data = await self._call("auth.test", {})
        return str(data["user_id"])

    async def post(
        self,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> str:
        """`chat.postMessage` (in `thread_ts` when given); the new message's `ts`."""
        params: dict[str, Any] = {"channel": channel, "text": text}
        if thread_ts is not None:
            params["thread_ts"] = thread_ts
        if blocks is not None:
            params["blocks"] = blocks
        data = await self._call("chat.postMessage", params)
        return str(data["ts"])

    async def ephemeral(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None
    ) -> None:
        """`chat.postEphemeral`: `text` shown to `user` alone, in the thread when given."""
        params: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if thread_ts is not None:
            params["thread_ts"] = thread_ts
        await self._call("chat.postEphemeral", params)

    async def update(
        self, channel: str, ts: str, text: str, *, blocks: list[dict[str, Any]] | None = None
    ) -> None:
        """`chat.update` of our message `ts` (its blocks too when given)."""
        params: dict[str, Any] = {"channel": channel, "ts": ts, "text": text}
        if blocks is not None:
            params["blocks"] = blocks
        await self._call("chat.update", params)

    async def user_label(self, user: str) -> str:
        """How a person is called in the workspace (`users.info`: display name, else real
        name, else the id), remembered for the client's life."""
        if user not in self._labels:
            data = await self._call("users.info", {"user": user})
            found = data.get("user")
            profile = found.get("profile", {}) if isinstance(found, dict) else {}
            label = (
                profile.get("display_name")
                or profile.get("real_name")
                or (found.get("real_name") if isinstance(found, dict) else None)
                or (found.get("name") if isinstance(found, dict) else None)
                or user
            )
            self._labels[user] = str(label)
        return self._labels[user]

    async def _call(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        try:
            if method == "users.info":
                response = await self._client.api_call(method, http_verb="GET", params=dict(params))
            else:
                response = await self._client.api_call(method, json=dict(params))
        except SlackApiError as exc:
            status = exc.response.status_code
            if status == 429:
                after = exc.response.headers.get("Retry-After", "1")
                raise SlackRateLimited(method, float(after or 1)) from exc
            raise SlackCallFailed(method, str(exc.response.get("error", status))) from exc
        data = response.data
        if not isinstance(data, dict):
            raise SlackCallFailed(method, "the answer is not a JSON object")
        return data


def section_blocks(text: str) -> list[dict[str, Any]]:
    """`text` (mrkdwn) as section blocks of at most 3,000 characters each (Slack's limit)."""
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": text[at : at + SECTION_LIMIT]}}
        for at in range(0, len(text), SECTION_LIMIT)
    ]


def button_blocks(text: str, buttons: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A message with a row of buttons: `text` (mrkdwn) above, then each `(label, data)` as a
    button whose `value` is `data` (what a press carries back). An Approve is green, a Deny red.
    """
    elements: list[dict[str, Any]] = []
    for index, (label, data) in enumerate(buttons):
        button: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": label[:75]},
            "action_id": f"{BUTTON_ACTION}{index}",
            "value": data,
        }
        if style := _STYLES.get(label.strip().lower()):
            button["style"] = style
        elements.append(button)
    return [*section_blocks(text), {"type": "actions", "block_id": "think", "elements": elements}]
