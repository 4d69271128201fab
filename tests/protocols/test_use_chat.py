"""The AI SDK's own `useChat` (`@ai-sdk/react`) against the gateway, in Chromium (issue 36).

tests/node/use-chat/page.jsx is a stock React app on useChat, with the default transport or
`WorkflowChatTransport` (`@ai-sdk/workflow`) pointed at `POST /v1/agents/{agent}/chat`, and no
code of ours in between. It is bundled with esbuild once per module and served on the
gateway's own origin (Playwright answers the page's two files; everything else the page asks
goes to the real gateway), so the page is held to the browser tests' rules: a script error, an
error it logs or a request to another origin fails the test.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import BrowserContext, ConsoleMessage, Page, Route, expect

from tests._browser import CHROMIUM_ARGS, find_chromium, require_browser
from tests._sse import until_terminal
from tests._stack import ROOT, Stack
from think.testing import FakeOpenAIServer, reply, text, tool_call

pytestmark = require_browser()

HARNESS = ROOT / "tests" / "node"
PAGE = "/use-chat-test/"
HTML = (
    '<!doctype html><meta charset="utf-8"><div id="root"></div>'
    '<script type="module" src="page.js"></script>'
)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """page.jsx bundled (`npm ci --prefix tests/node` installs what it needs)."""
    out = tmp_path_factory.mktemp("use-chat")
    subprocess.run(
        ["node", str(HARNESS / "use-chat" / "build.mjs"), str(out)],
        cwd=HARNESS,
        check=True,
        timeout=120,
    )
    return out / "page.js"


@pytest.fixture(scope="module")
async def browser(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    from playwright.async_api import async_playwright

    profile = tmp_path_factory.mktemp("chromium-use-chat")
    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=find_chromium(),
            args=CHROMIUM_ARGS,
            headless=True,
        )
        context.set_default_timeout(20_000)
        expect.set_options(timeout=20_000)
        try:
            yield context
        finally:
            await context.close()


@pytest.fixture
async def page(browser: BrowserContext, bundle: Path, stack: Stack) -> AsyncIterator[Page]:
    tab = await browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))

    def console(message: ConsoleMessage) -> None:
        # The browser's note of an HTTP error answer: a new chat's stored messages are a 404.
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            errors.append(message.text)

    tab.on("console", console)
    origins: set[str] = set()
    tab.on("request", lambda request: origins.add(re.sub(r"^(\w+://[^/]+).*", r"\1", request.url)))
    script = await asyncio.to_thread(bundle.read_bytes)

    async def serve(route: Route) -> None:
        if route.request.url.split("?")[0].endswith("page.js"):
            await route.fulfill(body=script, content_type="text/javascript")
        else:
            await route.fulfill(body=HTML, content_type="text/html")

    await tab.route(f"{stack.api_url}{PAGE}**", serve)
    try:
        yield tab
    finally:
        await tab.close()
    assert errors == [], errors
    assert origins == {stack.api_url}, origins


async def open_chat(page: Page, stack: Stack, agent: str, cid: str, transport: str) -> None:
    await page.goto(f"{stack.api_url}{PAGE}?agent={agent}&chat={cid}&transport={transport}")
    await expect(page.locator("#status")).to_have_text("ready")


async def send(page: Page, words: str) -> None:
    await expect(page.get_by_role("button", name="Send")).to_be_enabled()
    await page.get_by_label("Message").fill(words)
    await page.get_by_role("button", name="Send").click()


def assistant(page: Page):  # type: ignore[no-untyped-def]
    return page.locator("#messages .message.assistant")


async def stored(api: httpx.AsyncClient, agent: str, cid: str) -> list[dict[str, Any]]:
    response = await api.get(f"/v1/agents/{agent}/conversations/{cid}/messages")
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


TRANSPORTS = pytest.mark.parametrize("transport", ["default", "workflow"])


@TRANSPORTS
async def test_send_stream_and_regenerate(
    page: Page,
    stack: Stack,
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    cid: str,
    transport: str,
) -> None:
    words = "Answers stream into useChat word by word"
    fake_model.script(cid, reply(text(words), delay=0.1), text("A second answer."))
    await open_chat(page, stack, "helper", cid, transport)
    await send(page, "How do answers arrive?")
    # Part-way first (useChat shows the words as they come), then whole.
    await page.wait_for_function(
        """words => {
            const shown = document.querySelector('.message.assistant .text')?.textContent || '';
            return shown.length > 0 && shown.length < words.length;
        }""",
        arg=words,
    )
    await expect(page.locator("#status")).to_have_text("streaming")
    await expect(assistant(page)).to_have_text(words)
    await expect(page.locator("#status")).to_have_text("ready")
    first = await assistant(page).get_attribute("data-id")
    assert [m["id"] for m in await stored(api, "helper", cid)][1] == first
    await page.get_by_role("button", name="Regenerate").click()
    await expect(assistant(page)).to_have_text("A second answer.")
    await expect(page.locator("#status")).to_have_text("ready")
    await expect(assistant(page)).to_have_count(1)
    again = await assistant(page).get_attribute("data-id")
    assert again != first
    turns = (await api.get(f"/v1/agents/helper/conversations/{cid}/turns")).json()["turns"]
    await until_terminal(api, f"/v1/agents/helper/conversations/{cid}/turns/{turns[0]['turn_id']}")
    assert [m["id"] for m in await stored(api, "helper", cid)][1] == again


@TRANSPORTS
async def test_reload_mid_answer_resumes_the_stream(
    page: Page,
    stack: Stack,
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    cid: str,
    transport: str,
) -> None:
    words = "one two three four five six seven eight nine ten eleven twelve"
    fake_model.script(cid, reply(text(words), delay=0.3))
    await open_chat(page, stack, "helper", cid, transport)
    await send(page, "Count slowly")
    await expect(assistant(page)).to_contain_text("two")
    await page.reload()
    # The stored messages, then the rest of the answer from the resumed stream, once.
    await expect(assistant(page)).to_have_text(words)
    await expect(page.locator("#status")).to_have_text("ready")
    await expect(page.locator("#messages .message")).to_have_count(2)
    # One turn (a model call may be retried by its activity under load: not a second turn).
    listed = await api.get(f"/v1/agents/helper/conversations/{cid}/turns")
    assert len(listed.json()["turns"]) == 1


async def test_stop_ends_the_answer_and_cancels_the_turn(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text("this answer goes on for a long while " * 20), delay=0.2))
    await open_chat(page, stack, "helper", cid, "default")
    await send(page, "Talk a while")
    await expect(assistant(page)).to_contain_text("answer goes")
    await page.get_by_role("button", name="Stop").click()
    await expect(page.locator("#status")).to_have_text("ready")
    turns = (await api.get(f"/v1/agents/helper/conversations/{cid}/turns")).json()["turns"]
    ended = await until_terminal(
        api, f"/v1/agents/helper/conversations/{cid}/turns/{turns[0]['turn_id']}"
    )
    assert ended["status"] == "aborted"
    # Nothing to resume now.
    assert (await api.get(f"/v1/agents/helper/chat/{cid}/stream")).status_code == 204


@TRANSPORTS
async def test_approve_a_tool_call_and_the_turn_goes_on(
    page: Page,
    stack: Stack,
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    cid: str,
    transport: str,
) -> None:
    fake_model.script(
        cid, tool_call("delete_file", {"path": "notes.txt"}), text("Deleted notes.txt as asked.")
    )
    await open_chat(page, stack, "gatekeeper", cid, transport)
    await send(page, "Please delete notes.txt")
    request = page.locator('.tool[data-state="approval-requested"]')
    await expect(request).to_contain_text("delete_file")
    # The response ended at the pause: useChat is ready for the decision.
    await expect(page.locator("#status")).to_have_text("ready")
    await request.get_by_role("button", name="Approve").click()
    await expect(assistant(page)).to_contain_text("Deleted notes.txt as asked.")
    await expect(page.locator('.tool[data-state="output-available"]')).to_contain_text(
        "deleted notes.txt"
    )
    await expect(page.locator("#status")).to_have_text("ready")
    await expect(assistant(page)).to_have_count(1)
    parts = (await stored(api, "gatekeeper", cid))[-1]["parts"]
    tools = [p for p in parts if p.get("toolCallId")]
    assert [p["state"] for p in tools] == ["output-available"]
    assert tools[0]["approval"]["approved"] is True


@TRANSPORTS
async def test_answer_a_client_tool_and_the_turn_goes_on(
    page: Page,
    stack: Stack,
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    cid: str,
    transport: str,
) -> None:
    """useChat's `addToolOutput` for a tool the page declared (`client_tools` in its body)."""
    fake_model.script(
        cid, tool_call("ask_user", {"question": "Which city?"}), text("Lisbon it is.")
    )
    await open_chat(page, stack, "helper", cid, transport)
    await send(page, "Plan a trip")
    question = page.locator('.tool[data-state="input-available"]')
    await expect(question).to_contain_text("ask_user")
    await expect(page.locator("#status")).to_have_text("ready")
    await question.get_by_label("Your answer").fill("Lisbon")
    await question.get_by_role("button", name="Answer").click()
    await expect(assistant(page)).to_contain_text("Lisbon it is.")
    await expect(page.locator('.tool[data-state="output-available"]')).to_contain_text("Lisbon")
    await expect(page.locator("#status")).to_have_text("ready")
    parts = (await stored(api, "helper", cid))[-1]["parts"]
    assert [p["output"] for p in parts if p.get("toolCallId")] == [{"answer": "Lisbon"}]
