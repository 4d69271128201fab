"""Structured output at the model layer: the schema the model sees, and the answer coming back."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any, Generic, Literal, TypeVar

import pytest
from pydantic import BaseModel, Field, ValidationError

from think.exceptions import OutputValidationError, ThinkError, UserError
from think.models import (
    ModelClient,
    ModelEvent,
    ModelRequest,
    OfflineModel,
    OpenAIModel,
    OutputSpec,
    TextDelta,
    output_spec,
    strict_json_schema,
    supports_native_output,
    validate_output,
)
from think.testing import FakeOpenAIServer, ScriptedModel, text

T = TypeVar("T")


class Address(BaseModel):
    city: str
    postcode: str | None = None


class Person(BaseModel):
    """Someone the answer is about."""

    name: str = Field(description="Full name")
    age: int
    nickname: str | None = None
    score: int = 7
    home: Address = Field(description="Where they live")
    previous: list[Address] = []
    role: Literal["admin", "user"] = "user"


class Node(BaseModel):
    label: str
    children: list[Node] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Pet(BaseModel):
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]


class Page(BaseModel, Generic[T]):
    items: list[T]


class Tagged(BaseModel):
    tags: dict[str, int]


PERSON = {
    "name": "Ada Lovelace",
    "age": 36,
    "nickname": None,
    "score": None,
    "home": {"city": "London", "postcode": None},
    "previous": None,
    "role": None,
}


def objects(schema: Any) -> Iterator[dict[str, Any]]:
    """Every object schema inside `schema`."""
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            yield schema
        for value in schema.values():
            yield from objects(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from objects(value)


def keys(schema: Any) -> set[str]:
    """Every key used anywhere in `schema`, property names excluded."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key in ("properties", "$defs"):
                for sub in value.values():
                    found |= keys(sub)
            else:
                found |= keys(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= keys(value)
    return found


# --- the schema the model sees ---


def test_a_pydantic_model_becomes_a_strict_spec_named_after_the_class() -> None:
    spec = output_spec(Person)
    assert (spec.name, spec.strict) == ("Person", True)
    schema = spec.json_schema
    assert schema["type"] == "object"
    assert schema["description"] == "Someone the answer is about."
    for obj in objects(schema):
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    assert not {"title", "default"} & keys(schema)
    properties = schema["properties"]
    # Required fields stay as they were, optional ones become required and nullable.
    assert properties["age"] == {"type": "integer"}
    assert properties["name"] == {"type": "string", "description": "Full name"}
    assert properties["score"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert properties["nickname"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert properties["role"] == {
        "anyOf": [{"enum": ["admin", "user"], "type": "string"}, {"type": "null"}]
    }
    # The nested model stays a definition; a `$ref` with a description moves into `anyOf`.
    assert properties["home"] == {
        "anyOf": [{"$ref": "#/$defs/Address"}],
        "description": "Where they live",
    }
    assert schema["$defs"]["Address"] == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "postcode": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["city", "postcode"],
        "additionalProperties": False,
    }


def test_strict_json_schema_leaves_its_input_alone() -> None:
    original = Person.model_json_schema()
    before = copy.deepcopy(original)
    strict = strict_json_schema(original)
    assert original == before
    assert strict != original


def test_a_recursive_model_is_inlined_at_the_root() -> None:
    schema = output_spec(Node).json_schema
    assert "$ref" not in schema
    assert schema["type"] == "object"
    assert "$defs" not in schema
    children = schema["properties"]["children"]
    assert children == {"anyOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "null"}]}


def test_a_discriminated_union_becomes_any_of() -> None:
    schema = output_spec(Pet).json_schema
    assert "oneOf" not in keys(schema) and "discriminator" not in keys(schema)
    assert schema["properties"]["pet"] == {
        "anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]
    }
    assert validate_output(Pet, '{"pet": {"kind": "dog", "good": true}}') == Pet(
        pet=Dog(kind="dog", good=True)
    )


def test_keywords_strict_mode_rejects_become_hints_but_are_still_enforced() -> None:
    class Short(BaseModel):
        word: str = Field(max_length=5, description="One word")

    spec = output_spec(Short)
    assert spec.strict
    assert spec.json_schema["properties"]["word"] == {
        "type": "string",
        "description": "One word (maxLength=5)",
    }
    with pytest.raises(OutputValidationError, match="word: String should have at most 5"):
        validate_output(Short, '{"word": "antidisestablishmentarianism"}')


def test_a_generic_model_gets_a_name_openai_accepts() -> None:
    assert output_spec(Page[int]).name == "Page_int_"
    assert output_spec(Person, name="final answer").name == "final_answer"


@pytest.mark.parametrize(
    ("output", "why"),
    [
        (Tagged, "free-form dict"),
        (
            {"type": "object", "properties": {"a": {}}, "additionalProperties": True},
            "'additionalProperties' True cannot be strict",
        ),
        ({"type": "array", "items": {"type": "string"}}, "root must be an object"),
        ({"type": "object", "properties": {"any": {"type": "object"}}}, "free-form"),
        ({"type": "object", "properties": {"xs": {"type": "array"}}}, "typed 'items'"),
        (
            {"type": "object", "properties": {"x": {"not": {"type": "null"}}}},
            "'not' has no strict-mode equivalent",
        ),
    ],
)
def test_schemas_strict_mode_cannot_express_are_sent_as_they_are(
    output: type[BaseModel] | dict[str, Any], why: str
) -> None:
    schema = output if isinstance(output, dict) else output.model_json_schema()
    with pytest.raises(ValueError, match=why):
        strict_json_schema(schema)
    spec = output_spec(output)
    assert spec.strict is False
    assert spec.json_schema == schema
    with pytest.raises(UserError, match="cannot use strict mode"):
        output_spec(output, strict=True)


def test_strict_can_be_turned_off() -> None:
    spec = output_spec(Person, strict=False)
    assert spec == OutputSpec(name="Person", schema=Person.model_json_schema(), strict=False)


def test_a_plain_json_schema_is_named_output_and_made_strict() -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
        "required": ["answer"],
    }
    spec = output_spec(schema)
    assert (spec.name, spec.strict) == ("output", True)
    assert spec.json_schema == {
        "type": "object",
        "properties": {
            "answer": {"type": "string"},
            "confidence": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        },
        "required": ["answer", "confidence"],
        "additionalProperties": False,
    }
    assert "additionalProperties" not in schema  # the caller's dict is untouched


def test_a_malformed_json_schema_or_another_object_is_a_user_error() -> None:
    with pytest.raises(UserError, match="not a valid JSON Schema"):
        output_spec({"type": "objekt"})
    with pytest.raises(UserError, match="pydantic model class or a JSON Schema dict"):
        output_spec(42)  # type: ignore[arg-type]  # the mistake under test

    class Hook(BaseModel):
        callback: Callable[[], int]

    with pytest.raises(UserError, match="output 'Hook' has no JSON Schema"):
        output_spec(Hook)


def test_output_spec_is_frozen_and_round_trips_as_schema() -> None:
    spec = output_spec(Address)
    dumped = spec.model_dump()
    assert set(dumped) == {"name", "schema", "strict"}
    assert OutputSpec.model_validate(dumped) == spec
    assert OutputSpec.model_validate_json(spec.model_dump_json()) == spec
    with pytest.raises(ValidationError):
        spec.strict = False  # type: ignore[misc]  # frozen, which is what is being tested


# --- the answer coming back ---


def test_a_valid_answer_becomes_the_model_with_defaults_for_nulls() -> None:
    person = validate_output(Person, json.dumps(PERSON))
    assert person == Person(
        name="Ada Lovelace", age=36, home=Address(city="London"), score=7, role="user"
    )
    assert person.previous == [] and person.nickname is None


def test_nested_models_and_lists_are_validated_in_depth() -> None:
    answer = {**PERSON, "previous": [{"city": "Paris", "postcode": "75001"}, {"city": "Rome"}]}
    person = validate_output(Person, json.dumps(answer))
    assert person.previous == [Address(city="Paris", postcode="75001"), Address(city="Rome")]
    tree = validate_output(Node, '{"label": "a", "children": [{"label": "b", "children": null}]}')
    assert tree == Node(label="a", children=[Node(label="b")])


def test_null_is_kept_where_the_schema_accepts_it() -> None:
    class Maybe(BaseModel):
        value: int | None = 5

    assert validate_output(Maybe, '{"value": null}') == Maybe(value=None)
    assert validate_output(Maybe, "{}") == Maybe(value=5)


def test_null_for_a_required_field_is_still_an_error() -> None:
    with pytest.raises(OutputValidationError, match="age: Input should be a valid integer"):
        validate_output(Person, json.dumps({**PERSON, "age": None}))


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ('{"name": "Ada", "age": "old"', "the answer is not valid JSON: Expecting ',' delimiter"),
        ("I'm sorry, I can't help with that.", "it begins \"I'm sorry, I can't help"),
        ("", "the answer is not valid JSON: it is empty"),
        ("   \n", "the answer is not valid JSON: it is empty"),
    ],
)
def test_an_answer_that_is_not_json_says_so(answer: str, message: str) -> None:
    with pytest.raises(OutputValidationError) as caught:
        validate_output(Person, answer)
    assert message in str(caught.value)
    assert caught.value.text == answer
    assert isinstance(caught.value, ThinkError) and not isinstance(caught.value, UserError)


