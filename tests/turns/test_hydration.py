"""The hydration budget (`Think.hydration_byte_budget`): a model step reads the newest messages
whose stored sizes (`messages.byte_size`) fit the budget; older ones stay in storage only."""

from __future__ import annotations

import json

from tests.agents import Forgetful
from think import ThinkService, UIMessage
from think.testing import FakeOpenAIServer, text


def message(i: int) -> UIMessage:
    """130 stored bytes: a user message when `i` is even, an assistant's when odd."""
    role = "user" if i % 2 == 0 else "assistant"
    return UIMessage(id=f"m{i}", role=role, parts=[{"type": "text", "text": role[0] * 100}])


async def seeded(service: ThinkService, cid: str, *first: UIMessage) -> str:
    conv = service.conversation(Forgetful, cid)
    await conv.add_messages([*first, *(message(i) for i in range(10))])
    found = await service.store.get_conversation(
        tenant="default", agent=Forgetful.name, conversation_id=cid
    )
    assert found is not None
    return found.uid


async def test_the_path_within_a_budget(service: ThinkService, cid: str) -> None:
    assert len(json.dumps(message(0).parts)) == 130
    uid = await seeded(service, cid)
    store = service.store

    async def ids(leaf: str, budget: int | None) -> list[str]:
        return [m.id for m in await store.path(uid, leaf, byte_budget=budget)]

    everything = [f"m{i}" for i in range(10)]
    assert await ids("m9", None) == everything
    assert await ids("m9", 10_000) == everything
    assert await ids("m9", 1300) == everything  # exactly the budget
    assert await ids("m9", 1299) == everything[2:]  # m0 out, so m1 (its answer) too
    assert await ids("m9", 300) == ["m8", "m9"]
    # 390 bytes would start the window at an assistant's answer: it starts at a question.
    assert await ids("m9", 400) == ["m8", "m9"]
    assert await ids("m8", 400) == ["m6", "m7", "m8"]
    # The leaf is kept, whatever its size.
    assert await ids("m9", 10) == ["m9"]


async def test_a_system_message_at_the_root_is_kept(service: ThinkService, cid: str) -> None:
    rules = UIMessage(id="rules", role="system", parts=[{"type": "text", "text": "x" * 500}])
    uid = await seeded(service, cid, rules)
    path = await service.store.path(uid, "m9", byte_budget=300)
    assert [m.id for m in path] == ["rules", "m8", "m9"]


async def test_the_model_reads_only_the_newest_messages(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    await seeded(service, cid)
    fake_model.script(cid, text("ok"))
    conv = service.conversation(Forgetful, cid)
    assert (await conv.run_turn("last?")).status == "completed"
    sent = fake_model.requests(cid)[0]["body"]["messages"]
    # 35 bytes of question, then 130 for each older message while the 400 last.
    assert sent == [
        {"role": "system", "content": "You are a test agent."},
        {"role": "user", "content": "u" * 100},
        {"role": "assistant", "content": "a" * 100},
        {"role": "user", "content": "last?"},
    ]
    assert len(await conv.messages()) == 12  # storage keeps them all
