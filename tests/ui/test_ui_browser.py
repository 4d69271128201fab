"""The chat page end to end, in headless Chromium against the real stack (issue 17).

The page's own code runs (a React app on the AI SDK's `useChat`, bundled in api/ui/app.js),
talking to the gateway's chat route over 127.0.0.1; only the model is the scripted fake. Each
state a person would see is saved as a screenshot (tests/_browser.py says where).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest
from playwright.async_api import BrowserContext, ConsoleMessage, Page, Route, expect

from tests._browser import CHROMIUM_ARGS, find_chromium, require_browser, screenshot_dir
from tests._stack import Stack, extra_gateway, own_stack, stack_env
from tests._turn_helpers import helper_path
from think.dev import Services
from think.testing import FakeOpenAIServer, error, reasoning, reply, stall, text, tool_call
from think.workflows.names import turn_workflow_id

pytestmark = require_browser()


@pytest.fixture(scope="module")
async def browser(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[BrowserContext]:
    from playwright.async_api import async_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")  # a fresh user-data-dir
    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=find_chromium(),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1000, "height": 760},
        )
        context.set_default_timeout(20_000)
        expect.set_options(timeout=20_000)
        try:
            yield context
        finally:
            await context.close()


@pytest.fixture
async def page(browser: BrowserContext) -> AsyncIterator[Page]:
    """A new tab (so a new sessionStorage). Any script error on the page fails the test, and
    so does any error it logs (the page logs one if the AI SDK rejects a stream) but the
    browser's own note of an HTTP error answer, which several tests provoke."""
    tab = await browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))

    def console(message: ConsoleMessage) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            errors.append(message.text)

    tab.on("console", console)
    # Everything the page loads or calls is its own gateway's: no CDN, no other host.
    origins: set[str] = set()
    tab.on("request", lambda request: origins.add(re.sub(r"^(\w+://[^/]+).*", r"\1", request.url)))
    try:
        yield tab
    finally:
        await tab.close()
    assert errors == [], errors
    assert len(origins) == 1, origins


def shot(name: str) -> Path:
    return screenshot_dir() / f"chat-{name}.png"


async def send(page: Page, words: str) -> None:
    """As a person would: once the page lets them (loaded, no answer still streaming)."""
    await expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    await page.get_by_label("Your message").fill(words)
    await page.get_by_label("Your message").press("Enter")


async def stored(api: httpx.AsyncClient, agent: str, cid: str) -> list[dict[str, Any]]:
    response = await api.get(f"/v1/agents/{agent}/conversations/{cid}/messages")
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


def answers(page: Page):  # type: ignore[no-untyped-def]
    return page.locator("#messages .message.assistant")


