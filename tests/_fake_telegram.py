"""A fake Telegram Bot API server: real HTTP on 127.0.0.1, driven by python-telegram-bot.

It answers as the Bot API does (`{"ok": true, "result": ...}`, or `{"ok": false,
"error_code", "description"}`), for the methods a bot that answers chats uses: `getMe`,
`sendMessage`, `editMessageText`, `answerCallbackQuery`, `getFile`, and file downloads at
`/file/bot<token>/<path>`. It checks what Telegram checks: the token, MarkdownV2's escaping
(an unescaped reserved character or an unclosed entity is "can't parse entities"), the
4,096-character limit, an edit that changes nothing ("message is not modified"), and edits of
one chat faster than `min_edit_interval` (429 with `retry_after`). Every call is recorded.

Helpers build the updates Telegram would post to a webhook (`private_message`,
`group_message`, `button_press`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

RESERVED = set("_*[]()~`>#+-=|{}.!\\")
BOT_ID = 7000001
BOT_USERNAME = "think_test_bot"


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float


@dataclass
class FakeTelegram:
    token: str = "123456:TEST-TOKEN"
    min_edit_interval: float = 0.8
    host: str = "127.0.0.1"
    calls: list[Call] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    messages: dict[tuple[str, int], str] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    _last_edit: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _port: int | None = None
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    # --- what tests read ---

    @property
    def api_url(self) -> str:
        return f"http://{self.host}:{self._port}"

    def of(self, method: str, chat: str | None = None) -> list[Call]:
        with self._lock:
            found = [c for c in self.calls if c.method == method]
        if chat is not None:
            found = [c for c in found if str(c.params.get("chat_id")) == chat]
        return found

    def texts(self, chat: str) -> list[str]:
        """The chat's messages as they stand now (after edits), in the order sent."""
        with self._lock:
            return [
                t
                for (c, _), t in sorted(self.messages.items(), key=lambda kv: kv[0][1])
                if c == chat
            ]

    def add_file(self, file_id: str, data: bytes) -> None:
        self.files[file_id] = data

    # --- the Bot API ---

    async def _method(self, request: Request) -> Response:
        token, method = request.path_params["token"], request.path_params["method"]
        raw = await request.body()
        if request.headers.get("content-type", "").startswith("application/json"):
            params = json.loads(raw or b"{}")
        else:
            params = {}
            for k, v in parse_qsl(raw.decode()):
                try:
                    params[k] = json.loads(v)
                except ValueError:
                    params[k] = v
        with self._lock:
            self.calls.append(Call(method, params, time.monotonic()))
        if token != self.token:
            return _error(401, "Unauthorized")
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        result: Response = handler(params)
        return result

    def _m_getMe(self, params: dict[str, Any]) -> Response:
        return _ok(
            {
                "id": BOT_ID,
                "is_bot": True,
                "first_name": "Think",
                "username": BOT_USERNAME,
                "can_join_groups": True,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
            }
        )

    def _m_sendMessage(self, params: dict[str, Any]) -> Response:
        chat = str(params.get("chat_id", ""))
        text = str(params.get("text", ""))
        problem = _check_text(text, params.get("parse_mode"))
        if problem:
            return _error(400, problem)
        message_id = next(self._ids)
        with self._lock:
            self.messages[(chat, message_id)] = text
        return _ok(_message(chat, message_id, text, params.get("message_thread_id")))

    def _m_editMessageText(self, params: dict[str, Any]) -> Response:
        chat = str(params.get("chat_id", ""))
        message_id = int(params.get("message_id", 0))
        text = str(params.get("text", ""))
        problem = _check_text(text, params.get("parse_mode"))
        if problem:
            return _error(400, problem)
        now = time.monotonic()
        with self._lock:
            if (chat, message_id) not in self.messages:
                return _error(400, "Bad Request: message to edit not found")
            if self.messages[(chat, message_id)] == text:
                return _error(
                    400,
                    "Bad Request: message is not modified: specified new message content and "
                    "reply markup are exactly the same as a current content and reply markup "
                    "of the message",
                )
            last = self._last_edit.get(chat)
            if last is not None and now - last < self.min_edit_interval:
                retry = 1
                return JSONResponse(
                    {
                        "ok": False,
                        "error_code": 429,
                        "description": f"Too Many Requests: retry after {retry}",
                        "parameters": {"retry_after": retry},
                    },
                    status_code=429,
                )
            self._last_edit[chat] = now
            self.messages[(chat, message_id)] = text
        return _ok(_message(chat, message_id, text, None))

    def _m_answerCallbackQuery(self, params: dict[str, Any]) -> Response:
        return _ok(True)

    def _m_getFile(self, params: dict[str, Any]) -> Response:
        file_id = str(params.get("file_id", ""))
        data = self.files.get(file_id)
        if data is None:
            return _error(400, "Bad Request: invalid file_id")
        return _ok(
            {
                "file_id": file_id,
                "file_unique_id": f"u-{file_id}",
                "file_size": len(data),
                "file_path": f"documents/{file_id}.bin",
            }
        )

    async def _file(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return Response(status_code=401)
        name = request.path_params["path"].rsplit("/", 1)[-1].removesuffix(".bin")
        data = self.files.get(name)
        with self._lock:
            self.calls.append(Call("download", {"file_id": name}, time.monotonic()))
        if data is None:
            return Response(status_code=404)
        return Response(data, media_type="application/octet-stream")

    # --- lifecycle ---

    def __enter__(self) -> FakeTelegram:
        app = Starlette(
            routes=[
                Route("/bot{token}/{method}", self._method, methods=["POST", "GET"]),
                Route("/file/bot{token}/{path:path}", self._file, methods=["GET"]),
            ]
        )
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_config=None, lifespan="off", ws="none")
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])),
            name="FakeTelegram",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake Telegram server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)


