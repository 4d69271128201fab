"""The chat page's markdown (rendered, and never HTML from the model), the usage of each
answer, the approvals view across conversations, Esc, Shift+Enter and a reload while an
approval waits, in Chromium (issue 36).

The fixtures are test_ui_browser.py's: a script error, an error the page logs or a request to
another origin fails each test.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
from playwright.async_api import Page, expect

from tests._sse import until_terminal
from tests._stack import Stack
from tests.ui.test_ui_browser import answers, browser, page, send, shot
from think.testing import FakeOpenAIServer, reply, stall, text, tool_call

__all__ = ["browser", "page"]  # the fixtures, shared

ANSWER = [
    "# A heading\n\n",
    "Some **bold** words, `inline code` and a list:\n\n",
    "- one\n- two\n\n",
    "```python\nprint('<b>hi</b>')\n```\n\n",
    "<script>window.pwned = 'script'</script>\n\n",
    '<img src="x" onerror="window.pwned = \'img\'">\n\n',
    "[bad](javascript:alert(1)) and [good](https://example.org/doc) and ",
    "![picture](https://example.org/p.png)\n\n",
    "| a | b |\n| - | - |\n| 1 | 2 |\n",
]


async def test_an_answer_is_markdown_and_none_of_its_html_reaches_the_page(
    page: Page, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text(*ANSWER))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await send(page, "Show me some markdown")
    answer = answers(page)
    await expect(answer.locator(".usage")).to_be_visible()  # the answer has settled
    await expect(answer.locator("h3")).to_have_text("A heading")
    await expect(answer.locator("strong")).to_have_text("bold")
    await expect(answer.locator("li")).to_have_text(["one", "two"])
    await expect(answer.locator("pre.code")).to_have_text("print('<b>hi</b>')")
    await expect(answer.locator("th")).to_have_text(["a", "b"])
    await expect(answer.locator("td")).to_have_text(["1", "2"])
    # The HTML is shown as its characters: no element of it, no script run, nothing loaded.
    await expect(answer).to_contain_text("<script>window.pwned = 'script'</script>")
    await expect(answer).to_contain_text('<img src="x" onerror=')
    for tag in ("script", "img", "b", "iframe"):
        await expect(answer.locator(tag)).to_have_count(0)
    assert await page.evaluate("window.pwned") is None
    # Links: http(s) only; an image is a link to it, never loaded.
    assert await answer.get_by_role("link", name="good").get_attribute("href") == (
        "https://example.org/doc"
    )
    await expect(answer.get_by_role("link", name="bad")).to_have_count(0)
    await expect(answer.locator(".unsafe-link")).to_have_text("bad")
    await expect(answer.get_by_role("link", name="picture")).to_have_count(1)
    await page.screenshot(path=shot("markdown"), full_page=True)


async def test_each_answer_shows_what_it_used(
    page: Page, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("A short answer."))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await send(page, "Hello")
    await expect(answers(page).locator(".usage")).to_have_text(
        re.compile(r"^\d+ in · \d+ out tokens")
    )


async def test_escape_cancels_the_turn(
    page: Page, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Starting a long one") + stall(60) + text("never shown"))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await send(page, "Take your time")
    await expect(page.locator("#live .text")).to_contain_text("Starting")
    await page.keyboard.press("Escape")
    await expect(page.locator("#turn-status .turn-status")).to_have_text("was cancelled")
    await expect(page.locator("#messages")).not_to_contain_text("never shown")


async def test_the_approvals_view_lists_and_decides_across_conversations(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    waiting = f"{cid}-waiting"
    fake_model.script(waiting, tool_call("delete_file", {"path": "old.txt"}), text("Gone."))
    turns = f"/v1/agents/gatekeeper/conversations/{waiting}/turns"
    submitted = await api.post(turns, json={"input": "Delete old.txt"})
    assert submitted.status_code == 202, submitted.text
    turn_url = f"{turns}/{submitted.json()['turn_id']}"
    paused = await until_terminal(api, turn_url)  # returns once no longer running
    assert paused["status"] == "awaiting_approval", paused
    # From another conversation's page.
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    await page.get_by_role("button", name="Approvals").click()
    item = page.locator(f'#approvals-list li:has(a[href="/ui/gatekeeper/{waiting}"])')
    await expect(item).to_contain_text("delete_file")
    await expect(item.locator(".tool-input")).to_contain_text('"path": "old.txt"')
    await page.screenshot(path=shot("approvals-view"))
    await item.get_by_role("button", name="Approve").click()
    await expect(item).to_have_count(0)
    ended = await _completed(api, turn_url)
    assert ended["message"]["parts"][-1]["text"] == "Gone."


async def _completed(api: httpx.AsyncClient, url: str) -> dict[str, Any]:
    """The turn once it has completed (a decided turn may still show `awaiting_approval`
    until a worker has applied the decision)."""
    for _ in range(600):
        turn: dict[str, Any] = (await api.get(url)).json()
        if turn["status"] == "completed":
            return turn
        assert turn["status"] in ("running", "awaiting_approval"), turn
        await asyncio.sleep(0.05)
    raise AssertionError(f"turn not completed: {turn}")


async def test_the_sidebar_lists_conversations_by_title_on_a_wide_screen(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    first, second = f"{cid}-a", f"{cid}-b"
    for conv, words in ((first, "Plan a trip to Lisbon"), (second, "What is a monad?")):
        fake_model.script(conv, text("Sure."))
        turn = await api.post(
            f"/v1/agents/helper/conversations/{conv}/turns", json={"input": words, "mode": "wait"}
        )
        assert turn.json()["status"] == "completed", turn.text
    listed = (await api.get("/v1/agents/helper/conversations")).json()["conversations"]
    assert {c["id"]: c["title"] for c in listed}[first] == "Plan a trip to Lisbon"
    await page.set_viewport_size({"width": 1300, "height": 800})
    await page.goto(f"{stack.api_url}/ui/helper/{first}")
    sidebar = page.get_by_role("navigation", name="Conversations")
    current = sidebar.locator('a[aria-current="page"]')
    await expect(current).to_contain_text("Plan a trip to Lisbon")
    await expect(page.get_by_label("Conversation", exact=True)).to_be_hidden()
    await page.screenshot(path=shot("sidebar"))
    await sidebar.get_by_role("link", name=re.compile("What is a monad")).click()
    await expect(page).to_have_url(re.compile(f"/ui/helper/{second}$"))
    await expect(page.locator("#messages .message.user")).to_have_text(re.compile("monad"))
    await expect(current).to_contain_text("What is a monad?")


async def test_shift_enter_starts_a_new_line_and_enter_sends_it_all(
    page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Two lines read."))
    await page.goto(f"{stack.api_url}/ui/helper/{cid}")
    box = page.get_by_label("Your message")
    await expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    await box.fill("first line")
    await box.press("Shift+Enter")
    await box.press_sequentially("second line")
    await expect(box).to_have_value("first line\nsecond line")  # not sent yet
    await box.press("Enter")
    await expect(answers(page)).to_contain_text("Two lines read.")
    await expect(box).to_have_value("")
    response = await api.get(f"/v1/agents/helper/conversations/{cid}/messages")
    (said,) = [m for m in response.json()["messages"] if m["role"] == "user"]
    assert said["parts"][-1]["text"] == "first line\nsecond line"


async def test_a_reload_while_an_approval_waits_shows_it_again_and_approving_goes_on(
    page: Page, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """useChat's `resume`: the reconnect streams the paused turn up to its pause, so the
    request is back with its controls, and the decision goes on with the same turn."""
    fake_model.script(cid, tool_call("delete_file", {"path": "y.txt"}), text("Deleted y."))
    await page.goto(f"{stack.api_url}/ui/gatekeeper/{cid}")
    await send(page, "Delete y")
    request = page.locator('#live [data-state="approval-requested"]')
    await expect(request.get_by_role("button", name="Approve")).to_be_enabled()
    await page.reload()
    await expect(request.get_by_role("button", name="Approve")).to_be_enabled()
    await expect(page.locator("#turn-status .turn-status")).to_have_text("waits for your approval")
    await expect(request).to_have_count(1)  # the answer so far, once
    await request.get_by_role("button", name="Approve").click()
    await expect(answers(page)).to_contain_text("Deleted y.")
    await expect(page.locator("#live")).to_have_count(0)
    await expect(answers(page).locator("details.tool summary")).to_have_text(
        "Tool delete_file: done"
    )


async def test_a_reload_while_the_approved_answer_streams_repeats_nothing(
    page: Page, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The events this tab kept span the pause: a reload during the continuation replays
    them, asks for the rest only, and the answer comes out whole and once."""
    words = " ".join(f"word{i}" for i in range(14))
    fake_model.script(
        cid, tool_call("delete_file", {"path": "z.txt"}), reply(text(words), delay=0.3)
    )
    await page.goto(f"{stack.api_url}/ui/gatekeeper/{cid}")
    await send(page, "Delete z")
    request = page.locator('#live [data-state="approval-requested"]')
    await request.get_by_role("button", name="Approve").click()
    await expect(page.locator("#live .text")).to_contain_text("word2")
    resumed: list[str] = []
    page.on("request", lambda r: resumed.append(r.url) if "/stream" in r.url else None)
    await page.reload()
    await expect(answers(page)).to_have_text(re.compile(re.escape(words)))
    await expect(page.locator("#live")).to_have_count(0)
    body = await answers(page).inner_text()
    assert body.count("word13") == 1 and body.count("word1 ") == 1, body
    await expect(answers(page).locator("details.tool summary")).to_have_text(
        "Tool delete_file: done"
    )
    assert len(resumed) == 1 and "startIndex=" in resumed[0], resumed
