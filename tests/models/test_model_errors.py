"""A model that cannot be reached or refuses the request says which problem it is: a refused
connection, a failed DNS lookup or TLS handshake and a timeout are told apart (the HTTP
transport reports the first three as a connect timeout), a refused key names the endpoint and
the variable the key is read from (never the key), an unknown model the server, a rate limit
its retry hint. Each through the real SDK against a server on 127.0.0.1, except the DNS
failure, which no test may cause (the lookup would leave the machine): its cause is built."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests._stack import Stack
from think.exceptions import ModelError
from think.models import ModelRequest, OpenAIModel
from think.models._openai import connection_failure
from think.testing import FakeOpenAIServer, error, text

_ids = iter(range(1_000_000))


def request() -> ModelRequest:
    return ModelRequest.model_validate(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "metadata": {"conversation-id": f"err-{next(_ids)}", "turn-id": "t"},
        }
    )


async def failure(model: OpenAIModel, req: ModelRequest | None = None) -> ModelError:
    with pytest.raises(ModelError) as caught:
        async for _ in model.stream(req or request()):
            pass
    return caught.value


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture(scope="module")
def plain_http() -> Iterator[int]:
    """A server that speaks plain HTTP, for a client that expects TLS."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_port
    server.shutdown()


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


async def test_a_refused_connection_is_not_called_a_timeout(pooled_clients: None) -> None:
    exc = await failure(OpenAIModel("m", base_url=f"http://127.0.0.1:{closed_port()}/v1"))
    assert "connection refused" in str(exc) and "timed out" not in str(exc)
    assert exc.retryable  # a server that is starting will answer soon
    assert exc.kind == "connection"


async def test_a_tls_handshake_with_a_plain_server_says_so(
    plain_http: int, pooled_clients: None
) -> None:
    exc = await failure(OpenAIModel("m", base_url=f"https://127.0.0.1:{plain_http}/v1"))
    assert "TLS handshake failed" in str(exc) and "http:// server behind an https://" in str(exc)
    assert exc.kind == "tls"


def test_a_failed_dns_lookup_is_named() -> None:
    exc = openai.APIConnectionError(request=httpx.Request("POST", "https://llm.invalid/v1"))
    try:
        try:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        except socket.gaierror as lookup:
            raise exc from lookup
    except openai.APIConnectionError as caught:
        assert connection_failure(caught) == (
            "dns",
            "DNS lookup failed (Name or service not known): is the host name right?",
        )


async def test_a_stalled_server_is_a_timeout(
    server: FakeOpenAIServer, pooled_clients: None
) -> None:
    from think.testing import stall

    req = request()
    server.script(req.metadata["conversation-id"], stall(5) + text("late"))
    model = OpenAIModel("m", base_url=server.base_url, timeout=0.2)
    timed_out = await failure(model, req)
    assert str(timed_out).endswith("unreachable: timed out") and timed_out.kind == "timeout"


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_names_the_endpoint_and_the_variable_never_the_key(
    server: FakeOpenAIServer, pooled_clients: None, status: int
) -> None:
    req = request()
    server.script(req.metadata["conversation-id"], error(status, "Incorrect API key provided"))
    model = OpenAIModel(
        "m",
        base_url=server.base_url,
        api_key="sk-very-secret",
        api_key_env="CHEAP_KEY",
        endpoint="cheap",
    )
    exc = await failure(model, req)
    said = str(exc)
    assert f"endpoint 'cheap' ({server.base_url}) refused the API key for model m" in said
    assert "the key is read from CHEAP_KEY" in said and "Incorrect API key provided" in said
    assert "sk-very-secret" not in said and f"HTTP {status}" in said
    assert exc.status == status and not exc.retryable and exc.kind == "auth"


async def test_no_key_at_all_is_said(server: FakeOpenAIServer, pooled_clients: None) -> None:
    req = request()
    server.script(req.metadata["conversation-id"], error(401))
    model = OpenAIModel("m", base_url=server.base_url, api_key_env="OPENAI_API_KEY")
    assert "no API key is set (OPENAI_API_KEY)" in str(await failure(model, req))