def _ok(result: Any) -> Response:
    return JSONResponse({"ok": True, "result": result})


def _error(code: int, description: str) -> Response:
    return JSONResponse({"ok": False, "error_code": code, "description": description}, code)


def _message(chat: str, message_id: int, text: str, thread: Any) -> dict[str, Any]:
    kind = "private" if not chat.startswith("-") else "supergroup"
    message: dict[str, Any] = {
        "message_id": message_id,
        "date": int(time.time()),
        "chat": {"id": int(chat), "type": kind},
        "from": {"id": BOT_ID, "is_bot": True, "first_name": "Think", "username": BOT_USERNAME},
        "text": text,
    }
    if thread:
        message["message_thread_id"] = int(thread)
    return message


def _check_text(text: str, parse_mode: Any) -> str | None:
    if not text.strip():
        return "Bad Request: message text is empty"
    if len(text) > 4096:
        return "Bad Request: message is too long"
    if parse_mode == "MarkdownV2":
        return markdown_v2_problem(text)
    return None


def markdown_v2_problem(text: str) -> str | None:
    """Telegram's complaint about `text` as MarkdownV2, or None when it parses."""
    open_marks: list[str] = []
    i = 0
    n = len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 >= n:
                return "Bad Request: can't parse entities: a trailing backslash"
            i += 2
            at_line_start = False
            continue
        if text.startswith("```", i):
            end = _code_end(text, i + 3, "```")
            if end < 0:
                return f"Bad Request: can't parse entities: unclosed pre at {i}"
            i = end + 3
            continue
        if c == "`":
            end = _code_end(text, i + 1, "`")
            if end < 0:
                return f"Bad Request: can't parse entities: unclosed code at {i}"
            i = end + 1
            continue
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if c == ">" and at_line_start:
            i += 1
            at_line_start = False
            continue
        for mark in ("||", "__", "*", "_", "~"):
            if text.startswith(mark, i):
                if open_marks and open_marks[-1] == mark:
                    open_marks.pop()
                else:
                    open_marks.append(mark)
                i += len(mark)
                break
        else:
            if c == "[":
                open_marks.append("[")
                i += 1
            elif c == "]" and open_marks and open_marks[-1] == "[":
                open_marks.pop()
                if not text.startswith("](", i):
                    return f"Bad Request: can't parse entities: a link without its URL at {i}"
                close = i + 2
                while close < n and text[close] != ")":
                    close += 2 if text[close] == "\\" else 1
                if close >= n:
                    return "Bad Request: can't parse entities: an unclosed link URL"
                i = close + 1
            elif c in RESERVED:
                return (
                    f"Bad Request: can't parse entities: character '{c}' is reserved and must "
                    "be escaped with the preceding '\\'"
                )
            else:
                i += 1
        at_line_start = False
    if open_marks:
        return f"Bad Request: can't parse entities: can't find end of {open_marks[-1]} entity"
    return None


def _code_end(text: str, start: int, fence: str) -> int:
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(fence, i):
            return i
        i += 1
    return -1


# --- updates, as Telegram posts them ---

_update_ids = itertools.count(int(time.time()) % 1_000_000 * 1000)
_message_ids = itertools.count(1)


def next_update_id() -> int:
    return next(_update_ids)


def user(uid: int, first: str, last: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"id": uid, "is_bot": False, "first_name": first}
    if last:
        found["last_name"] = last
    return found


def private_message(
    chat: int,
    text: str,
    *,
    sender: dict[str, Any] | None = None,
    update_id: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    who = sender or user(chat, "Ada")
    message = {
        "message_id": next(_message_ids),
        "date": int(time.time()),
        "chat": {"id": chat, "type": "private", "first_name": who["first_name"]},
        "from": who,
        **({"text": text} if text else {}),
        **extra,
    }
    return {"update_id": update_id or next_update_id(), "message": message}


def group_message(
    chat: int, text: str, sender: dict[str, Any], *, mention: bool = False, topic: int | None = None
) -> dict[str, Any]:
    body = f"@{BOT_USERNAME} {text}" if mention else text
    message: dict[str, Any] = {
        "message_id": next(_message_ids),
        "date": int(time.time()),
        "chat": {"id": chat, "type": "supergroup", "title": "Team", "is_forum": topic is not None},
        "from": sender,
        "text": body,
    }
    if mention:
        message["entities"] = [{"type": "mention", "offset": 0, "length": len(BOT_USERNAME) + 1}]
    if topic is not None:
        message["message_thread_id"] = topic
        message["is_topic_message"] = True
    return {"update_id": next_update_id(), "message": message}


def button_press(chat: int, message_id: int, data: str, sender: dict[str, Any]) -> dict[str, Any]:
    return {
        "update_id": next_update_id(),
        "callback_query": {
            "id": f"cq-{next_update_id()}",
            "from": sender,
            "chat_instance": "ci-1",
            "data": data,
            "message": {
                "message_id": message_id,
                "date": int(time.time()),
                "chat": {"id": chat, "type": "private" if chat > 0 else "supergroup"},
                "from": {"id": BOT_ID, "is_bot": True, "first_name": "Think"},
                "text": "Approval needed",
            },
        },
    }
