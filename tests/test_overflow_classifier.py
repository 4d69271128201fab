"""The overflow classifier against the sentences providers really send.

Every row names the provider it came from; the strings are copied from provider responses as
reported in public bug trackers and SDK fixtures, numbers and all. The negatives matter as much:
a rate limit that mentions tokens must never read as an overflow, or a throttled turn would
compact its history and hit the same throttle again.
"""

from __future__ import annotations

import pytest

from think.exceptions import ModelError
from think.models._openai import status_error
from think.models._overflow import (
    ChatErrorClass,
    classify_model_error,
    default_context_overflow_classifier,
)

OVERFLOWS: list[tuple[str, str]] = [
    (
        "OpenAI",
        "This model's maximum context length is 8192 tokens. However, your messages resulted "
        "in 9000 tokens. Please reduce the length of the messages.",
    ),
    ("OpenAI (error code)", "context_length_exceeded"),
    (
        "OpenAI (Responses API)",
        "Your input exceeds the context window of this model. Please adjust your input and try "
        "again.",
    ),
    (
        "OpenAI (GPT-5)",
        "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in "
        "428548 tokens. Please reduce the length of the messages.",
    ),
    (
        "Azure OpenAI",
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 130000 tokens. Please reduce the length of the messages. "
        "(invalid_request_error, context_length_exceeded)",
    ),
    (
        "Anthropic",
        '400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too '
        'long: 219898 tokens > 200000 maximum"},"request_id":"req_011CVjxiYzEFcAQC4Fk87zw2"}',
    ),
    (
        "Anthropic (max_tokens)",
        "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease "
        "input length or `max_tokens` and try again",
    ),
    (
        "Anthropic (413)",
        '413 {"type":"error","error":{"type":"request_too_large","message":"Request exceeds the '
        'maximum size"}}',
    ),
    (
        "Google Gemini",
        "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
    ),
    (
        "Google Vertex AI",
        "400 Unable to submit request because the input token count is 3601938 but model only "
        "supports up to 1000000. Reduce the input token count and try again.",
    ),
    ("AWS Bedrock", "Input is too long for requested model."),
    (
        "AWS Bedrock (Converse)",
        "An error occurred (ValidationException) when calling the Converse operation: The model "
        "returned the following errors: Input is too long for requested model.",
    ),
    (
        "AWS Bedrock (Anthropic)",
        "ValidationException: The model returned the following errors: prompt is too long: "
        "200049 tokens > 200000 maximum",
    ),
    (
        "AWS Bedrock (Titan)",
        "ValidationException: 400 Bad Request: Too many input tokens. Max input tokens: 8192, "
        "request input token count: 9279",
    ),
    (
        "Mistral",
        "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 "
        "maximum context length",
    ),
    (
        "vLLM",
        "This model's maximum context length is 4096 tokens. However, you requested 5060 tokens "
        "(4036 in the messages, 1024 in the completion). Please reduce the length of the "
        "messages or completion.",
    ),
    (
        "vLLM (>= 0.6)",
        "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum "
        "context length is 4096 tokens and your request has 2778 input tokens "
        "(8000 > 4096 - 2778). None",
    ),
    (
        "vLLM (V1 engine)",
        "The decoder prompt (length 5000) is longer than the maximum model length of 4096. "
        "Make sure that `max_model_len` is no smaller than the number of text tokens.",
    ),
    (
        "Together AI",
        "The input (265330 tokens) is longer than the model's context length (262144 tokens).",
    ),
    (
        "OpenRouter",
        "This endpoint's maximum context length is 131072 tokens. However, you requested about "
        "537812 tokens (529620 of text input, 8192 in the output). Please reduce the length of "
        'either one, or use the "middle-out" transform to compress your prompt automatically.',
    ),
    (
        "DeepSeek",
        "This model's maximum context length is 65536 tokens. However, you requested 70000 "
        "tokens (70000 in the messages, 0 in the completion). Please reduce the length of the "
        "messages or completion.",
    ),
    (
        "xAI",
        "This model's maximum prompt length is 131072 but the request contains 149617 tokens.",
    ),
    ("Groq", "Please reduce the length of the messages or completion."),
    ("Ollama (chat)", "prompt too long; exceeded max context length by 4096 tokens"),
    ("Ollama (embed)", '{"error":"the input length exceeds the context length"}'),
    (
        "llama.cpp server",
        '{"error":{"code":400,"message":"the request exceeds the available context size. try '
        'increasing the context size or enable context shift","type":"exceed_context_size_error",'
        '"n_prompt_tokens":14429,"n_ctx":8192}}',
    ),
    (
        "llama.cpp server (older)",
        "the request exceeds the available context size, try increasing it",
    ),
    (
        "LM Studio",
        "Trying to keep the first 15857 tokens when context the overflows. However, the model is "
        "loaded with context length of only 4096 tokens, which is not enough. Try to load the "
        "model with a larger context length, or provide a shorter input.",
    ),
    ("LM Studio (older)", "Error: Input length 6491 exceeds context length 1500"),
]

RATE_LIMITS: list[tuple[str, str]] = [
    (
        "OpenAI (TPM)",
        "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit "
        "30000, Used 25000, Requested 9000. Please try again in 8s.",
    ),
    (
        "OpenAI (request over the TPM bucket)",
        "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit "
        "30000, Requested 45000. The input or output tokens must be reduced in order to run "
        "successfully.",
    ),
    (
        "Anthropic",
        "This request would exceed the rate limit for your organization (0b5e7a1c) of 30,000 "
        "input tokens per minute. For details, refer to: https://docs.claude.com/en/api/"
        "rate-limits. You can see the response headers for current usage. Please reduce the "
        "prompt length or the maximum tokens requested, or try again later.",
    ),
    ("AWS Bedrock", "ThrottlingException: Too many tokens, please wait before trying again."),
    ("AWS Bedrock (requests)", "Too many requests, please wait before trying again."),
    (
        "Azure OpenAI",
        "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
        "2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing tier. "
        "Please retry after 6 seconds.",
    ),
    (
        "Groq",
        "Rate limit reached for model `llama3-70b-8192` in organization `org_1` on tokens per "
        "minute (TPM): Limit 6000, Used 0, Requested 9512, please reduce your message size and "
        "try again.",
    ),
    ("Google Gemini", "429 RESOURCE_EXHAUSTED. Resource has been exhausted (e.g. check quota)."),
    ("generic proxy", "Rate limit reached: token limit exceeded for this minute"),
]


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
