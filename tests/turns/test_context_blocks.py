"""Context blocks (`configure_context`): memory the model writes with `set_context`, a system
prompt frozen per conversation (byte-identical across turns), reminders of changed "remind"
blocks after the cached prefix, and rebuilds. The `remembering` agent in tests/agents.py
declares the blocks; what the model received is read back from the fake model."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.agents import Helper, Remembering
from think import ContextBlock, ThinkService, Tool, UserError, tool
from think.sessions._context_blocks import SET_CONTEXT, check_write, render_prompt
from think.storage._compactions import insert_summary
from think.testing import FakeOpenAIServer, text, tool_call


def bodies(fake_model: FakeOpenAIServer, cid: str) -> list[dict[str, Any]]:
    return [r["body"] for r in fake_model.requests(cid)]


def system_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


async def frozen_prompt(engine: AsyncEngine, cid: str) -> str | None:
    async with engine.connect() as conn:
        row = await conn.execute(
            sql("SELECT system_prompt FROM conversations WHERE id = :id"), {"id": cid}
        )
        value: str | None = row.scalar_one()
        return value


async def test_memory_written_by_the_model_is_in_the_next_turns_prompt(
    service: ThinkService, fake_model: FakeOpenAIServer, engine: AsyncEngine, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call(SET_CONTEXT, {"label": "memory", "content": "The user is Ada."}, id="c1"),
        text("Noted."),
        text("Hello Ada."),
        text("Still here."),
    )
    conv = service.conversation(Remembering, cid)
    assert (await conv.run_turn("I am Ada.")).status == "completed"
    assert (await conv.run_turn("Who am I?")).status == "completed"
    assert (await conv.run_turn("And now?")).status == "completed"

    first, second, third, fourth = bodies(fake_model, cid)
    # The prompt: the agent's instructions, then each block with content.
    prompt = system_of(first)
    assert prompt.startswith("You are a test agent with a memory.\n\n")
    assert '<context_block label="soul">\nBe terse.\n</context_block>' in prompt
    assert '<context_block label="clock">\nnow: ' in prompt
    assert "Ada" not in prompt and 'label="memory"' not in prompt  # empty: left out
    set_context = next(t for t in first["tools"] if t["function"]["name"] == SET_CONTEXT)
    assert (
        "'memory' (at most 20 tokens): Facts about the user"
        in set_context["function"]["description"]
    )
    # The same turn's next step keeps the prompt; the tool says when the memory shows.
    assert system_of(second) == prompt
    assert second["messages"][-1]["content"].startswith("Saved 'memory' (4 of 20 tokens)")
    # The next turn's prompt holds the memory: rebuilt once, so the clock moved too.
    rebuilt = system_of(third)
    assert (
        '<context_block label="memory" description="Facts about the user" tokens="4 of 20" '
        'writable_with="set_context">\nThe user is Ada.\n</context_block>'
    ) in rebuilt
    assert rebuilt.split("now: ")[1] != prompt.split("now: ")[1]
    # From then on byte-identical, though the clock block changes on every read.
    assert system_of(fourth) == rebuilt
    assert await frozen_prompt(engine, cid) == rebuilt
    assert await conv.get_context() == {"memory": "The user is Ada."}
    # Every request extends the one before it: the prefix a provider caches.
    assert fourth["messages"][: len(third["messages"])] == third["messages"]


async def test_set_context_refuses_what_does_not_fit(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call(SET_CONTEXT, {"label": "memory", "content": "x" * 200}, id="c1"),
        tool_call(SET_CONTEXT, {"label": "soul", "content": "Be rude."}, id="c2"),
        text("I could not."),
    )
    conv = service.conversation(Remembering, cid)
    assert (await conv.run_turn("Remember a lot.")).status == "completed"
    results = [m["content"] for m in bodies(fake_model, cid)[2]["messages"] if m["role"] == "tool"]
    assert results == [
        "Error: the content is about 50 tokens, but the block 'memory' holds at most 20: "
        "shorten it (keep what matters most) and write it again",
        "Error: there is no memory block 'soul'; the blocks you can write are: 'memory'",
    ]
    assert await conv.get_context() == {}
    with pytest.raises(UserError, match="holds at most 20"):
        await conv.set_context("memory", "x" * 200)
    await conv.set_context("memory", "Short.")
    assert await conv.get_context() == {"memory": "Short."}


async def test_a_changed_remind_block_comes_after_the_cached_prefix(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    conv = service.conversation(Remembering, cid)
    await conv.configure({"news": "Rain."})
    fake_model.script(
        cid,
        text("Noted."),
        tool_call(SET_CONTEXT, {"label": "memory", "content": "Likes sun."}, id="c1"),
        text("Good news."),
        text("Sunny."),
        text("Snowy."),
    )
    await conv.run_turn("Weather?")
    await conv.configure({"news": "Sun."})
    await conv.run_turn("And now?")
    # The memory write asks for a rebuild: the next turn folds the news in.
    await conv.run_turn("Still?")
    await conv.configure({"news": "Snow."})
    await conv.rebuild_system_prompt()
    await conv.run_turn("Later?")

    first, second, third, fourth, fifth = bodies(fake_model, cid)
    prompt = system_of(first)
    assert '<context_block label="news" description="Latest news">\nRain.\n</context_block>' in (
        prompt
    )
    # The news changed: same system prompt, and a reminder after the newest user message.
    assert system_of(second) == prompt
    *history, question, reminder = second["messages"]
    assert history == [*first["messages"], {"role": "assistant", "content": "Noted."}]
    assert question == {"role": "user", "content": "And now?"}
    assert reminder["role"] == "user"
    assert reminder["content"].startswith("<system-reminder>\n")
    assert "Sun." in reminder["content"] and "Rain." not in reminder["content"]
    # The step after the tool call keeps it in place: the request extends the one before.
    assert third["messages"][: len(second["messages"])] == second["messages"]
    assert system_of(third) == prompt
    # Rebuilt (the memory was written): both the memory and the news in, no reminder.
    assert "Likes sun." in system_of(fourth) and "Sun." in system_of(fourth)
    assert fourth["messages"][-1] == {"role": "user", "content": "Still?"}
    # `rebuild_system_prompt()`: the next step builds it from the blocks as they are.
    assert "Snow." in system_of(fifth) and "Sun." not in system_of(fifth)
    assert fifth["messages"][-1] == {"role": "user", "content": "Later?"}


async def test_a_failing_provider_ends_the_turn_with_an_error(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    conv = service.conversation(Remembering, cid)
    await conv.configure({"explode": True})
    result = await conv.run_turn("Hello?")
    assert result.status == "error"
    assert fake_model.calls(cid) == 0


async def test_an_agent_without_blocks_sends_its_prompt_as_it_is(
    service: ThinkService, fake_model: FakeOpenAIServer, engine: AsyncEngine, cid: str
) -> None:
    fake_model.script(cid, text("Hi."))
    await service.conversation("helper", cid).run_turn("Hello")
    assert system_of(bodies(fake_model, cid)[0]) == "You are a test agent."
    tools = [t["function"]["name"] for t in bodies(fake_model, cid)[0].get("tools", [])]
    assert SET_CONTEXT not in tools
    assert await frozen_prompt(engine, cid) is None


def test_the_set_context_tool_comes_with_memory_blocks() -> None:
    assert SET_CONTEXT not in Helper().tools_by_name()
    tools = Remembering().tools_by_name()
    assert SET_CONTEXT in tools
    params = tools[SET_CONTEXT].spec.parameters
    assert sorted(params["properties"]) == ["content", "label"]
    assert params["required"] == ["label", "content"]

    @tool(name=SET_CONTEXT)
    def own(label: str) -> str:
        """The agent's own."""
        return label

    class Own(Remembering):
        def get_tools(self) -> list[Tool]:
            return [own]

    assert Own().tools_by_name()[SET_CONTEXT] is own  # an agent's own tool wins


