"""What a model adapter adds to a step over calling its SDK directly (issue 33's target: at most
2 ms p50 per step).

For each adapter (Chat Completions against `think.testing.FakeOpenAIServer`, the Responses
API against `FakeResponsesServer`, Anthropic's Messages API against `FakeAnthropicServer`: real
HTTP servers on 127.0.0.1, scripted instant models), each side asks the same request and reads
its whole stream, on the adapter's transport:

- `typed`: the official SDK as its users call it (`chat.completions.create(stream=True)`,
  `messages.create(stream=True)`: typed parameters, a pydantic model for every chunk);
- `lean`: the least the SDK can do, the request posted as JSON and the chunks read as plain
  objects (what the adapter does underneath);
- `adapter`: `OpenAIModel.stream`, events out, settings mapped, usage parsed, errors classified.

The target holds `adapter - lean`, the adapter's own work per step; `adapter - typed` is what
a team saves over calling the SDK themselves (negative: faster). Rounds alternate, so the
machine's noise falls on all three; the garbage is collected before each timed call, so that
no side pays for another's.

    python -m bench.adapter_overhead [--steps 300] [--history 40] [--words 200]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import statistics
import time
from collections.abc import Awaitable, Callable
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from typing import Any

import anthropic
import openai
from anthropic.types import Message
from openai.types.chat import ChatCompletion
from openai.types.responses import Response as OpenAIResponse

from think.models import (
    AnthropicModel,
    ModelClient,
    ModelRequest,
    ModelSettings,
    OpenAIModel,
    ResponsesModel,
    ToolSpec,
    close_openai_clients,
)
from think.models._anthropic import to_anthropic_messages
from think.testing import FakeAnthropicServer, FakeOpenAIServer, FakeResponsesServer, reply, text


def _history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a test agent."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"question {i}: " + "words " * 30})
        messages.append({"role": "assistant", "content": f"answer {i}: " + "words " * 60})
    messages.append({"role": "user", "content": "and now?"})
    return messages


_TOOLS = [
    ToolSpec(
        name="add",
        description="Add two numbers.",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    )
]


def _tool_params(request: ModelRequest) -> list[Any]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in request.tools
    ]


async def _lean(client: openai.AsyncOpenAI, request: ModelRequest, cid: str) -> float:
    started = time.perf_counter()
    body = {
        "model": request.model,
        "messages": request.messages,
        "tools": _tool_params(request),
        "temperature": 0.2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    stream = await client.post(
        "/chat/completions",
        body=body,
        cast_to=ChatCompletion,
        stream=True,
        stream_cls=openai.AsyncStream[object],
        options={"headers": {"x-think-conversation-id": cid}},
    )
    async for _ in stream:
        pass
    return time.perf_counter() - started


async def _typed(client: openai.AsyncOpenAI, request: ModelRequest, cid: str) -> float:
    started = time.perf_counter()
    stream = await client.chat.completions.create(
        model=request.model,
        messages=request.messages,  # type: ignore[arg-type]
        tools=[
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ],
        temperature=0.2,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"x-think-conversation-id": cid},
    )
    async for _ in stream:
        pass
    return time.perf_counter() - started


def _serve(kind: type[FakeOpenAIServer], answer: str, url: Queue[str], done: Event) -> None:
    with kind() as server:
        server.script_default(reply(text(answer)), repeat=True)
        url.put(server.base_url)
        done.wait()


class _Served:
    """A fake model server in a process of its own, answering every call with `answer`: in a
    thread of the measuring process it competed for the GIL with the side being measured, so
    each microsecond a side spent per chunk delayed the server's next chunk too, and the
    adapters' per-chunk work counted several times over."""

    def __init__(self, kind: type[FakeOpenAIServer], answer: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._url: Queue[str] = context.Queue()
        self._done = context.Event()
        self._process = context.Process(
            target=_serve, args=(kind, answer, self._url, self._done), daemon=True
        )
        self.base_url = ""

    def __enter__(self) -> _Served:
        self._process.start()
        self.base_url = self._url.get(timeout=60)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._process.join(timeout=10)


async def _collected(call: Awaitable[float]) -> float:
    """`call`'s time, with the garbage of the calls before it collected first: the typed
    SDK's thousands of pydantic objects per answer were otherwise collected during whichever
    call came next (the adapter's, in the order of a round), and counted against it."""
    gc.collect()
    return await call


async def _adapter(model: ModelClient, request: ModelRequest) -> float:
    started = time.perf_counter()
    async for _ in model.stream(request):
        pass
    return time.perf_counter() - started


Timed = Callable[[], Awaitable[float]]
"""One call of one side, timed: `typed`, `lean` or `adapter`."""


async def _compare(label: str, sides: tuple[Timed, Timed, Timed], steps: int, shape: str) -> None:
    """Time the three sides (typed SDK, lean SDK, adapter) in alternating rounds after ten
    rounds of warming (connections, imports, the server's first answers), and print their
    p50s and what the adapter adds."""
    times: tuple[list[float], ...] = ([], [], [])
    for _ in range(10):
        for side in sides:
            await side()
    for _ in range(steps):
        for side, spent in zip(sides, times, strict=True):
            spent.append(await _collected(side()))
    t, n, a = (statistics.median(x) * 1e3 for x in times)
    print(
        f"{label} adapter, {shape}, {steps} steps, p50: typed SDK {t:.2f} ms, lean SDK "
        f"{n:.2f} ms, adapter {a:.2f} ms; the adapter adds {a - n:+.2f} ms over the lean call "
        f"(target: at most +2 ms), {a - t:+.2f} ms over the typed one"
    )


def _shape(history: int, words: int) -> str:
    return f"{history * 2 + 2} messages, {words}-word answer"


async def main(steps: int, history: int, words: int) -> None:
    answer = " ".join(["word"] * words)
    with _Served(FakeOpenAIServer, answer) as server:
        request = ModelRequest(
            model="scripted-model",
            messages=_history(history),
            tools=_TOOLS,
            settings=ModelSettings(temperature=0.2),
            metadata={"conversation-id": "bench"},
        )
        client = openai.AsyncOpenAI(
            base_url=server.base_url,
            api_key="k",
            max_retries=0,
            http_client=openai.DefaultAioHttpClient(),
        )
        model = OpenAIModel("scripted-model", base_url=server.base_url, api_key="k")
        await _compare(
            "chat",
            (
                lambda: _typed(client, request, "bench"),
                lambda: _lean(client, request, "bench"),
                lambda: _adapter(model, request),
            ),
            steps,
            _shape(history, words),
        )
        await client.close()
        await close_openai_clients()


async def _anthropic_typed(
    client: anthropic.AsyncAnthropic, body: dict[str, Any], cid: str
) -> float:
    started = time.perf_counter()
    stream = await client.messages.create(**body, extra_headers={"x-think-conversation-id": cid})
    async for _ in stream:
        pass
    return time.perf_counter() - started


async def _anthropic_lean(
    client: anthropic.AsyncAnthropic, body: dict[str, Any], cid: str
) -> float:
    started = time.perf_counter()
    stream = await client.post(
        "/v1/messages",
        body=body,
        cast_to=Message,
        stream=True,
        stream_cls=anthropic.AsyncStream[object],
        options={"headers": {"x-think-conversation-id": cid}},
    )
    async for _ in stream:
        pass
    return time.perf_counter() - started


async def anthropic_main(steps: int, history: int, words: int) -> None:
    """The same for the Anthropic adapter; its own work includes rebuilding the transcript in
    the Messages API's shape, which the direct calls are handed ready."""
    answer = " ".join(["word"] * words)
    with _Served(FakeAnthropicServer, answer) as server:
        request = ModelRequest(
            model="claude-fake",
            messages=_history(history),
            tools=_TOOLS,
            settings=ModelSettings(max_output_tokens=1024),
            metadata={"conversation-id": "bench"},
        )
        system, messages = to_anthropic_messages(request.messages)
        body: dict[str, Any] = {
            "model": "claude-fake",
            "max_tokens": 1024,
            "system": system,
            "messages": messages,
            "tools": [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ],
            "stream": True,
        }
        client = anthropic.AsyncAnthropic(base_url=server.base_url, api_key="k", max_retries=0)
        model = AnthropicModel("claude-fake", base_url=server.base_url, api_key="k")
        await _compare(
            "anthropic",
            (
                lambda: _anthropic_typed(client, body, "bench"),
                lambda: _anthropic_lean(client, body, "bench"),
                lambda: _adapter(model, request),
            ),
            steps,
            _shape(history, words),
        )
        await client.close()


async def _responses_typed(client: openai.AsyncOpenAI, body: dict[str, Any], cid: str) -> float:
    started = time.perf_counter()
    stream = await client.responses.create(**body, extra_headers={"x-think-conversation-id": cid})
    async for _ in stream:
        pass
    return time.perf_counter() - started


async def _responses_lean(client: openai.AsyncOpenAI, body: dict[str, Any], cid: str) -> float:
    started = time.perf_counter()
    stream = await client.post(
        "/responses",
        body=body,
        cast_to=OpenAIResponse,
        stream=True,
        stream_cls=openai.AsyncStream[object],
        options={"headers": {"x-think-conversation-id": cid}},
    )
    async for _ in stream:
        pass
    return time.perf_counter() - started


async def responses_main(steps: int, history: int, words: int) -> None:
    """The same for the Responses adapter: the direct calls send the body the adapter builds
    (its input items), handed ready; the adapter builds it every step."""
    answer = " ".join(["word"] * words)
    with _Served(FakeResponsesServer, answer) as server:
        request = ModelRequest(
            model="gpt-fake",
            messages=_history(history),
            tools=_TOOLS,
            settings=ModelSettings(max_output_tokens=1024),
            metadata={"conversation-id": "bench"},
        )
        model = ResponsesModel("gpt-4.1", base_url=server.base_url, api_key="k")
        body = model.body(request)
        client = openai.AsyncOpenAI(
            base_url=server.base_url,
            api_key="k",
            max_retries=0,
            http_client=openai.DefaultAioHttpClient(),
        )
        await _compare(
            "responses",
            (
                lambda: _responses_typed(client, body, "bench"),
                lambda: _responses_lean(client, body, "bench"),
                lambda: _adapter(model, request),
            ),
            steps,
            _shape(history, words),
        )
        await client.close()
        await close_openai_clients()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--history", type=int, default=40)
    parser.add_argument("--words", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.steps, args.history, args.words))
    asyncio.run(responses_main(args.steps, args.history, args.words))
    asyncio.run(anthropic_main(args.steps, args.history, args.words))
