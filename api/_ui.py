"""The chat page: `GET /ui` (and `/ui/{agent}/{conversation}`), from files shipped in the wheel.

The page is built from `ui/` (the AI SDK's stream readers, bundled by esbuild: `make ui`) into
`api/ui/`, which ships as package data, so `pip install` and `think dev` need no Node. Every
page path answers the same `index.html`; the script reads the agent and conversation from the
URL. What the page cannot learn from `/v1` (where the Temporal UI is, whether keys are needed)
is written into the page as JSON, so the page needs no endpoint of its own.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from think.server import Settings

PAGE = "/ui"
ASSETS = "/ui-assets"
"""Beside `/ui`, not below it: under `/ui/` every path is an agent's or a conversation's."""
CONFIG_SLOT = '<script id="think-config" type="application/json">{}</script>'


@cache
def _index() -> str:
    html = (files("api") / "ui" / "index.html").read_text(encoding="utf-8")
    assert CONFIG_SLOT in html, "api/ui/index.html lost its config slot: run `make ui`"
    return html


def page_config(settings: Settings) -> dict[str, object]:
    """What the page is told: the Temporal UI's workflow link and whether to ask for a key."""
    return {
        "temporal_ui_url": settings.temporal_ui_url,
        "temporal_namespace": settings.temporal_namespace,
        "auth_required": bool(settings.api_keys),
    }


def install(app: FastAPI, settings: Settings) -> None:
    app.mount(ASSETS, StaticFiles(directory=str(files("api") / "ui")), name="ui-assets")
    # `</` may not appear inside a <script> element: JSON escapes it as `<\/`.
    config = json.dumps(page_config(settings)).replace("</", "<\\/")
    slot = CONFIG_SLOT.replace("{}", config)

    async def page(request: Request) -> HTMLResponse:
        # Revalidated on every load, so a new version of the page is seen after an upgrade.
        return HTMLResponse(
            _index().replace(CONFIG_SLOT, slot), headers={"cache-control": "no-cache"}
        )

    for path in (PAGE, f"{PAGE}/", f"{PAGE}/{{agent}}", f"{PAGE}/{{agent}}/{{conversation}}"):
        app.add_api_route(path, page, methods=["GET"], include_in_schema=False)

    @app.get("/", include_in_schema=False)
    async def home() -> RedirectResponse:
        return RedirectResponse(PAGE)
