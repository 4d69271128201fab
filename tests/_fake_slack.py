"""A fake Slack: the Web API on a real HTTP server on 127.0.0.1, and Slack's side of a webhook.

`FakeSlack` answers the Web API methods delivery uses as Slack does (JSON `{"ok": true, ...}`
with `ts` values, `{"ok": false, "error": ...}` on a bad token or bad input, HTTP 429 with
`Retry-After` when chat.update comes faster than `edit_interval` in one channel), keeps the
messages it was sent (and their edits), serves `url_private` files behind the bot token, and
records every call. `slack_sdk`'s real client talks to it through `api_url`.

`signed_headers` signs a body as Slack signs what it POSTs (`v0:{timestamp}:{body}`, HMAC
SHA-256 with the signing secret); `event`, `message_event`, `mention_event` and
`block_actions` build the bodies Slack sends, so tests POST them to the gateway as Slack would.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

BOT_TOKEN = "xoxb-test-token"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_USER = "UBOT0001"
TEAM = "T0001"


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    status: int
    answer: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    """When the fake answered it (`time.monotonic()`: bench/messengers_slack.py reads it)."""


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    thread_ts: str | None
    blocks: list[dict[str, Any]] | None
    edits: list[str] = field(default_factory=list)


class FakeSlack:
    """The Web API's state: messages by (channel, ts), files, and every call in order."""

    def __init__(self, token: str = BOT_TOKEN, edit_interval: float = 1.0) -> None:
        self.token = token
        self.edit_interval = edit_interval
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], Message] = {}
        self.files: dict[str, bytes] = {}
        self.downloads: list[str] = []
        """The path of every file GET, in order (allowed or not)."""
        self.names: dict[str, str] = {}
        """Display names `users.info` answers with, by user id (else the id in lower case)."""
        self.ephemerals: list[tuple[str, str, str]] = []
        """(channel, user, text) of each ephemeral message, in order."""
        self._lock = threading.Lock()
        self._ts = itertools.count(1)
        self._last_edit: dict[str, float] = {}
        self.port = 0

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def file_url(self, file_id: str, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/files-pri/{TEAM}-{file_id}/{quote(name)}"

    def add_file(self, file_id: str, name: str, data: bytes) -> str:
        url = self.file_url(file_id, name)
        self.files[url.split(f":{self.port}", 1)[1]] = data
        return url

    def posted(self, channel: str | None = None) -> list[Message]:
        """Messages posted (in order), those of `channel` only when given."""
        with self._lock:
            found = [m for m in self.messages.values() if channel in (None, m.channel)]
        return sorted(found, key=lambda m: m.ts)

    def calls_of(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    # The Web API, as the handler calls it.

    def answer(
        self, method: str, params: dict[str, Any], auth: str
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        headers: dict[str, str] = {}
        with self._lock:
            if auth != f"Bearer {self.token}":
                status, body = 200, {"ok": False, "error": "invalid_auth"}
            else:
                status, body, headers = self._method(method, params)
            self.calls.append(Call(method, params, status, body))
        return status, body, headers

    def _method(
        self, method: str, params: dict[str, Any]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        match method:
            case "auth.test":
                return (
                    200,
                    {"ok": True, "user_id": BOT_USER, "team_id": TEAM, "bot_id": "B0001"},
                    {},
                )
            case "chat.postMessage":
                return self._post(params)
            case "chat.update":
                return self._update(params)
            case "chat.postEphemeral":
                return self._ephemeral(params)
            case "users.info":
                user = str(params.get("user") or "")
                if not user.startswith("U"):
                    return 200, {"ok": False, "error": "user_not_found"}, {}
                name = self.names.get(user, user.lower())
                profile = {"display_name": name, "real_name": name.title()}
                return 200, {"ok": True, "user": {"id": user, "name": name, "profile": profile}}, {}
            case _:
                return 200, {"ok": False, "error": "unknown_method"}, {}

    def _post(self, params: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        channel, text, blocks = params.get("channel"), params.get("text"), params.get("blocks")
        if not isinstance(channel, str) or not channel:
            return 200, {"ok": False, "error": "channel_not_found"}, {}
        if not text and not blocks:
            return 200, {"ok": False, "error": "no_text"}, {}
        if isinstance(text, str) and len(text) > 40_000:
            return 200, {"ok": False, "error": "msg_too_long"}, {}
        ts = f"{1_800_000_000 + next(self._ts)}.000100"
        thread_ts = params.get("thread_ts")
        self.messages[(channel, ts)] = Message(channel, ts, str(text or ""), thread_ts, blocks)
        message = {"type": "message", "text": text, "ts": ts, "user": BOT_USER, "bot_id": "B0001"}
        if thread_ts:
            message["thread_ts"] = thread_ts
        return 200, {"ok": True, "channel": channel, "ts": ts, "message": message}, {}

    def _ephemeral(self, params: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        channel, user, text = params.get("channel"), params.get("user"), params.get("text")
        if not channel or not user or not text:
            return 200, {"ok": False, "error": "invalid_arguments"}, {}
        self.ephemerals.append((str(channel), str(user), str(text)))
        return 200, {"ok": True, "message_ts": f"{1_800_000_000 + next(self._ts)}.000300"}, {}

    def _update(self, params: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        channel, ts = params.get("channel"), params.get("ts")
        message = self.messages.get((str(channel), str(ts)))
        if message is None:
            return 200, {"ok": False, "error": "message_not_found"}, {}
        now = time.monotonic()
        if now - self._last_edit.get(message.channel, -1e9) < self.edit_interval:
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}
        self._last_edit[message.channel] = now
        if params.get("text") is not None:
            message.text = str(params["text"])
            message.edits.append(message.text)
        if params.get("blocks") is not None:
            message.blocks = params["blocks"] or None
        return 200, {"ok": True, "channel": channel, "ts": ts, "text": message.text}, {}


def _handler(slack: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(
            self, status: int, body: bytes, content_type: str, headers: dict[str, str]
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.startswith("/api/"):
                method, _, query = self.path[len("/api/") :].partition("?")
                params = {k: v[0] for k, v in parse_qs(query).items()}
                status, body, headers = slack.answer(
                    method, params, self.headers.get("Authorization") or ""
                )
                self._send(status, json.dumps(body).encode(), "application/json", headers)
                return
            data = slack.files.get(self.path)
            slack.downloads.append(self.path)
            if self.headers.get("Authorization") != f"Bearer {slack.token}" or data is None:
                self._send(404, b"not found", "text/plain", {})
                return
            self._send(200, data, "application/octet-stream", {})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self.path.startswith("/api/"):
                self._send(404, b"not found", "text/plain", {})
                return
            method = self.path[len("/api/") :].split("?")[0]
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            params: dict[str, Any]
            if kind == "application/json":
                params = json.loads(raw or b"{}")
            else:
                params = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                if isinstance(params.get("blocks"), str):
                    params["blocks"] = json.loads(params["blocks"])
            status, body, headers = slack.answer(
                method, params, self.headers.get("Authorization") or ""
            )
            self._send(
                status, json.dumps(body).encode(), "application/json; charset=utf-8", headers
            )

    return Handler


@contextmanager
def fake_slack(edit_interval: float = 1.0) -> Iterator[FakeSlack]:
    """A `FakeSlack` served on 127.0.0.1 for the block's length."""
    slack = FakeSlack(edit_interval=edit_interval)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(slack))
    server.daemon_threads = True
    slack.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield slack
    finally:
        server.shutdown()
        server.server_close()


# Slack's side of the webhook.


def signed_headers(
    body: bytes,
    *,
    secret: str = SIGNING_SECRET,
    timestamp: int | None = None,
    retry: int | None = None,
) -> dict[str, str]:
    """The headers Slack sends with `body`: its timestamp and `v0=` signature."""
    when = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + when.encode() + b":" + body
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    headers = {"X-Slack-Request-Timestamp": when, "X-Slack-Signature": signature}
    if retry is not None:
        headers["X-Slack-Retry-Num"] = str(retry)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    return headers


_event_ids = itertools.count(1)
_message_ts = itertools.count(1)


def next_ts() -> str:
    return f"{1_700_000_000 + next(_message_ts)}.000200"


def event(inner: dict[str, Any], *, event_id: str | None = None) -> bytes:
    """An `event_callback` body around one event, as Slack POSTs it (JSON)."""
    body = {
        "token": "deprecated-verification-token",
        "team_id": TEAM,
        "api_app_id": "A0001",
        "event": inner,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_event_ids):08d}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
    }
    return json.dumps(body).encode()


def message_event(
    channel: str,
    user: str,
    text: str,
    *,
    channel_type: str = "im",
    thread_ts: str | None = None,
    ts: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    inner: dict[str, Any] = {
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts or next_ts(),
        "channel_type": channel_type,
        **extra,
    }
    if thread_ts:
        inner["thread_ts"] = thread_ts
    return inner


def mention_event(
    channel: str, user: str, text: str, *, thread_ts: str | None = None, ts: str | None = None
) -> dict[str, Any]:
    inner: dict[str, Any] = {
        "type": "app_mention",
        "channel": channel,
        "user": user,
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts or next_ts(),
    }
    if thread_ts:
        inner["thread_ts"] = thread_ts
    return inner


def url_verification(challenge: str) -> bytes:
    return json.dumps(
        {"token": "deprecated", "challenge": challenge, "type": "url_verification"}
    ).encode()


def block_actions(
    *,
    user: str,
    channel: str,
    message_ts: str,
    thread_ts: str | None,
    action_id: str,
    value: str,
    blocks: list[dict[str, Any]] | None = None,
) -> bytes:
    """A button press as Slack POSTs it: form-encoded, the JSON in `payload=`; `blocks` are
    the pressed message's (Slack sends them along)."""
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM, "domain": "example"},
        "user": {"id": user, "username": f"user-{user.lower()}", "team_id": TEAM},
        "api_app_id": "A0001",
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
            "thread_ts": thread_ts,
        },
        "trigger_id": f"trigger-{time.time_ns()}",
        "channel": {"id": channel, "name": "general"},
        "message": {
            "type": "message",
            "ts": message_ts,
            "thread_ts": thread_ts,
            "user": BOT_USER,
            "blocks": blocks or [],
        },
        "response_url": "http://127.0.0.1:9/actions/response",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "think_approval",
                "value": value,
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()