async def test_a_message_streams_into_the_page(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    words = "Streams arrive word by word until the whole answer stands here"
    fake_model.script(cid, reply(text(words), delay=0.25))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await expect(page.get_by_text("No messages yet")).to_be_visible()
    await send(page, "How do answers arrive?")
    # Seen part-way: some words shown, not yet all of them.
    live = page.locator("#live .text")
    await page.wait_for_function(
        """words => {
            const shown = document.querySelector('#live .text')?.textContent || '';
            return shown.length > 0 && shown.length < words.length && words.startsWith(shown);
        }""",
        arg=words,
    )
    await expect(live).not_to_have_text(words)
    await expect(page.locator("#messages .message.user")).to_have_text(re.compile("How do answers"))
    await page.screenshot(path=shot("streaming"))
    await expect(answers(page)).to_have_text(re.compile(re.escape(words)))
    await expect(page.locator("#turn-status .turn-status")).to_have_text("completed")
    await expect(page.locator("#live")).to_have_count(0)
    messages = await stored(api, "helper", cid)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert await answers(page).get_attribute("data-message-id") == messages[1]["id"]
    # The page's URL is the conversation's, and the conversation is listed.
    assert page.url.endswith(f"/ui/helper/{cid}")
    await expect(page.locator("#conversation")).to_have_value(cid)
    await page.screenshot(path=shot("answered"))


async def test_reasoning_is_collapsed_and_the_turn_links_to_its_workflow(
    page: Page, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reasoning("Let me weigh it up.") + text("Forty-two."))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await send(page, "The answer?")
    await expect(answers(page)).to_contain_text("Forty-two.")
    thought = page.locator(".message.assistant details.reasoning")
    await expect(thought).not_to_have_attribute("open", "")
    await expect(thought.get_by_text("Let me weigh it up.")).to_be_hidden()
    await thought.locator("summary").click()
    await expect(thought.get_by_text("Let me weigh it up.")).to_be_visible()
    link = page.get_by_role("link", name="its workflow in the Temporal UI")
    href = await link.get_attribute("href")
    turn_id = (await page.locator("#turn-status .turn-id").inner_text()).split()[1]
    assert stack.env["THINK_TEMPORAL_UI_URL"]
    workflow = turn_workflow_id("helper", cid, turn_id)
    # The page links it as encodeURIComponent does (`:` as %3A).
    linked = quote(workflow, safe="!'()*")
    assert href == f"{stack.env['THINK_TEMPORAL_UI_URL']}/namespaces/default/workflows/{linked}"
    # The link opens that workflow in the Temporal UI.
    temporal = await page.context.new_page()
    try:
        await temporal.goto(href)
        await expect(temporal.get_by_text(workflow).first).to_be_visible()
    finally:
        await temporal.close()


async def test_approve_a_tool_call_and_see_its_output_and_the_answer(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid, tool_call("delete_file", {"path": "notes.txt"}), text("Deleted notes.txt as asked.")
    )
    await page.goto(f"{stack.api_url}/ui/gatekeeper/{cid}")
    await send(page, "Please delete notes.txt")
    request = page.locator('#live [data-state="approval-requested"]')
    await expect(request).to_contain_text("delete_file")
    await expect(request.locator(".tool-input")).to_have_text(
        json.dumps({"path": "notes.txt"}, indent=2)
    )
    await expect(page.locator("#turn-status .turn-status")).to_have_text("waits for your approval")
    await expect(page.locator("#turn-status")).not_to_contain_text("null")
    await expect(request.get_by_role("button", name="Approve")).to_be_enabled()
    await page.screenshot(path=shot("approval"))
    await request.get_by_role("button", name="Approve").click()
    await expect(answers(page)).to_contain_text("Deleted notes.txt as asked.")
    tool = answers(page).locator("details.tool")
    await expect(tool.locator("summary")).to_have_text("Tool delete_file: done")
    await tool.locator("summary").click()
    await expect(tool.locator(".tool-output")).to_have_text("deleted notes.txt")
    await expect(page.locator("#turn-status .turn-status")).to_have_text("completed")
    await page.screenshot(path=shot("approved"))
    parts = (await stored(api, "gatekeeper", cid))[-1]["parts"]
    states = [p["state"] for p in parts if p.get("toolCallId")]
    assert states == ["output-available"]


async def test_deny_with_a_reason(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("delete_file", {"path": "keep.txt"}), text("Kept it."))
    await page.goto(f"{stack.api_url}/ui/gatekeeper/{cid}")
    await send(page, "Delete keep.txt")
    request = page.locator('#live [data-state="approval-requested"]')
    await request.get_by_label("Reason for denying").fill("I still need it")
    await request.get_by_role("button", name="Deny").click()
    await expect(answers(page)).to_contain_text("Kept it.")
    tool = answers(page).locator("details.tool")
    await expect(tool.locator("summary")).to_have_text("Tool delete_file: denied")
    await tool.locator("summary").click()
    await expect(tool.locator(".tool-output")).to_have_text("Denied: I still need it")
    parts = (await stored(api, "gatekeeper", cid))[-1]["parts"]
    assert [p["state"] for p in parts if p.get("toolCallId")] == ["output-denied"]


async def test_an_approval_already_decided_elsewhere_is_a_409_the_page_explains(
    page: Page, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("delete_file", {"path": "x"}), text("Done."))
    await page.goto(f"{stack.api_url}/ui/gatekeeper/{cid}")
    await send(page, "Delete x")
    request = page.locator('#live [data-state="approval-requested"]')
    decided_first: list[int] = []

    async def decide_elsewhere_first(route: Route) -> None:
        """Someone else (the CLI, another tab) denies it just before the page's decision (its
        useChat POST carrying `addToolApprovalResponse`'s answer) lands."""
        if route.request.method != "POST":
            return await route.continue_()
        async with httpx.AsyncClient(base_url=stack.api_url) as other:
            waiting = (await other.get("/v1/approvals")).json()["approvals"]
            (mine,) = [a for a in waiting if a["conversation_id"] == cid]
            turn = f"/v1/agents/gatekeeper/conversations/{cid}/turns/{mine['turn_id']}"
            answer = await other.post(
                f"{turn}/approvals/{mine['approval_id']}", json={"approved": False}
            )
        decided_first.append(answer.status_code)
        await route.continue_()

    await page.route("**/v1/agents/gatekeeper/chat", decide_elsewhere_first)
    await request.get_by_role("button", name="Approve").click()
    alert = page.get_by_role("alert")
    await expect(alert).to_contain_text("Conflict")
    await expect(alert).to_contain_text("Reload the conversation")
    assert decided_first in ([200], [202])
    await expect(answers(page)).to_contain_text("Done.")
    await expect(answers(page).locator("details.tool summary")).to_have_text(
        "Tool delete_file: denied"
    )
    await expect(alert).to_contain_text("Conflict")  # still there to read, once it has ended


async def test_answer_a_client_tool(
    page: Page, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid, tool_call("ask_user", {"question": "Which city?"}), text("Paris it is, then.")
    )
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await send(page, "Weather, please")
    question = page.locator('#live [data-state="input-available"]')
    await expect(question.locator(".question")).to_have_text("Which city?")
    await expect(question.locator(".label").first).to_have_text(
        "Tool ask_user: waits for your answer"
    )
    await expect(page.locator("#turn-status .turn-status")).to_have_text("waits for your answer")
    await expect(question.get_by_role("button", name="Send answer")).to_be_enabled()
    await page.screenshot(path=shot("client-tool"))
    await question.get_by_label("Which city?").fill("Paris")
    await question.get_by_role("button", name="Send answer").click()
    await expect(answers(page)).to_contain_text("Paris it is, then.")
    # The model was given the person's answer as the tool's result.
    last = fake_model.requests(cid)[-1]["body"]["messages"]
    results = [m for m in last if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in results] == [{"answer": "Paris"}]
    # The page declared the tool it answers: the model saw it beside the agent's.
    tools = [t["function"]["name"] for t in fake_model.requests(cid)[0]["body"]["tools"]]
    assert "ask_user" in tools


async def test_decline_a_client_tool(
    page: Page, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("ask_user", {"question": "Your age?"}), text("Fair enough."))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await send(page, "Guess my age")
    question = page.locator('#live [data-state="input-available"]')
    await question.get_by_role("button", name="Decline").click()
    await expect(answers(page)).to_contain_text("Fair enough.")
    await expect(answers(page).locator("details.tool summary")).to_have_text(
        "Tool ask_user: failed"
    )
    last = fake_model.requests(cid)[-1]["body"]["messages"]
    (result,) = [m for m in last if m["role"] == "tool"]
    assert "declined" in result["content"], result


async def test_regenerate_and_move_between_the_answers(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("The first answer."), text("The second answer."))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await send(page, "Answer twice")
    await expect(answers(page)).to_contain_text("The first answer.")
    await page.get_by_role("button", name="Regenerate").click()
    await expect(answers(page)).to_contain_text("The second answer.")
    await expect(answers(page)).to_have_count(1)
    position = page.locator(".branch-position")
    await expect(position).to_have_text("2 / 2")
    await page.screenshot(path=shot("branches"))
    await page.get_by_role("button", name="Previous answer").click()
    await expect(answers(page)).to_contain_text("The first answer.")
    await expect(position).to_have_text("1 / 2")
    # The switch is the conversation's: the server's active path is the first answer now.
    assert (await stored(api, "helper", cid))[-1]["parts"][-1]["text"] == "The first answer."
    await page.get_by_role("button", name="Next answer").click()
    await expect(answers(page)).to_contain_text("The second answer.")
    await expect(position).to_have_text("2 / 2")
    # A search hit on the other branch switches to it.
    await page.get_by_label("Search this conversation").fill("first")
    await page.get_by_role("button", name="Search", exact=True).click()
    await page.locator("#search-hits .hit").filter(has_text="The first answer").click()
    await expect(page.locator(".message.highlight")).to_contain_text("The first answer.")
    await expect(position).to_have_text("1 / 2")


async def test_a_reload_mid_stream_resumes_from_where_the_tab_got_and_repeats_nothing(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    words = " ".join(f"word{i}" for i in range(16))
    fake_model.script(cid, reply(text(words), delay=0.3))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await send(page, "Count slowly")
    await expect(page.locator("#live .text")).to_contain_text("word2")
    resumed: list[str | None] = []

    def note(request: Any) -> None:
        if "/stream" in request.url:  # useChat's reconnect, from the chunk after the saved ones
            resumed.append(parse_qs(urlsplit(request.url).query).get("startIndex", [None])[0])

    page.on("request", note)
    await page.reload()
    await expect(page.locator("#live .text")).to_contain_text("word2")
    await page.screenshot(path=shot("resumed"))
    await expect(answers(page)).to_have_text(re.compile(re.escape(words)))
    await expect(page.locator("#live")).to_have_count(0)
    body = await page.locator("#messages").inner_text()
    assert body.count("word15") == 1 and body.count("word1 ") == 1, body
    # The stream was asked for from where this tab had got to, not from the start.
    assert len(resumed) == 1 and resumed[0] is not None and int(resumed[0]) > 0, resumed
    messages = await stored(api, "helper", cid)
    assert messages[-1]["parts"][-1]["text"] == words


async def test_cancel_a_running_turn(
    page: Page, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Starting a long one") + stall(60) + text("never shown"))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await send(page, "Take your time")
    await expect(page.locator("#live .text")).to_contain_text("Starting")
    await page.get_by_role("button", name="Cancel turn").click()
    await expect(page.locator("#turn-status .turn-status")).to_have_text("was cancelled")
    await expect(page.locator("#live")).to_have_count(0)
    await expect(page.get_by_role("button", name="Cancel turn")).to_be_hidden()
    await expect(page.locator("#messages")).not_to_contain_text("never shown")


async def test_search_the_conversation(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Paris is the capital of France."), text("Bananas are yellow."))
    for question in ("Capital of France?", "What colour are bananas?"):
        turn = await api.post(f"{helper_path(cid)}/turns", json={"input": question, "mode": "wait"})
        assert turn.json()["status"] == "completed", turn.text
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await expect(answers(page)).to_have_count(2)
    await page.get_by_label("Search this conversation").fill("bananas")
    await page.get_by_role("button", name="Search", exact=True).click()
    hits = page.locator("#search-hits .hit")
    await expect(hits).to_have_count(2)  # the question and the answer
    await expect(hits.locator("mark").first).to_have_text(re.compile("banana", re.I))
    answer = hits.filter(has_text="Bananas are yellow")
    await answer.click()
    target = page.locator(".message.highlight")
    await expect(target).to_contain_text("Bananas are yellow.")
    await page.screenshot(path=shot("search"))


async def test_errors_a_person_can_act_on(page: Page, stack: Stack, cid: str) -> None:
    await page.goto(f"{stack.api_url}/ui/asistant/{cid}")
    alert = page.get_by_role("alert")
    await expect(alert).to_contain_text('no agent named "asistant"')
    await expect(alert).to_contain_text("helper")
    await expect(page.get_by_label("Agent", exact=True)).not_to_have_value("")
    await page.screenshot(path=shot("unknown-agent"))
    # The API down, as the browser sees it: the connection fails.
    await page.route("**/v1/**", lambda route: route.abort("connectionrefused"))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await expect(alert).to_contain_text("is not answering")
    await expect(alert).to_contain_text("think dev")
    await page.screenshot(path=shot("api-down"))


async def test_readable_on_a_phone(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("delete_file", {"path": "a/long/path/to/some/file.txt"}))
    body = {"input": "Delete that file for me, please", "mode": "submit"}
    await api.post(f"/v1/agents/gatekeeper/conversations/{cid}/turns", json=body)
    await page.set_viewport_size({"width": 390, "height": 780})
    await page.goto(f"{stack.api_url}/ui/gatekeeper/{cid}")
    request = page.locator('#live [data-state="approval-requested"]')
    await expect(request.get_by_role("button", name="Approve")).to_be_enabled()
    overflow = await page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, overflow
    await page.screenshot(path=shot("phone"), full_page=True)
    await request.get_by_role("button", name="Deny").click()
    await expect(page.locator("#live")).to_have_count(0)


@pytest.fixture(scope="module")
def keyed_gateway(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {**stack.env, "THINK_API_KEYS": "page-key:pages"}
    with extra_gateway(env, tmp_path_factory.mktemp("ui-keys")) as url:
        yield url


async def test_with_api_keys_the_page_asks_for_one_and_keeps_it_in_the_tab(
    page: Page, keyed_gateway: str, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Hello, keyed tenant."))
    await page.goto(f"{keyed_gateway}/ui/helper/{cid}")
    key = page.get_by_label("This gateway needs an API key")
    await expect(key).to_be_visible()
    await key.fill("not-the-key")
    await page.get_by_role("button", name="Use key").click()
    await expect(page.get_by_role("alert")).to_contain_text("Bearer")
    await expect(key).to_be_visible()
    await key.fill("page-key")
    await page.get_by_role("button", name="Use key").click()
    await expect(key).to_be_hidden()
    await send(page, "Hi")
    await expect(answers(page)).to_contain_text("Hello, keyed tenant.")
    stored_in = await page.evaluate(
        "[sessionStorage.getItem('think.apiKey'), Object.keys(localStorage).length]"
    )
    assert stored_in == ["page-key", 0]
    async with httpx.AsyncClient(base_url=keyed_gateway) as client:
        mine = await client.get(
            "/v1/agents/helper/conversations", headers={"authorization": "Bearer page-key"}
        )
    # The list is the tenant's own: none of the default tenant's many conversations.
    assert [c["id"] for c in mine.json()["conversations"]] == [cid]


@pytest.fixture(scope="module")
def offline_gateway(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bundled agent with no model configured, as a newcomer's `make dev` runs it."""
    logs = tmp_path_factory.mktemp("ui-offline")
    env = stack_env(
        database_url=services.database_url,
        temporal_address=services.temporal_address,
        task_queue="think-ui-offline",
        agents="examples.assistant:Assistant",
        model_url=None,
        home=logs,
    )
    env.pop("THINK_AGENTS")
    with own_stack(env, logs) as offline:
        yield offline.api_url


async def test_with_no_model_configured_the_offline_model_answers_in_the_page(
    page: Page, offline_gateway: str, cid: str
) -> None:
    # A conversation of its own: the page opens the agent's newest one, and this gateway
    # shares its database with the other tests' stack, which talk to `assistant` too.
    await page.goto(f"{offline_gateway}/ui/assistant/{cid}")
    await expect(page.get_by_label("Agent", exact=True)).to_have_value("assistant")
    await expect(page.locator("#agent-about")).to_contain_text("answered by offline")
    await send(page, "Hello!")
    await expect(answers(page)).to_contain_text("offline model")
    await expect(answers(page)).to_contain_text("You said: Hello!")
    await send(page, '/call delete_file {"path": "notes.txt"}')
    request = page.locator('#live [data-state="approval-requested"]')
    await expect(request.locator(".tool-input")).to_contain_text('"path": "notes.txt"')
    # Usable once the response has ended at the pause (useChat then sends a decision).
    await expect(request.get_by_role("button", name="Approve")).to_be_enabled()
    await expect(page.locator("#turn-status .turn-status")).to_have_text("waits for your approval")
    await page.screenshot(path=shot("offline-approval"))
    await request.get_by_role("button", name="Approve").click()
    await expect(page.locator("#live")).to_have_count(0)
    tool = answers(page).last.locator("details.tool")
    await tool.locator("summary").click()
    await expect(tool.locator(".tool-output")).to_contain_text("notes.txt")
    await page.evaluate("scrollTo(0, document.documentElement.scrollHeight)")
    await page.screenshot(path=shot("offline-answered"))


async def test_links_in_messages_open_only_if_they_are_http(
    page: Page, stack: Stack, api: httpx.AsyncClient, cid: str
) -> None:
    """A model's source link is shown, but a `javascript:` one is never made clickable."""
    message = {
        "id": f"{cid}-a",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "Sources:"},
            {"type": "source-url", "sourceId": "s1", "url": "https://example.org/a", "title": "A"},
            {"type": "source-url", "sourceId": "s2", "url": "javascript:alert(1)", "title": "B"},
        ],
    }
    added = await api.post(f"{helper_path(cid)}/messages", json={"messages": [message]})
    assert added.status_code == 201, added.text
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await expect(answers(page)).to_contain_text("Sources:")
    good = answers(page).get_by_role("link", name="A")
    assert await good.get_attribute("href") == "https://example.org/a"
    await expect(answers(page).get_by_role("link", name="B")).to_have_count(0)
    await expect(answers(page).locator(".unsafe-link")).to_have_text("B")


async def test_a_failed_turn_says_why(
    page: Page, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, error(400, "This model does not take that request."))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await send(page, "Break, please")
    status = page.locator("#turn-status")
    await expect(status.locator(".turn-status")).to_have_text("failed")
    await expect(status.locator(".error-text")).to_contain_text("does not take that request")
    await expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    await page.screenshot(path=shot("failed"))


async def test_pick_an_agent_and_create_and_switch_conversations(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("An older answer."))
    turn = await api.post(
        f"{helper_path(cid)}/turns", json={"input": "Old question", "mode": "wait"}
    )
    assert turn.json()["status"] == "completed", turn.text
    await page.goto(f"{stack.api_url}/ui")
    await page.get_by_label("Agent", exact=True).select_option("helper")
    await expect(page).to_have_url(re.compile(r"/ui/helper(/|$)"))
    await page.get_by_role("button", name="New conversation").click()
    await expect(page).to_have_url(re.compile(r"/ui/helper/conv_[0-9a-f]+$"))
    created = page.url.rsplit("/", 1)[1]
    await expect(page.get_by_label("Conversation", exact=True)).to_have_value(created)
    await expect(page.get_by_text("No messages yet")).to_be_visible()
    listed = (await api.get("/v1/agents/helper/conversations")).json()["conversations"]
    assert listed[0]["id"] == created
    # Another conversation, from the list: its messages, and its URL.
    await page.get_by_label("Conversation", exact=True).select_option(cid)
    await expect(page).to_have_url(re.compile(f"/ui/helper/{cid}$"))
    await expect(answers(page)).to_have_text(re.compile("An older answer."))
    await expect(page.locator("#messages .message.user")).to_have_text(re.compile("Old question"))


async def test_a_stream_the_ai_sdk_rejects_is_reported(
    browser: BrowserContext, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """What makes every test above a check of our stream against the SDK's reader: a stream
    it rejects (here a text delta with no text part started, served in place of the real
    one) is logged as an error, which the `page` fixture fails on."""
    tab = await browser.new_page()
    logged: list[str] = []
    tab.on("console", lambda m: logged.append(m.text) if m.type == "error" else None)
    broken = (
        'id: 0\ndata: {"type":"start","messageId":"m-broken"}\n\n'
        'id: 1\ndata: {"type":"text-delta","id":"t0","delta":"orphan"}\n\n'
        'id: 2\ndata: {"type":"finish"}\n\ndata: [DONE]\n\n'
    )

    async def serve_broken(route: Route) -> None:
        await route.fulfill(status=200, content_type="text/event-stream", body=broken)

    try:
        await tab.route("**/v1/agents/helper/chat", serve_broken)
        await tab.goto(f"{stack.api_url}/ui/helper/{cid}")
        await send(tab, "Hello")
        alert = tab.get_by_role("alert")
        await expect(alert).to_contain_text("This answer's stream could not be read")
        await expect(alert).to_contain_text("text-delta")
        assert any("the AI SDK rejected the stream" in m for m in logged), logged
    finally:
        await tab.close()