def test_an_answer_that_does_not_match_names_each_problem() -> None:
    answer = {**PERSON, "age": "old", "home": {"postcode": "N1"}}
    with pytest.raises(OutputValidationError) as caught:
        validate_output(Person, json.dumps(answer))
    message = str(caught.value)
    assert message.startswith("the answer does not match the schema: ")
    assert "age: Input should be a valid integer" in message
    assert "home.city: Field required" in message


def test_many_problems_are_summarised() -> None:
    class Wide(BaseModel):
        a: int
        b: int
        c: int
        d: int
        e: int
        f: int
        g: int

    with pytest.raises(OutputValidationError, match=r"\(and 2 more\)$"):
        validate_output(Wide, "{}")


def test_a_code_fence_around_the_json_is_tolerated() -> None:
    fenced = "```json\n" + json.dumps({"city": "Oslo", "postcode": None}) + "\n```"
    assert validate_output(Address, fenced) == Address(city="Oslo")


def test_a_plain_json_schema_answer_is_checked_with_jsonschema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "answer": {"type": "string"},
            "confidence": {"type": "number", "maximum": 1},
            "sources": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["answer"],
        "additionalProperties": False,
    }
    assert validate_output(schema, '{"answer": "42", "confidence": null, "sources": ["a"]}') == {
        "answer": "42",
        "sources": ["a"],
    }
    with pytest.raises(OutputValidationError) as caught:
        validate_output(schema, '{"answer": 42, "confidence": 3, "sources": [1]}')
    message = str(caught.value)
    assert message.startswith("the answer does not match the schema: ")
    assert "answer: 42 is not of type 'string'" in message
    assert "confidence: 3 is greater than the maximum of 1" in message
    assert "sources.0: 1 is not of type 'string'" in message
    with pytest.raises(OutputValidationError, match="'answer' is a required property"):
        validate_output(schema, "{}")
    with pytest.raises(OutputValidationError, match="not valid JSON"):
        validate_output(schema, "{answer: 42}")


