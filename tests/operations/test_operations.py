"""Operating through Temporal and the health endpoints."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
from temporalio.client import Client

from tests._stack import Stack
from tests._turn_helpers import helper_path
from think.dev import Services
from think.workflows.names import turn_workflow_id


async def test_operator_finds_turns_by_conversation(
    api: httpx.AsyncClient, services: Services, temporal: Client, cid: str
) -> None:
    for word in ("one", "two"):
        turn = (
            await api.post(f"{helper_path(cid)}/turns", json={"input": word, "mode": "wait"})
        ).json()
        assert turn["status"] == "completed"
    query = f"ThinkConversationId='{cid}' AND ThinkTurnStatus='completed'"
    cli = Path(sys.executable).parent / "temporal"
    found: list[dict[str, object]] = []
    for _ in range(50):  # the visibility store is eventually consistent
        out = subprocess.run(  # noqa: ASYNC221 - a short CLI call, as an operator would
            [
                str(cli),
                "workflow",
                "list",
                "--address",
                services.temporal_address,
                "--query",
                query,
                "--output",
                "json",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        found = json.loads(out) if out.strip() else []
        if len(found) == 2:
            break
        await asyncio.sleep(0.2)
    assert len(found) == 2
    ids = {w["execution"]["workflowId"] for w in found}  # type: ignore[index]
    assert all(i.startswith(f"turn:default:helper:{cid}:turn_") for i in ids)

    turn_id = turn["turn_id"]
    described = await temporal.get_workflow_handle(
        turn_workflow_id("helper", cid, turn_id)
    ).describe()
    attrs = {p.key.name: p.value for p in described.typed_search_attributes}
    attrs.pop("BuildIds", None)  # set by the server
    assert attrs == {
        "ThinkTenant": "default",
        "ThinkAgent": "helper",
        "ThinkConversationId": cid,
        "ThinkTurnStatus": "completed",
    }
    assert await described.static_summary() == f"helper turn in conversation {cid}"
    assert described.workflow_type == "think.ChatTurn"
    # One workflow per turn and nothing else: the conversation's order lives in Postgres.
    listed = {w.id async for w in temporal.list_workflows(f"ThinkConversationId='{cid}'")}
    assert turn_workflow_id("helper", cid, turn_id) in listed
    assert all(w.startswith(f"turn:default:helper:{cid}:turn_") for w in listed), listed


async def test_health_and_agents(api: httpx.AsyncClient, stack: Stack) -> None:
    assert (await api.get("/healthz")).json() == {"status": "ok"}
    ready = (await api.get("/readyz")).json()
    assert ready["status"] == "ok"
    assert ready["checks"] == {"postgres": "ok", "temporal": "ok", "listener": "ok"}
    agents = {a["name"]: a for a in (await api.get("/v1/agents")).json()["agents"]}
    # One entry per hosted class, by the names their URLs use: those listed, and the
    # sub-agents hosted with their parents (`lead` delegates to `researcher`, `dispatcher` to
    # `analyst` too).
    assert len(agents) == len(stack.env["THINK_AGENTS"].split(",")) + 2
    for hosted in ("researcher", "analyst"):
        assert hosted in agents and hosted not in stack.env["THINK_AGENTS"]
    assert {"helper", "staller", "give_up", "gatekeeper", "hooks", "assistant"} <= set(agents)
    assistant = agents["assistant"]
    assert assistant["model"] == "gpt-4o-mini"
    assert assistant["served_by"] == "openai:gpt-4o-mini"  # the stack's OPENAI_BASE_URL
    assert {t["name"]: t["needs_approval"] for t in assistant["tools"]} == {
        "get_weather": False,
        "delete_file": True,
    }
    assert assistant["tools"][0]["description"] == "Current weather for a city."
    docs = await api.get("/docs")
    assert docs.status_code == 200
    schema = (await api.get("/openapi.json")).json()
    assert "/v1/agents/{agent}/conversations/{cid}/turns" in schema["paths"]


async def test_conversation_create_and_get(api: httpx.AsyncClient, cid: str) -> None:
    created = await api.post(
        "/v1/agents/helper/conversations", json={"id": cid, "metadata": {"a": 1}}
    )
    assert created.status_code == 201
    again = await api.post("/v1/agents/helper/conversations", json={"id": cid})
    assert again.status_code == 200
    assert again.json() == created.json()
    got = (await api.get(helper_path(cid))).json()
    assert got == {**created.json(), "active_leaf_id": None}
    assert got["metadata"] == {"a": 1}
    generated = await api.post("/v1/agents/helper/conversations")
    assert generated.status_code == 201 and generated.json()["id"].startswith("conv_")
    # The same id under another agent is another conversation.
    other = await api.post("/v1/agents/assistant/conversations", json={"id": cid})
    assert other.status_code == 201


async def test_docs_pages_need_no_internet(api: httpx.AsyncClient) -> None:
    """Issue 19: /docs was a blank page offline, its Swagger UI coming from a CDN. Every
    script, style and icon of /docs and /redoc is served by the gateway itself."""
    for page in ("/docs", "/redoc"):
        html = (await api.get(page)).text
        assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
        assert assets, html
        assert [a for a in assets if "://" in a] == [], html
        for asset in assets:
            response = await api.get(asset)
            assert response.status_code == 200, asset
            assert len(response.content) > 1000, asset
    assert "SwaggerUIBundle" in (await api.get("/docs-assets/swagger-ui-bundle.js")).text


async def test_the_root_points_at_the_chat_page(api: httpx.AsyncClient) -> None:
    root = await api.get("/", follow_redirects=False)
    assert root.status_code in (302, 307), root.text
    assert root.headers["location"] == "/ui"
    unknown = await api.get("/nowhere")
    assert unknown.status_code == 404
    assert unknown.headers["content-type"] == "application/problem+json"


async def test_an_unknown_agent_names_the_hosted_ones(api: httpx.AsyncClient) -> None:
    response = await api.get("/v1/agents/asistant/conversations/c1")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert "no agent named 'asistant'" in problem["detail"]
    assert "'assistant'" in problem["detail"] and "'helper'" in problem["detail"]
    assert {"assistant", "helper", "gatekeeper"} <= set(problem["agents"])


async def test_the_operator_views_queries_run(temporal: Client) -> None:
    """Every query of docs/operators.md's saved views is one Temporal accepts."""
    doc = (Path(__file__).parents[2] / "docs" / "operators.md").read_text()
    queries = re.findall(r"^\| [A-Z][^|]+\| `([^`]+)` \|$", doc, re.M)
    assert len(queries) == 4, queries
    assert "ThinkTurnStatus = 'awaiting_approval'" in queries
    for query in queries:
        [_ async for _ in temporal.list_workflows(query, limit=1)]