def test_blocks_are_checked() -> None:
    with pytest.raises(UserError, match="label"):
        ContextBlock("two words")
    with pytest.raises(UserError, match="max_tokens"):
        ContextBlock("memory", max_tokens=0)
    with pytest.raises(UserError, match="when_changed"):
        ContextBlock("memory", when_changed="always")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="provider"):
        ContextBlock("memory", provider="text")  # type: ignore[arg-type]

    class Twice(Helper):
        def configure_context(self) -> list[ContextBlock]:
            return [ContextBlock("a"), ContextBlock("a")]

    with pytest.raises(UserError, match="used twice"):
        Twice().tools_by_name()
    notes = ContextBlock("notes", 'Say "hi"', max_tokens=3)
    blocks = [notes, ContextBlock("soul", provider=lambda: "")]
    assert check_write(blocks, "notes", "x" * 12) is None
    assert "holds at most 3" in (check_write(blocks, "notes", "x" * 13) or "")
    assert render_prompt("", blocks, {"notes": "x", "soul": ""}) == (
        '<context_block label="notes" description="Say &quot;hi&quot;" tokens="1 of 3" '
        'writable_with="set_context">\nx\n</context_block>'
    )


async def test_a_compaction_rebuilds_the_prompt(
    service: ThinkService, fake_model: FakeOpenAIServer, engine: AsyncEngine, cid: str
) -> None:
    fake_model.script(cid, text("One."), text("Two."))
    conv = service.conversation(Remembering, cid)
    await conv.run_turn("First.")
    before = await frozen_prompt(engine, cid)
    assert before is not None
    messages = await conv.messages()
    found = await service.store.get_conversation(
        tenant="default", agent=Remembering.name, conversation_id=cid
    )
    assert found is not None
    async with service.store.db.transaction() as conn:
        stored = await insert_summary(
            conn,
            found.uid,
            first_message_id=messages[0].id,
            last_message_id=messages[-1].id,
            summary="They said hello.",
            tokens_before=10,
            tokens_after=5,
            trigger="manual",
            turn_id=None,
        )
    assert stored is not None
    assert await frozen_prompt(engine, cid) is None
    await conv.run_turn("Second.")
    rebuilt = system_of(bodies(fake_model, cid)[1])
    assert rebuilt != before and rebuilt.split("now: ")[0] == before.split("now: ")[0]
    assert await frozen_prompt(engine, cid) == rebuilt