async def test_an_unknown_model_names_the_server(
    server: FakeOpenAIServer, pooled_clients: None
) -> None:
    req = request()
    server.script(req.metadata["conversation-id"], error(404, "The model `m` does not exist"))
    exc = await failure(OpenAIModel("m", base_url=server.base_url, api_key="k"), req)
    assert f"{server.base_url} does not know model m" in str(exc) and not exc.retryable
    assert exc.kind == "not_found"


async def test_a_rate_limit_carries_its_retry_hint(
    server: FakeOpenAIServer, pooled_clients: None
) -> None:
    req = request()
    server.script(req.metadata["conversation-id"], error(429, "Slow down", retry_after="7"))
    exc = await failure(OpenAIModel("m", base_url=server.base_url, api_key="k"), req)
    assert "is rate limited: Slow down (requests); retry after 7 s (HTTP 429)" in str(exc)
    assert exc.retryable and exc.status == 429 and exc.kind == "rate_limit"


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (500, "server"),
        (529, "server"),
        (400, "bad_request"),
        (422, "bad_request"),
        (408, "timeout"),
    ],
)
def test_a_status_tells_the_kind_of_failure(status: int, kind: str) -> None:
    assert ModelError("x", retryable=False, status=status).kind == kind
    assert ModelError("x", retryable=True).kind == "other"
    assert ModelError("x", retryable=True, status=500, kind="stream").kind == "stream"


# -- through a turn ------------------------------------------------------------------------------


async def test_a_turn_refused_its_key_ends_saying_where_to_look(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    fake_model.script(cid, error(401, "Incorrect API key provided: sk-…abcd"))
    body = {"input": "hi", "mode": "wait", "wait_timeout": 15}
    turn = (await api.post(f"/v1/agents/helper/conversations/{cid}/turns", json=body)).json()
    assert turn["status"] == "error", turn
    assert "refused the API key for model scripted-model" in turn["error"]
    assert "(the key is read from OPENAI_API_KEY)" in turn["error"]
    line = await logged(stack, turn["turn_id"], "the model failed, the turn ends")
    assert "refused the API key" in line


async def test_retried_model_failures_log_a_line_each_and_no_traceback(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, stack: Stack, cid: str
) -> None:
    # The staller's recovery budget is two attempts: two failures, then `interrupted`.
    fake_model.script(cid, error(503, "Overloaded"), error(503, "Overloaded"), error(503))
    body = {"input": "hi", "mode": "wait", "wait_timeout": 30}
    turn = (await api.post(f"/v1/agents/staller/conversations/{cid}/turns", json=body)).json()
    assert turn["status"] == "interrupted", turn
    await logged(stack, turn["turn_id"], "interrupted after")
    worker = "\n".join(log.read_text(errors="replace") for log in stack.logs.glob("worker-*.log"))
    mine = [line for line in worker.splitlines() if turn["turn_id"] in line]
    assert sum("model failure" in line for line in mine) >= 1, mine
    assert "Overloaded" in "\n".join(mine)
    # A traceback would follow Temporal's "Completing activity as failed" for each retry.
    assert "Traceback" not in _around(worker, turn["turn_id"])


def _around(log: str, turn_id: str) -> str:
    """The log from the turn's first line to its last, where a retry's traceback would be."""
    lines = log.splitlines()
    at = [i for i, line in enumerate(lines) if turn_id in line]
    return "\n".join(lines[at[0] : at[-1] + 1]) if at else ""


async def logged(stack: Stack, turn_id: str, words: str, within: float = 10) -> str:
    """The worker's log line about this turn that holds `words`, once it is written."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        for log in stack.logs.glob("worker-*.log"):
            for line in log.read_text(errors="replace").splitlines():
                if turn_id in line and words in line:
                    return line
        assert asyncio.get_running_loop().time() < deadline, f"no {words!r} line for {turn_id}"
        await asyncio.sleep(0.1)
