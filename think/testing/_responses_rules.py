"""What OpenAI's Responses API refuses, as `FakeResponsesServer` checks it before playing a
reply: unknown parameters (`seed`, `stop`), a function tool whose schema is not strict while
`strict` is on (the default here), a `function_call_output` that answers no call, a reasoning
item handed back without what followed it, or, with `store` off, without its encrypted content,
encrypted content this fake did not issue, reasoning settings or encrypted content for a model
that does not reason, background mode without `store`. And the input as a script hears it."""

from __future__ import annotations

import base64
import json
from typing import Any

from think.testing._replies import Heard

_PARAMETERS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "temperature",
        "top_p",
        "top_logprobs",
        "max_output_tokens",
        "max_tool_calls",
        "reasoning",
        "text",
        "store",
        "include",
        "stream",
        "stream_options",
        "background",
        "metadata",
        "previous_response_id",
        "conversation",
        "prompt",
        "prompt_cache_key",
        "safety_identifier",
        "service_tier",
        "truncation",
        "user",
    }
)
_REASONING_MODELS = ("o1", "o3", "o4", "gpt-5", "codex")
_SEALED = "gAAAAB"
"""The prefix of the encrypted content this fake issues (Fernet's, as OpenAI's is)."""


class Refused(Exception):
    """What the real API would answer instead: status, message, param, code."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


def reasons(model: str) -> bool:
    return model.lower().startswith(_REASONING_MODELS)


def seal(item_id: str) -> str:
    """The encrypted content of reasoning item `item_id`, as this fake issues it."""
    return _SEALED + base64.urlsafe_b64encode(json.dumps({"item": item_id}).encode()).decode()


def unsealed(content: str) -> str | None:
    """The item id sealed in `content`, if this fake issued it."""
    if not content.startswith(_SEALED):
        return None
    try:
        found = json.loads(base64.urlsafe_b64decode(content.removeprefix(_SEALED)))
    except ValueError:
        return None
    return str(found.get("item")) if isinstance(found, dict) else None


def check(body: Any) -> None:
    """Raise `Refused` where the real API would refuse this request body."""
    if not isinstance(body, dict):
        raise Refused(400, "The request body must be a JSON object.")
    for name in body:
        if name not in _PARAMETERS:
            raise Refused(400, f"Unknown parameter: '{name}'.", name)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Refused(400, "Missing required parameter: 'model'.", "model")
    store = body.get("store", True) is not False
    if body.get("background") and not store:
        raise Refused(400, "Background mode requires `store` to be true.", "background")
    if not reasons(model):
        if body.get("reasoning"):
            raise Refused(
                400,
                "Unsupported parameter: 'reasoning' is not supported with this model.",
                "reasoning",
            )
        if "reasoning.encrypted_content" in (body.get("include") or []):
            raise Refused(400, "Encrypted content is not supported with this model.", "include")
    offered = _check_tools(body.get("tools") or [])
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("name") not in offered:
        raise Refused(
            400, f"Tool choice '{choice.get('name')}' not found in 'tools'.", "tool_choice"
        )
    items = body.get("input")
    if isinstance(items, str):
        return
    if not isinstance(items, list) or not items:
        raise Refused(400, "Missing required parameter: 'input'.", "input")
    _check_items(items, store)


def _check_tools(tools: list[Any]) -> set[str]:
    names: set[str] = set()
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function" or not tool.get("name"):
            raise Refused(400, f"Missing required parameter: 'tools[{index}].name'.")
        if tool.get("strict", True) and not _strict(tool.get("parameters") or {}):
            raise Refused(
                400,
                f"Invalid schema for function '{tool['name']}': In context=(), "
                "'additionalProperties' is required to be supplied and to be false.",
                f"tools[{index}].parameters",
            )
        names.add(str(tool["name"]))
    return names


def _strict(schema: dict[str, Any]) -> bool:
    if schema.get("type") != "object":
        return True
    properties = schema.get("properties") or {}
    return schema.get("additionalProperties") is False and set(schema.get("required") or []) == set(
        properties
    )


def _check_items(items: list[Any], store: bool) -> None:
    calls: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise Refused(400, f"Invalid type for 'input[{index}]': expected an object.")
        kind = item.get("type") or "message"
        if kind == "function_call":
            calls.add(str(item.get("call_id")))
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                raise Refused(
                    400,
                    "No tool call found for function call output with call_id "
                    f"{item.get('call_id')}.",
                    "input",
                )
        elif kind == "reasoning":
            _check_reasoning(item, items[index + 1 :], store)
        elif kind == "message":
            if item.get("role") not in ("user", "assistant", "system", "developer"):
                raise Refused(400, f"Invalid value: '{item.get('role')}'.", f"input[{index}].role")
        else:
            raise Refused(400, f"Invalid value: '{kind}'.", f"input[{index}].type")


def _check_reasoning(item: dict[str, Any], rest: list[Any], store: bool) -> None:
    item_id = str(item.get("id"))
    sealed = item.get("encrypted_content")
    if sealed is not None:
        if not isinstance(sealed, str) or unsealed(sealed) != item_id:
            raise Refused(400, f"The encrypted content for item {item_id} could not be verified.")
    elif not store:
        raise Refused(
            404,
            f"Item with id '{item_id}' not found. Items are not persisted when `store` is set "
            "to false. Try again with `store` set to true, or remove this item from your input.",
            "input",
        )
    following = rest[0] if rest else None
    if not (
        isinstance(following, dict)
        and (
            following.get("type") == "function_call"
            or following.get("role") == "assistant"
            or following.get("type") == "reasoning"
        )
    ):
        raise Refused(
            400,
            f"Item '{item_id}' of type 'reasoning' was provided without its required following "
            "item.",
            "input",
        )


def heard(body: dict[str, Any]) -> Heard:
    """The input as the scripts hear it: each message's text, in Chat Completions' shape."""
    items = body.get("input")
    if isinstance(items, str):
        return Heard.of([{"role": "user", "content": items}])
    chat: list[dict[str, Any]] = []
    for item in items or []:
        kind = item.get("type") or "message"
        if kind == "function_call_output":
            chat.append({"role": "tool", "content": str(item.get("output", ""))})
        elif kind == "message":
            content = item.get("content")
            if isinstance(content, list):
                content = "\n".join(str(p.get("text", "")) for p in content if "text" in p)
            chat.append({"role": item.get("role"), "content": content or ""})
    return Heard.of(chat)
