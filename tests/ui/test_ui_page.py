"""What the gateway serves for the chat page, without a browser: the page at every /ui path,
its assets from the package, what it is told, and the conversation list it shows."""

from __future__ import annotations

import json
import re

import httpx

from tests._stack import Stack
from think.testing import FakeOpenAIServer


def _config(html: str) -> dict[str, object]:
    found = re.search(r'<script id="think-config" type="application/json">(.*?)</script>', html)
    assert found, html
    config: dict[str, object] = json.loads(found.group(1))
    return config


async def test_every_page_path_answers_the_page_with_its_config(
    api: httpx.AsyncClient, stack: Stack
) -> None:
    for path in ("/ui", "/ui/", "/ui/helper", "/ui/helper/c-1", "/ui/nobody/c-2"):
        page = await api.get(path)
        assert page.status_code == 200, path
        assert page.headers["content-type"].startswith("text/html")
        assert page.headers["cache-control"] == "no-cache"
        assert _config(page.text) == {
            "temporal_ui_url": stack.env["THINK_TEMPORAL_UI_URL"],
            "temporal_namespace": "default",
            "auth_required": False,
        }


async def test_the_assets_come_from_the_package_and_nothing_from_elsewhere(
    api: httpx.AsyncClient,
) -> None:
    html = (await api.get("/ui")).text
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assert sorted(assets) == ["/ui-assets/app.css", "/ui-assets/app.js"]
    script = await api.get("/ui-assets/app.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert "://" not in re.sub(r"https?://(www\.)?(w3\.org|[\w.-]+/licenses?)[^\s\"'`]*", "", "")
    style = await api.get("/ui-assets/app.css")
    assert style.status_code == 200 and "text/css" in style.headers["content-type"]
    missing = await api.get("/ui-assets/nope.js")
    assert missing.status_code == 404


async def test_conversations_are_listed_newest_first(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    ids = [f"{cid}-{n}" for n in range(3)]
    for conversation in ids:
        created = await api.post(
            "/v1/agents/quiet_reasoner/conversations", json={"id": conversation}
        )
        assert created.status_code == 201
    listed = await api.get("/v1/agents/quiet_reasoner/conversations", params={"limit": 200})
    assert listed.status_code == 200
    found = [c["id"] for c in listed.json()["conversations"] if c["id"].startswith(cid)]
    assert found == ids[::-1]
    first = (await api.get("/v1/agents/quiet_reasoner/conversations", params={"limit": 1})).json()
    assert len(first["conversations"]) == 1
    for limit in ("0", "201", "x"):
        bad = await api.get("/v1/agents/quiet_reasoner/conversations", params={"limit": limit})
        assert bad.status_code == 422 and "limit" in bad.text, limit
    unknown = await api.get("/v1/agents/nobody/conversations")
    assert unknown.status_code == 404
    assert unknown.headers["content-type"] == "application/problem+json"
