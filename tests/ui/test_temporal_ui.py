"""The saved views docs/operators.md tells an operator to add to the Temporal UI, made in the
real Temporal Web UI (the embedded dev server's, started with a UI port) by headless Chromium,
with the screenshots the doc shows (issue 19, "Operators in the Temporal UI").

A paused turn is only RUNNING to Temporal; its `ThinkTurnStatus` search attribute says
`awaiting_approval`, and its current details say what it waits for. The test builds the view
the doc describes, step by step as a person clicks it, and checks that it shows that turn and
not a finished one.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from playwright.async_api import BrowserContext, Page, expect

from tests._browser import CHROMIUM_ARGS, find_chromium, require_browser, screenshot_dir
from tests._stack import Stack
from think.testing import FakeOpenAIServer, text, tool_call
from think.workflows.names import turn_workflow_id

pytestmark = require_browser()

QUERY = 'ThinkTurnStatus = "awaiting_approval"'
VIEW = "Awaiting approval"


@pytest.fixture
async def temporal_page(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Page]:
    from playwright.async_api import async_playwright

    profile = tmp_path_factory.mktemp("chromium-temporal-ui")
    async with async_playwright() as pw:
        context: BrowserContext = await pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=find_chromium(),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1400, "height": 720},
        )
        context.set_default_timeout(30_000)
        try:
            yield await context.new_page()
        finally:
            await context.close()


async def _turn(api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str, pause: bool):
    if pause:
        fake_model.script(cid, tool_call("delete_file", {"path": "q3-report.txt"}))
    else:
        fake_model.script(cid, text("Nothing to approve."))
    body = {"input": "Tidy up", "mode": "wait"}
    turn = (await api.post(f"/v1/agents/gatekeeper/conversations/{cid}/turns", json=body)).json()
    assert turn["status"] == ("awaiting_approval" if pause else "completed"), turn
    return turn


async def test_the_operators_saved_view_of_turns_awaiting_approval(
    temporal_page: Page, stack: Stack, api: httpx.AsyncClient, fake_model: FakeOpenAIServer
) -> None:
    page = temporal_page
    shots = screenshot_dir()
    paused = await _turn(api, fake_model, "ops-paused", pause=True)
    done = await _turn(api, fake_model, "ops-done", pause=False)
    paused_id = paused["workflow_id"]
    done_id = done["workflow_id"]
    assert paused_id == turn_workflow_id("gatekeeper", "ops-paused", paused["turn_id"])
    ui = stack.env["THINK_TEMPORAL_UI_URL"]

    # 1. The query, typed into the workflow list's query box (the </> button opens it).
    await page.goto(f"{ui}/namespaces/default/workflows")
    await page.get_by_test_id("toggle-manual-query").click()
    await page.get_by_test_id("workflow-manual-search-input").fill(QUERY)
    await page.get_by_test_id("workflow-manual-search-button").click()
    rows = page.locator("table tbody tr")
    await expect(rows.filter(has_text=paused_id)).to_have_count(1)
    await expect(rows.filter(has_text=done_id)).to_have_count(0)

    # 2. ThinkTurnStatus (and ThinkAgent) as columns, ThinkTurnStatus beside Status.
    await page.get_by_role("button", name="Configure Columns").click()
    for column in ("ThinkTurnStatus", "ThinkAgent"):
        await page.get_by_test_id(f"orderable-list-item-{column}-add-button").click()
    for _ in range(12):  # up the list until it is second, after Status
        up = page.get_by_test_id("orderable-list-item-ThinkTurnStatus-move-up-button")
        items = page.locator("[data-testid^=orderable-list-item-]:is(li)")
        if await items.nth(1).get_attribute("data-testid") == "orderable-list-item-ThinkTurnStatus":
            break
        await up.click()
    await page.screenshot(path=shots / "temporal-ui-columns.png")
    await page.get_by_test_id("drawer-close-button").click()
    header = page.locator("table thead")
    await expect(header).to_contain_text("ThinkTurnStatus")
    await expect(rows.filter(has_text=paused_id)).to_contain_text("awaiting_approval")

    # 3. Saved as a view, listed under Saved Views.
    await page.get_by_test_id("create-view-button").click()
    await page.get_by_test_id("workflow-save-view-modal-input").fill(VIEW)
    await page.get_by_role("dialog").get_by_role("button", name=re.compile("^Save")).click()
    await expect(page.get_by_test_id("saved-views-button")).to_contain_text(VIEW)
    await page.screenshot(path=shots / "temporal-ui-awaiting-approval.png")

    # 4. The turn's own page: what it waits for, in its current details ("User Metadata").
    await rows.filter(has_text=paused_id).get_by_role("link", name=paused_id).click()
    await page.get_by_test_id("user-metadata-tab").click()
    # The UI renders current details as markdown in a sandboxed frame, the last on the tab.
    details = page.frame_locator("iframe").last
    await expect(details.get_by_text("awaiting approval: delete_file")).to_be_visible()
    await expect(details.get_by_text("q3-report.txt")).to_be_visible()
    await page.screenshot(path=shots / "temporal-ui-turn.png")
