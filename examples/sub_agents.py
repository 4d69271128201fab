"""A lead agent that delegates research to a sub-agent (docs/sub-agents.md).

    THINK_AGENTS=examples.sub_agents:Lead think dev      # Researcher is hosted with Lead
    python -m examples.sub_agents [conversation-id]

`Lead`'s model calls the `research` tool; each call is a turn of `Researcher` in the child
conversation `lead.<conversation-id>.research`, streamed into the lead's stream while it runs.
`main()` then asks the same researcher directly, streaming its answer through a callback.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from think import StreamCallback, Think, ThinkService, Tool, agent_tool


class Researcher(Think):
    name = "researcher"
    description = "Researches a question and reports its findings."

    def get_system_prompt(self) -> str:
        return "You research and report findings."


class Lead(Think):
    name = "lead"

    def get_system_prompt(self) -> str:
        return "You lead a team. Delegate research with the research tool, then answer."

    def get_tools(self) -> list[Tool]:
        return [agent_tool(Researcher, name="research", description="Delegate a research task.")]


class Printer(StreamCallback):
    """Prints the child's answer as it streams (`chat()`'s callback)."""

    def on_start(self, request_id: str) -> None:
        print(f"researcher turn {request_id}:", end=" ")

    def on_event(self, chunk: dict[str, Any]) -> None:
        if chunk["type"] == "text-delta":
            print(chunk["delta"], end="", flush=True)

    def on_interrupted(self) -> None:
        print(" [retrying]", end=" ")  # the partial step is discarded; a retry owns it

    def on_done(self) -> None:
        print()

    def on_error(self, message: str) -> None:
        print(f"\nfailed: {message}")


async def main(conversation_id: str = "demo") -> None:
    async with await ThinkService.connect() as service:
        lead = service.conversation(Lead, conversation_id)
        result = await lead.run_turn("What should we know about Temporal?")
        for part in result.message.parts if result.message else []:
            if part["type"] == "tool-research" and "output" in part:
                found = part["output"]  # the child's turn: agent, conversation, status, text
                print(f"research ({found['status']}): {found['text']}")
                print(f"  drill in: /v1/agents/researcher/conversations/{found['conversation_id']}")
            elif part["type"] == "tool-research":
                print(f"research failed: {part.get('errorText')}")
            elif part["type"] == "text":
                print(f"lead: {part['text']}")
        # The same child, from application code: its conversation remembers the delegation.
        researcher = lead.sub_agent(Researcher, "research")
        await researcher.chat("And in one sentence?", Printer())


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
