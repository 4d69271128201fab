"""Declaring actions: mistakes are found where the action is declared, in words that say what
to write instead; the key, the input hash and the model's view of a result behave."""

from __future__ import annotations

from typing import Any

import pytest

from think import Think, UserError, action, attach_reply
from think.tools import Action, collecting_attachments, input_hash


def _refund(order_id: str, amount: float) -> dict[str, Any]:
    """Refund."""
    return {}


def test_an_action_needs_a_key() -> None:
    with pytest.raises(UserError, match="needs a key"):
        action()(_refund)  # type: ignore[call-overload]
    with pytest.raises(UserError, match="needs a key"):
        action(_refund)  # type: ignore[call-overload]


def test_the_key_function_takes_only_the_actions_parameters() -> None:
    with pytest.raises(UserError, match=r"'customer'.*not one of the action's parameters"):
        action(key=lambda customer: f"refund:{customer}")(_refund)


def test_a_durable_pause_needs_approval_and_kinds_are_checked() -> None:
    with pytest.raises(UserError, match="set needs_approval=True"):
        action(key=lambda order_id: order_id, approval="durable_pause")(_refund)
    with pytest.raises(UserError, match="'inline' or 'durable_pause'"):
        action(key=lambda order_id: order_id, approval="later")(_refund)  # type: ignore[typeddict-item]
    with pytest.raises(UserError, match="max_output_chars=10 must be at least 100"):
        action(key=lambda order_id: order_id, max_output_chars=10)(_refund)


def test_keys_and_input_hashes() -> None:
    refund = action(key=lambda order_id: f"refund:{order_id}")(_refund)
    arguments = refund.validate({"order_id": "42", "amount": "3"})
    assert refund.key_of(arguments) == "refund:42"
    assert input_hash(arguments) == input_hash({"amount": 3.0, "order_id": "42"})
    assert input_hash(arguments) != input_hash({"order_id": "42", "amount": 4.0})
    empty = action(key=lambda order_id: "")(_refund)
    with pytest.raises(UserError, match="must return a non-empty string"):
        empty.key_of(arguments)
    broken = action(key=lambda order_id: order_id["x"])(_refund)
    with pytest.raises(UserError, match="key function of action '_refund' raised TypeError"):
        broken.key_of(arguments)


def test_the_model_reads_a_cut_result_with_a_note() -> None:
    refund = action(key=lambda order_id: order_id, max_output_chars=100)(_refund)
    assert refund.model_view({"ok": True}) == {"ok": True}
    view = refund.model_view({"rows": ["x" * 50] * 10})
    assert isinstance(view, str)
    assert view.startswith('{"rows": ["xxxx')
    assert "[truncated:" in view


def test_attach_reply_works_only_inside_an_action_run() -> None:
    with pytest.raises(UserError, match="only inside an @action"):
        attach_reply(b"x", media_type="text/plain")
    with collecting_attachments() as found:
        attach_reply("hi", media_type="text/plain", filename="a.txt")
        with pytest.raises(UserError, match="https:// URL"):
            attach_reply(url="http://example.test/a", media_type="text/plain")
    assert found == [
        {"url": "data:text/plain;base64,aGk=", "mediaType": "text/plain", "filename": "a.txt"}
    ]


def test_actions_join_the_agents_tools_and_an_agent_refuses_permissions_by_default() -> None:
    refund = action(key=lambda order_id: order_id, permission="refunds")(_refund)

    class Agent(Think):
        name = "declared"

        def get_actions(self) -> list[Action]:
            return [refund]

    assert Agent().tools_by_name()["_refund"] is refund
    from think import ActionContext

    ctx = ActionContext(
        tenant="t",
        agent="declared",
        conversation_id="c",
        turn_id=None,
        tool_call_id=None,
        key_name=None,
        action="_refund",
        key="1",
        input={},
        permission="refunds",
        stage="before_execute",
    )
    refusal = Agent().authorize_action(ctx)
    assert isinstance(refusal, str) and "needs the permission 'refunds'" in refusal
    assert Agent().authorize_action(ctx.model_copy(update={"permission": None})) is True
