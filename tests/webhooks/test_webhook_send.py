"""One webhook attempt (`think.webhooks.post`) through the fetch tools' connection guard, and
who receives which event (`WebhookActivities.subscriptions`): no stack, a receiver on
127.0.0.1 only where a test lists it as a private host."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tests._webhook_receiver import receiver
from tests.webhook_agents import Channeled, Notified
from think._settings import Settings
from think.agent import AgentRegistry
from think.engine.activities import ActivityResources
from think.engine.activities._webhooks import WebhookActivities
from think.webhooks import Refused, Webhook, WebhookError, checked_webhooks, post


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:9/hook", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.0.0.7/hook", "private"),
        ("http://localhost:8080/hook", "internal name"),
        ("http://metadata.google.internal/x", "internal name"),
        ("ftp://hooks.example.com/x", "only http and https"),
    ],
)
async def test_a_private_or_odd_url_is_refused_before_any_connection(url: str, words: str) -> None:
    with pytest.raises(Refused, match=words):
        await post(url, b"{}", {}, private_hosts=[], timeout=1)


async def test_a_listed_private_host_is_reached_and_its_answer_read() -> None:
    with receiver({"/ok": [200], "/busy": [429], "/gone": [410], "/moved": [301]}) as hooks:
        listed = ["127.0.0.1"]
        ok = await post(f"{hooks.base_url}/ok", b"{}", {}, private_hosts=listed, timeout=5)
        assert ok.delivered and not ok.permanent
        busy = await post(f"{hooks.base_url}/busy", b"{}", {}, private_hosts=listed, timeout=5)
        assert not busy.delivered and not busy.permanent  # 429: later
        gone = await post(f"{hooks.base_url}/gone", b"{}", {}, private_hosts=listed, timeout=5)
        assert gone.permanent
        moved = await post(f"{hooks.base_url}/moved", b"{}", {}, private_hosts=listed, timeout=5)
        assert moved.permanent  # a redirect is not followed
        assert [d.path for d in hooks.deliveries("/ok")] == ["/ok"]


def test_subscriptions_are_the_agents_own_then_the_deployments() -> None:
    settings = Settings(THINK_WEBHOOK_URLS="https://all.example.com/hook", THINK_WEBHOOK_SECRET="s")
    res = ActivityResources(
        store=cast(Any, None), registry=AgentRegistry([Notified, Channeled]), settings=settings
    )
    hooks = WebhookActivities(res)
    notified = hooks.subscriptions("notified")
    assert [(s.url.rsplit("/", 1)[-1], s.secret_env) for s in notified] == [
        ("flaky", "THINK_TEST_WEBHOOK_SECRET"),
        ("reject", "THINK_TEST_WEBHOOK_SECRET"),
        ("hook", None),
    ]
    assert notified[1].events == frozenset({"turn.completed"})
    # An agent without webhooks of its own still gets the deployment's.
    assert [s.url for s in hooks.subscriptions("channeled")] == ["https://all.example.com/hook"]
    assert hooks.wanted("channeled") and not hooks.wanted("nobody") and not hooks.wanted("")
    assert not WebhookActivities(
        ActivityResources(cast(Any, None), AgentRegistry([Channeled]), Settings())
    ).wanted("channeled")


def test_a_webhook_declaration_is_checked() -> None:
    with pytest.raises(ValueError, match="only http and https"):
        Webhook(url="file:///etc/passwd", secret_env="S")
    with pytest.raises(ValueError, match=r"turn\.started"):
        Webhook(url="https://x.example.com", events=["turn.started"], secret_env="S")  # type: ignore[list-item]  # the refusal is the point
    with pytest.raises(WebhookError, match="not a Webhook"):
        checked_webhooks("Agent", ["https://x.example.com"])
