"""The one function that makes text storable (`think._messages.storable`), the `jsonb`
backstop (`think.storage._db.storable_json`) and how the adapter reads list-typed `content`:
the pieces tests/storage/test_hostile_content.py drives end to end, each alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from think._messages import storable, storable_text
from think.models._base import ReasoningDelta, TextDelta
from think.models._openai import OpenAIStreamState
from think.storage._db import storable_json

EMOJI = "\U0001f600"


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("a\x00b", "a\ufffdb"),
        ("\x00\x00", "\ufffd\ufffd"),
        ("a\ud800b", "a\ufffdb"),
        ("a\udfffb", "a\ufffdb"),
        ("\udfff\ud800", "\ufffd\ufffd"),  # a low then a high surrogate is no pair
        ("\ud83d\ude00", EMOJI),  # a pair held as two code points is the character it spells
        (f"é\x00{EMOJI}\ud800", f"é\ufffd{EMOJI}\ufffd"),
    ],
)
def test_nul_and_lone_surrogates_become_the_replacement_character(given: str, stored: str) -> None:
    assert storable_text(given) == stored
    stored.encode("utf-8")  # what psycopg must do with it


@pytest.mark.parametrize("text", ["", "plain ascii", "café", EMOJI, "\ufffd", "\\u0000 as text"])
def test_storable_text_is_returned_as_the_same_object(text: str) -> None:
    assert storable_text(text) is text


def test_json_data_is_replaced_keys_and_all_and_unchanged_data_is_not_copied() -> None:
    fine: dict[str, Any] = {"a": [1, 2.5, None, True, {"b": EMOJI}], "c": ("d",)}
    assert storable(fine) is fine
    hostile = {"k\x00": ["x", {"y": "\ud800"}], "same": fine}
    assert storable(hostile) == {"k\ufffd": ["x", {"y": "\ufffd"}], "same": fine}
    assert storable(hostile)["same"] is fine
    assert hostile == {"k\x00": ["x", {"y": "\ud800"}], "same": fine}  # not changed in place


def test_a_container_that_holds_itself_or_nests_deeply_is_walked_without_recursing_for_ever() -> (
    None
):
    """A tool may return a list that holds itself (pydantic writes it as `[[...]]`) or data
    nested deeper than Python's recursion limit: neither may raise `RecursionError` here."""
    circular: list[Any] = ["a\x00"]
    circular.append(circular)
    cleaned = storable(circular)
    assert cleaned[0] == "a\ufffd" and cleaned[1] is circular  # the cycle is left as it is
    deep: list[Any] = ["ok"]
    for _ in range(5_000):
        deep = [deep]
    assert storable(deep) is deep
    shallow_nul: dict[str, Any] = {"x": [[["\x00"]]]}
    assert storable(shallow_nul) == {"x": [[["\ufffd"]]]}


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ({"a": "x\x00"}, {"a": "x\ufffd"}),
        (["\ud800", EMOJI], ["\ufffd", EMOJI]),
        ({"n": float("nan"), "i": float("inf")}, {"n": None, "i": None}),
    ],
)
def test_the_jsonb_backstop_stores_what_postgres_would_refuse(value: Any, stored: Any) -> None:
    encoded = storable_json(value)
    assert "\\u0000" not in encoded and "NaN" not in encoded and "Infinity" not in encoded
    assert json.loads(encoded) == stored


@pytest.mark.parametrize("value", [{"a": EMOJI}, ["\\ud800 and \\u0000 as text"], [1.5, None]])
def test_the_backstop_leaves_storable_json_as_json_dumps_makes_it(value: Any) -> None:
    assert storable_json(value) == json.dumps(value)


def chunk(delta: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta}]}


def test_list_typed_content_is_text_and_reasoning_in_order() -> None:
    """Mistral's reasoning models: `content` as parts; unknown parts and shapes are skipped."""
    state = OpenAIStreamState()
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Hmm."}]}
    events = state.feed(
        chunk(
            {
                "content": [
                    thinking,
                    {"type": "text", "text": "Hi"},
                    {"type": "reference", "ids": [1]},
                    {"type": "text", "text": 5},
                    "not a part",
                    {"type": "thinking", "thinking": "Plain."},
                ]
            }
        )
    )
    assert events == [
        ReasoningDelta(delta="Hmm."),
        TextDelta(delta="Hi"),
        ReasoningDelta(delta="Plain."),
    ]


@pytest.mark.parametrize(
    "delta",
    [
        {"content": {"type": "text"}},
        {"content": 5},
        {"refusal": ["no"]},
        {"tool_calls": [{"index": 0, "id": 7, "function": {"name": ["x"], "arguments": {}}}]},
    ],
)
def test_a_delta_of_an_unexpected_shape_is_skipped_not_raised(delta: dict[str, Any]) -> None:
    """Before, a non-string `content` raised pydantic's ValidationError, which the step's
    retries met again on every attempt."""
    OpenAIStreamState().feed(chunk(delta))
