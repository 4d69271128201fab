"""The overflow classifier against the sentences providers really send.

Every row names the provider it came from; the strings are copied from provider responses as
reported in public bug trackers and SDK fixtures, numbers and all. The negatives matter as much:
a rate limit that mentions tokens must never read as an overflow, or a throttled turn would
compact its history and hit the same throttle again.
"""

from __future__ import annotations

import pytest

from tests._provider_errors import OVERFLOWS, RATE_LIMITS
from think.exceptions import ModelError
from think.models._openai import status_error
from think.models._overflow import (
    ChatErrorClass,
    classify_model_error,
    default_context_overflow_classifier,
)


@pytest.mark.parametrize(("provider", "message"), OVERFLOWS, ids=[p for p, _ in OVERFLOWS])
def test_provider_overflow_reads_as_overflow(provider: str, message: str) -> None:
    assert default_context_overflow_classifier(message) == "context_overflow"
    assert default_context_overflow_classifier(RuntimeError(message)) == "context_overflow"
    assert classify_model_error(message) == "context_overflow"


@pytest.mark.parametrize(("provider", "message"), RATE_LIMITS, ids=[p for p, _ in RATE_LIMITS])
def test_rate_limit_mentioning_tokens_is_never_an_overflow(provider: str, message: str) -> None:
    assert default_context_overflow_classifier(message) is None
    assert default_context_overflow_classifier(message, status=429) is None
    assert classify_model_error(message) == "rate_limit"


def test_an_overflow_wording_under_http_429_is_a_rate_limit() -> None:
    # A proxy that words its throttle like an overflow still says 429; the status wins.
    message = "token budget: maximum context length is 8192 tokens for this minute's window"
    assert default_context_overflow_classifier(message) == "context_overflow"
    assert default_context_overflow_classifier(message, status=429) is None
    assert classify_model_error(ModelError(message, retryable=True, status=429)) == "rate_limit"


@pytest.mark.parametrize(
    "message",
    [
        "max_tokens is too large: 100000. This model supports at most 16384 completion tokens, "
        "whereas you provided 100000.",  # OpenAI: the output cap, which compaction cannot fix
        "Invalid 'messages[3].content': string too long. Expected a string with maximum length "
        "10485760, but got a string with length 12000000 instead.",
        "The model `gpt-9` does not exist or you do not have access to it.",
        "Incorrect API key provided: sk-abc. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "connection reset by peer",
        "",
    ],
)
def test_other_errors_are_not_overflows(message: str) -> None:
    assert default_context_overflow_classifier(message) is None


def test_model_error_from_our_openai_adapter() -> None:
    # What think.models._openai raises for a provider's 400: message, code and status together.
    overflow = status_error(
        "gpt-4o",
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 130000 tokens. (invalid_request_error, context_length_exceeded)",
    )
    assert default_context_overflow_classifier(overflow) == "context_overflow"
    assert classify_model_error(overflow) == "context_overflow"
    assert classify_model_error(status_error("gpt-4o", 400, "Invalid value for 'tools'")) == "fatal"
    assert classify_model_error(status_error("gpt-4o", 503, "Service Unavailable")) == "transient"
    assert classify_model_error(status_error("gpt-4o", 429, "slow down")) == "rate_limit"


class SDKError(Exception):
    """Shaped like openai.APIError: the provider's machine-readable `code` beside the message."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def test_the_cause_chain_and_the_sdk_code_are_read() -> None:
    # The SDK's `code` is matched even when the message words it differently.
    sdk_error = SDKError("Too long.", code="context_length_exceeded")
    assert default_context_overflow_classifier(sdk_error) == "context_overflow"
    try:
        try:
            raise sdk_error
        except SDKError as exc:
            raise ModelError("model gpt-4o failed mid-stream", retryable=True) from exc
    except ModelError as wrapped:
        assert default_context_overflow_classifier(wrapped) == "context_overflow"
        assert classify_model_error(wrapped) == "context_overflow"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ModelError("boom", retryable=False, status=401), "fatal"),
        (ModelError("boom", retryable=True, status=408), "transient"),
        (ModelError("boom", retryable=True, status=409), "transient"),
        (ModelError("Overloaded", retryable=True, status=529), "transient"),
        (ModelError("not found", retryable=False, status=404), "fatal"),
        (
            ModelError(
                "You exceeded your current quota, please check your plan and billing details. "
                "(insufficient_quota)",
                retryable=True,
                status=429,
            ),
            "fatal",
        ),
        (
            ModelError("model x at http://h unreachable: Connection error.", retryable=True),
            "transient",
        ),
        (ModelError("model x stream ended before the model finished", retryable=True), "transient"),
        (ModelError("model x failed mid-stream: something odd", retryable=True), "transient"),
        (ModelError("model x refused the request", retryable=False), "fatal"),
        (TimeoutError(), "transient"),
        (ConnectionResetError(104, "Connection reset by peer"), "transient"),
        ("Request timed out.", "transient"),
        ("model gpt-4o failed with HTTP 502: Bad Gateway", "transient"),
        ("Error code: 403 - {'error': {'message': 'Forbidden'}}", "fatal"),
        ("Your credit balance is too low to access the Anthropic API.", "fatal"),
        (ValueError("something nobody planned for"), "unknown"),
        ("", "unknown"),
    ],
)
def test_classify_model_error(error: BaseException | str, expected: ChatErrorClass) -> None:
    assert classify_model_error(error) == expected


def test_an_explicit_status_is_used_for_a_bare_string() -> None:
    assert classify_model_error("upstream said no", status=503) == "transient"
    assert classify_model_error("upstream said no", status=400) == "fatal"
    assert classify_model_error("upstream said no", status=429) == "rate_limit"
