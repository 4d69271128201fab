"""Named model endpoints: one agent, two providers, configured in THINK_MODEL_ENDPOINTS."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from think._settings import Endpoint, Settings, parse_model_endpoints
from think.exceptions import ConfigurationError
from think.models import (
    ModelClient,
    ModelRequest,
    OfflineModel,
    OpenAIModel,
    TextDelta,
    close_openai_clients,
    output_spec,
    resolve_model,
    supports_native_output,
)
from think.testing import FakeOpenAIServer, text


def settings_from(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env({"THINK_HOME": str(tmp_path), **env})


# --- parsing ---


def test_endpoints_come_from_json_with_keys_from_the_variables_they_name(tmp_path: Path) -> None:
    endpoints = {
        "cheap": {"base_url": "https://cheap.example/v1", "api_key_env": "CHEAP_KEY"},
        "local": {"base_url": "http://localhost:11434/v1", "native_output": False},
        "literal": {"api_key": "sk-inline"},
    }
    settings = settings_from(
        tmp_path, THINK_MODEL_ENDPOINTS=json.dumps(endpoints), CHEAP_KEY="sk-cheap"
    )
    assert settings.model_endpoints == {
        "cheap": Endpoint(
            base_url="https://cheap.example/v1", api_key="sk-cheap", api_key_env="CHEAP_KEY"
        ),
        "local": Endpoint(base_url="http://localhost:11434/v1", native_output=False),
        "literal": Endpoint(api_key="sk-inline"),
    }
    assert "sk-cheap" not in repr(settings.model_endpoints)
    assert settings.native_structured_output is True


def test_no_endpoints_by_default(tmp_path: Path) -> None:
    assert settings_from(tmp_path).model_endpoints == {}
    assert settings_from(tmp_path, THINK_MODEL_ENDPOINTS="  ").model_endpoints == {}


def test_a_key_variable_that_is_not_set_leaves_the_key_empty() -> None:
    [(name, endpoint)] = parse_model_endpoints('{"cheap": {"api_key_env": "NOPE"}}', {}).items()
    assert (name, endpoint.api_key, endpoint.api_key_env) == ("cheap", None, "NOPE")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('{"cheap": {"base_url": "x",}}', "not valid JSON (Expecting property name"),
        ('["cheap"]', "expected a JSON object of endpoints by name, got list"),
        ('{"cheap": "https://cheap.example/v1"}', "endpoint 'cheap' must be an object"),
        (
            '{"cheap": {"base_url": "x", "key": "sk"}}',
            "endpoint 'cheap' has unknown keys ['key']; known: base_url, api_key, api_key_env",
        ),
        (
            '{"cheap": {"api_key": "sk", "api_key_env": "K"}}',
            "gives both api_key and api_key_env",
        ),
        ('{"cheap": {"api_key_env": 3}}', "api_key_env must name a variable, not 3"),
        ('{"cheap": {"base_url": 5}}', "endpoint 'cheap': base_url: Input should be a valid str"),
        (
            '{"cheap": {"native_output": "sometimes"}}',
            "endpoint 'cheap': native_output: Input should be a valid boolean",
        ),
        (
            '{"cheap": {"api": "grpc"}}',
            "endpoint 'cheap': api: Input should be 'chat', 'responses' or 'anthropic'",
        ),
        (
            '{"cheap": {"background": true}}',
            "endpoint 'cheap': Value error, store and background are options of api "
            "'responses' only",
        ),
        (
            '{"cheap": {"api": "responses", "background": true, "store": false}}',
            "endpoint 'cheap': Value error, background mode needs store",
        ),
        ('{"a/b": {}}', "endpoint name 'a/b' must be non-empty, without '/'"),
        ('{"": {}}', "endpoint name '' must be non-empty"),
    ],
)
def test_bad_endpoint_configuration_names_the_variable_and_the_problem(
    tmp_path: Path, raw: str, problem: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        settings_from(tmp_path, THINK_MODEL_ENDPOINTS=raw, K="sk")
    message = str(caught.value)
    assert message.startswith("THINK_MODEL_ENDPOINTS: ")
    assert problem in message


def test_native_structured_output_can_be_turned_off_for_the_default_endpoint(
    tmp_path: Path,
) -> None:
    for value, expected in [("0", False), ("false", False), ("1", True), ("", True)]:
        settings = settings_from(tmp_path, THINK_NATIVE_STRUCTURED_OUTPUT=value)
        assert settings.native_structured_output is expected
    with pytest.raises(ConfigurationError, match="THINK_NATIVE_STRUCTURED_OUTPUT='maybe'"):
        settings_from(tmp_path, THINK_NATIVE_STRUCTURED_OUTPUT="maybe")


# --- resolution ---

TWO_PROVIDERS = Settings(
    openai_base_url="http://default.example/v1",
    openai_api_key="sk-default",
    native_structured_output=False,
    model_endpoints={
        "cheap": Endpoint(base_url="https://cheap.example/v1", api_key="sk-cheap"),
        "local": Endpoint(base_url="http://localhost:8000/v1", native_output=False),
    },
)


def test_a_configured_prefix_picks_the_endpoint() -> None:
    model = resolve_model("cheap/gpt-4o-mini", TWO_PROVIDERS)
    assert isinstance(model, OpenAIModel)
    assert (model.model, model.base_url, model.endpoint, model.name) == (
        "gpt-4o-mini",
        "https://cheap.example/v1",
        "cheap",
        "cheap/gpt-4o-mini",
    )
    assert supports_native_output(model) is True
    assert "cheap" in repr(model) and "sk-cheap" not in repr(model)

    local = resolve_model("local/qwen2.5:7b", TWO_PROVIDERS)
    assert isinstance(local, OpenAIModel)
    assert (local.model, local.name, supports_native_output(local)) == (
        "qwen2.5:7b",
        "local/qwen2.5:7b",
        False,
    )
    # Its `name` resolves back to the same endpoint, and the `openai:` label is accepted too.
    again = resolve_model(f"openai:{model.name}", TWO_PROVIDERS)
    assert isinstance(again, OpenAIModel) and again.name == model.name


@pytest.mark.parametrize(
    "model_id", ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B", "cheap/", "cheapo/m"]
)
def test_a_slash_that_is_not_a_configured_endpoint_is_part_of_the_model_id(model_id: str) -> None:
    model = resolve_model(model_id, TWO_PROVIDERS)
    assert isinstance(model, OpenAIModel)
    assert (model.model, model.base_url, model.endpoint, model.name) == (
        model_id,
        "http://default.example/v1",
        None,
        f"openai:{model_id}",
    )
    assert supports_native_output(model) is False  # THINK_NATIVE_STRUCTURED_OUTPUT=0


def test_named_endpoints_work_without_a_default_one() -> None:
    only_named = Settings(model_endpoints={"cheap": Endpoint(base_url="https://cheap.example")})
    assert isinstance(resolve_model("cheap/m", only_named), OpenAIModel)
    assert isinstance(resolve_model("meta-llama/Llama-3", only_named), OfflineModel)
    assert isinstance(resolve_model("offline", only_named), OfflineModel)


def test_an_endpoint_whose_key_variable_is_unset_fails_where_it_is_used() -> None:
    settings = Settings(
        model_endpoints=parse_model_endpoints('{"cheap": {"api_key_env": "CHEAP_KEY"}}', {})
    )
    with pytest.raises(ConfigurationError) as caught:
        resolve_model("cheap/gpt-4o-mini", settings)
    assert str(caught.value) == (
        "model 'cheap/gpt-4o-mini' uses endpoint 'cheap', whose API key is read from "
        "CHEAP_KEY, and CHEAP_KEY is not set in this process"
    )


# --- over HTTP: one agent, two providers ---


@pytest.fixture(scope="module")
async def pooled_clients() -> AsyncIterator[None]:
    yield
    await close_openai_clients()


async def answer(model: ModelClient, conversation: str) -> str:
    request = ModelRequest(
        model=model.name,
        messages=[{"role": "user", "content": "hi"}],
        metadata={"conversation-id": conversation},
        output=output_spec({"type": "object", "properties": {"a": {"type": "string"}}}),
    )
    return "".join([e.delta async for e in model.stream(request) if isinstance(e, TextDelta)])


async def test_two_providers_each_get_their_own_calls(pooled_clients: None) -> None:
    with FakeOpenAIServer() as main, FakeOpenAIServer() as cheap:
        settings = Settings.from_env(
            {
                "OPENAI_BASE_URL": main.base_url,
                "OPENAI_API_KEY": "sk-main",
                "THINK_MODEL_ENDPOINTS": json.dumps(
                    {"cheap": {"base_url": cheap.base_url, "api_key_env": "CHEAP_KEY"}}
                ),
                "CHEAP_KEY": "sk-cheap",
                "THINK_NATIVE_STRUCTURED_OUTPUT": "0",
                "THINK_HOME": "/nonexistent-think-home",
            }
        )
        main.script("ep-1", text('{"a": "main"}'))
        cheap.script("ep-1", text('{"a": "cheap"}'))
        assert await answer(resolve_model("gpt-4o", settings), "ep-1") == '{"a": "main"}'
        assert await answer(resolve_model("cheap/gpt-4o-mini", settings), "ep-1") == (
            '{"a": "cheap"}'
        )
        [to_main] = main.requests("ep-1")
        [to_cheap] = cheap.requests("ep-1")
    assert (to_main["body"]["model"], to_main["headers"]["authorization"]) == (
        "gpt-4o",
        "Bearer sk-main",
    )
    assert (to_cheap["body"]["model"], to_cheap["headers"]["authorization"]) == (
        "gpt-4o-mini",
        "Bearer sk-cheap",
    )
    # The default endpoint has native structured output turned off; the named one has it on.
    assert "response_format" not in to_main["body"]
    assert to_cheap["body"]["response_format"]["type"] == "json_schema"
    assert to_cheap["body"]["response_format"]["json_schema"]["strict"] is True
