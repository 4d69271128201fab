"""`Think.get_gateway`: asked on every model resolution with the turn at hand, it picks the
endpoint and adds headers, metadata and a timeout; a pick of an unknown endpoint, or a hook
that raises, ends the turn cleanly."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests._stack import Stack
from tests._turn_helpers import wait_turn
from think import Gateway
from think._settings import Settings
from think.exceptions import ConfigurationError
from think.models import OpenAIModel, resolve_model
from think.testing import FakeOpenAIServer, text, tool_call


def test_a_gateway_moves_a_model_to_its_endpoint_with_headers_and_a_timeout() -> None:
    settings = Settings.model_validate(
        {
            "THINK_MODEL_ENDPOINTS": {
                "eu": {"base_url": "http://127.0.0.1:9/v1", "api_key": "k"},
                "us": {"base_url": "http://127.0.0.1:8/v1", "api_key": "k"},
            }
        }
    )
    route = Gateway(endpoint="eu", headers={"x-a": "1"}, metadata={"tier": "gold"}, timeout=7)
    for spec in ("gpt-x", "us/gpt-x"):  # an endpoint prefix is replaced
        model = resolve_model(spec, settings, gateway=lambda _: route)
        assert isinstance(model, OpenAIModel)
        assert model.name == "eu/gpt-x" and model.base_url == "http://127.0.0.1:9/v1"
        assert model._extra_headers == {"x-a": "1", "x-think-tier": "gold"}
        assert model._timeout == 7
    with pytest.raises(ConfigurationError, match=r"endpoint 'mars'.*it has: eu, us"):
        resolve_model("gpt-x", settings, gateway=lambda _: Gateway(endpoint="mars"))
    # Each model of a chain is asked about.
    asked: list[str] = []
    resolve_model(["a", "b"], settings, gateway=lambda m: asked.append(m) or None)
    assert asked == ["a", "b"]


async def routed_turn(api: httpx.AsyncClient, cid: str, model: str) -> dict[str, Any]:
    settings = {"model": model}
    return await wait_turn(api, "routed", cid, "go", body={"settings": settings}, wait_timeout=30)


async def test_every_step_is_routed_as_the_hook_says(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("add", {"a": 1, "b": 2}), text("3"))
    done = await routed_turn(api, cid, "scripted-model")
    assert done["status"] == "completed", done
    assert done["usage"]["models"] == ["plain/scripted-model"]  # the endpoint it picked
    sent = [r["headers"] for r in fake_model.requests(cid)]
    assert [h["x-think-step"] for h in sent] == ["0", "1"]  # asked at each step
    for headers in sent:
        assert headers["x-route-tenant"] == "default"
        assert headers["x-think-trigger"] == "submission"
        assert headers["x-think-asked-for"] == "scripted-model"
        assert headers["x-think-conversation-id"] == cid  # the turn's own ids still travel


async def test_a_gateway_that_keeps_the_model_as_named_changes_nothing(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("direct"))
    done = await routed_turn(api, cid, "direct-model")
    assert done["status"] == "completed", done
    assert done["usage"]["models"] == ["openai:direct-model"]
    assert "x-route-tenant" not in fake_model.requests(cid)[0]["headers"]


@pytest.mark.parametrize(
    ("model", "logged"),
    [
        ("nowhere-model", "THINK_MODEL_ENDPOINTS has no endpoint of that name"),
        ("broken-model", "the routing table is down"),
    ],
)
async def test_a_gateway_that_fails_ends_the_turn_before_any_request(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    stack: Stack,
    cid: str,
    model: str,
    logged: str,
) -> None:
    fake_model.script(cid, text("never"))
    done = await routed_turn(api, cid, model)
    assert done["status"] == "error", done
    # As any override's failure: internal to clients, told in the worker's log.
    assert "internal error" in done["error"] and logged not in done["error"]
    assert fake_model.calls(cid) == 0
    assert logged in "\n".join(
        p.read_text(errors="replace") for p in stack.logs.glob("worker-*.log")
    )