def test_a_plain_json_schema_with_defs_resolves_refs_when_dropping_nulls() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Item": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["sku"],
            }
        },
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
        "required": ["items"],
    }
    answer = '{"items": [{"sku": "A", "qty": null}, {"sku": "B", "qty": 2}]}'
    assert validate_output(schema, answer) == {"items": [{"sku": "A"}, {"sku": "B", "qty": 2}]}


# --- which clients do it natively ---


class ThirdPartyModel:
    """A client written before `supports_native_output` existed."""

    @property
    def name(self) -> str:
        return "third-party"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta(delta="{}")


def test_which_clients_support_native_output() -> None:
    old: ModelClient = ThirdPartyModel()  # still type-checks as a ModelClient
    assert isinstance(old, ModelClient)
    assert supports_native_output(old) is False
    assert supports_native_output(OfflineModel()) is False
    assert supports_native_output(ScriptedModel()) is True
    assert supports_native_output(ScriptedModel(native_output=False)) is False
    assert supports_native_output(OpenAIModel("m")) is True
    assert supports_native_output(OpenAIModel("m", native_output=False)) is False


# --- over HTTP ---


async def ask(model: ModelClient, conversation: str, spec: OutputSpec | None) -> str:
    request = ModelRequest(
        model=model.name,
        messages=[{"role": "user", "content": "Who wrote the first program?"}],
        metadata={"conversation-id": conversation},
        output=spec,
    )
    return "".join([e.delta async for e in model.stream(request) if isinstance(e, TextDelta)])


async def test_openai_model_sends_response_format_and_the_answer_validates(
    server: FakeOpenAIServer, pooled_clients: None
) -> None:
    model = OpenAIModel("fake-model", base_url=server.base_url, api_key="k")
    spec = output_spec(Person)
    server.script("so-native", text(json.dumps(PERSON)))
    answer = await ask(model, "so-native", spec)
    [recorded] = server.requests("so-native")
    assert recorded["body"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Person", "schema": spec.json_schema, "strict": True},
    }
    assert validate_output(Person, answer).name == "Ada Lovelace"


async def test_openai_model_without_native_output_sends_no_response_format(
    server: FakeOpenAIServer, pooled_clients: None
) -> None:
    model = OpenAIModel("fake-model", base_url=server.base_url, api_key="k", native_output=False)
    await ask(model, "so-off", output_spec(Person))
    await ask(OpenAIModel("fake-model", base_url=server.base_url, api_key="k"), "so-none", None)
    for conversation in ("so-off", "so-none"):
        [recorded] = server.requests(conversation)
        assert "response_format" not in recorded["body"]
