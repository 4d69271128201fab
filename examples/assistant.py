"""The bundled example agent: a model, a system prompt and two tools.

With no model configured it answers through Think's offline model; set OPENAI_BASE_URL and
OPENAI_API_KEY (any OpenAI-compatible endpoint) and the same class talks to a real model.
"""

from think import Think, Tool, tool


@tool
async def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city."""
    return {"city": city, "temp_c": 21, "conditions": "sunny"}


@tool(needs_approval=True)
async def delete_file(path: str) -> str:
    """Delete a file from the workspace."""
    return f"deleted {path}"


class Assistant(Think):
    """A helpful assistant that can look up the weather."""

    name = "assistant"

    def get_model(self) -> str:
        return "gpt-4o-mini"

    def get_system_prompt(self) -> str:
        return "You are a helpful assistant. Use tools when they help."

    def get_tools(self) -> list[Tool]:
        return [get_weather, delete_file]
