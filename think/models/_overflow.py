"""Telling a model failure's kind from its words: context overflow, rate limit, transient, fatal.

Providers do not agree on error codes, so the only portable signal of a context-window overflow
is the sentence the provider writes. `default_context_overflow_classifier` matches the real
sentences of the common providers (each pattern below names its source); `classify_model_error`
adds the status-based split into `rate_limit`, `transient` and `fatal` on top of it.

A false overflow is the expensive mistake: compacting a conversation because of a throttle
loses history and then hits the same throttle again. So every rate-limit wording ("tokens per
minute", "Too many tokens, please wait", "rate limit", HTTP 429) vetoes an overflow match, even
when an overflow pattern also matches.

The input is an exception (a `ModelError`, a provider SDK error, anything with a `status` /
`status_code`) or the bare message string of an error that arrived inside a stream.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Literal

ChatErrorClass = Literal["context_overflow", "rate_limit", "transient", "fatal", "unknown"]
"""What a failed model request means for the turn, whatever the provider."""

__all__ = [
    "ChatErrorClass",
    "classify_model_error",
    "default_context_overflow_classifier",
]


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


_OVERFLOW = _any(
    # OpenAI, Azure OpenAI, DeepSeek, OpenRouter and vLLM's OpenAI server all say
    # "This model's maximum context length is 8192 tokens. However, your messages resulted in
    # 9000 tokens." (OpenRouter: "This endpoint's maximum context length is ..."; vLLM: "However,
    # you requested 5000 tokens (4000 in the messages, 1000 in the completion)", and since 0.6
    # "'max_tokens' ... is too large: 8000. This model's maximum context length is 4096 tokens
    # and your request has 2778 input tokens").
    r"maximum context length is \d[\d,]* tokens",
    # OpenAI and Azure OpenAI error code, which our adapter appends to the message.
    r"context[_ ]length[_ ]exceeded",
    # OpenAI, newer models and the Responses API: "Your input exceeds the context window of this
    # model. Please adjust your input and try again."
    r"exceeds the context window",
    # OpenAI GPT-5 family: "Input tokens exceed the configured limit of 272000 tokens. Your
    # messages resulted in 428548 tokens."
    r"input tokens exceed the configured limit",
    # vLLM (older servers) and Groq: "Please reduce the length of the messages or completion."
    r"reduce the length of the messages",
    # vLLM V1 engine: "The decoder prompt (length 5000) is longer than the maximum model length
    # of 4096."
    r"prompt \(length \d+\) is longer than the maximum model length",
    # Together AI (and vLLM-based hosts): "The input (265330 tokens) is longer than the model's
    # context length (262144 tokens)."
    r"longer than the model'?s context length",
    # Anthropic, also relayed by Bedrock as "The model returned the following errors: prompt is
    # too long: 200049 tokens > 200000 maximum": "prompt is too long: 210000 tokens > 200000
    # maximum".
    r"prompt is too long",
    # Anthropic, when input plus max_tokens do not fit: "input length and `max_tokens` exceed
    # context limit: 199759 + 8192 > 200000, decrease input length or `max_tokens` and try again".
    r"exceed context limit",
    # Anthropic, HTTP 413 with error type `request_too_large` ("Request exceeds the maximum
    # size"): the request body itself is too big, which shortening history also fixes.
    r"request_too_large",
    # AWS Bedrock (InvokeModel and Converse, ValidationException): "Input is too long for
    # requested model."
    r"input is too long for requested model",
    # AWS Bedrock (Titan, Llama): "Too many input tokens. Max input tokens: 8192, request input
    # token count: 9279".
    r"too many input tokens",
    # Google Gemini API (400 INVALID_ARGUMENT): "The input token count (1200293) exceeds the
    # maximum number of tokens allowed (1048576)."
    r"input token count.{0,40}exceeds the maximum number of tokens",
    # Google Vertex AI: "Unable to submit request because the input token count is 135538 but
    # model only supports up to 32768. Reduce the input token count and try again."
    r"input token count is \d+ but (?:the )?model only supports up to",
    # Mistral (la Plateforme, code 3051): "Prompt contains 40000 tokens and 0 draft tokens, too
    # large for model with 32768 maximum context length".
    r"too large for model with \d+ maximum context length",
    # xAI: "This model's maximum prompt length is 131072 but the request contains 537812 tokens."
    r"maximum prompt length is \d+",
    # Ollama, /api/chat with truncation off: "prompt too long; exceeded max context length by
    # 4096 tokens"; embeddings: "the input length exceeds the context length". (By default
    # Ollama truncates the prompt silently and logs "truncating input prompt": no error at all.)
    r"prompt too long; exceeded (?:max )?context length",
    r"input length exceeds the context length",
    # llama.cpp server, error type `exceed_context_size_error`: "the request exceeds the
    # available context size, try increasing it" (newer: "... try increasing the context size
    # or enable context shift").
    r"exceeds? the available context size",
    r"exceed_context_size_error",
    # LM Studio: "Trying to keep the first 15857 tokens when context the overflows. However, the
    # model is loaded with context length of only 4096 tokens, which is not enough.", "tokens to
    # keep from the initial prompt is greater than the context length", and older builds
    # "Input length 6491 exceeds context length 1500".
    r"tokens when context (?:the )?overflows",
    r"greater than the context length",
    r"input length \d+ exceeds context length",
)

# Rate limits and quotas, which veto an overflow match. OpenAI: "Rate limit reached for gpt-4o
# in organization org-… on tokens per min (TPM): Limit 30000, Used 25000, Requested 9000" and
# "Request too large for gpt-4o … on tokens per min (TPM) … The input or output tokens must be
# reduced"; Anthropic: "This request would exceed the rate limit for your organization of 40,000
# input tokens per minute. … Please reduce the prompt length …"; Bedrock ThrottlingException:
# "Too many tokens, please wait before trying again."; Azure OpenAI: "… have exceeded token rate
# limit of your current OpenAI S0 pricing tier"; Gemini 429 RESOURCE_EXHAUSTED: "Resource has
# been exhausted (e.g. check quota)."; Groq: "… on tokens per minute (TPM) …".
_RATE_LIMIT = _any(
    r"rate[ _-]?limit",
    r"too many requests",
    r"throttl",
    r"tokens per (?:min|minute|hour|day)\b",
    r"\b(?:TPM|RPM|TPD|ITPM|OTPM)\b",
    r"please wait before trying again",
    r"resource[ _]exhausted",
    r"resource has been exhausted",
    r"quota",
)

# Billing, not timing: retrying cannot help. OpenAI answers HTTP 429 with code
# `insufficient_quota` ("You exceeded your current quota, please check your plan and billing
# details."); Anthropic answers 400 "Your credit balance is too low to access the Anthropic API".
_BILLING = _any(
    r"insufficient_quota",
    r"exceeded your current quota",
    r"credit balance is too low",
    r"billing (?:hard )?limit",
)

_TRANSIENT = _any(
    r"timed? ?out",
    r"timeout",
    r"connection (?:reset|refused|aborted|closed|error)",
    r"reset by peer",
    r"broken pipe",
    r"unreachable",
    r"temporarily unavailable",
    r"service unavailable",
    r"overloaded",
    r"bad gateway",
    r"internal server error",
    r"server_error",
    r"stream ended",
    r"incomplete chunked read",
    r"server disconnected",
)

_FATAL = _any(
    r"invalid[ _]api[ _]key",
    r"incorrect api key",
    r"unauthori[sz]ed",
    r"authentication",
    r"permission denied",
    r"model[_ ]not[_ ]found",
    r"does not exist",
    r"not supported",
)

# A status written into a message: our ModelError ("failed with HTTP 400"), the OpenAI SDK
# ("Error code: 429 - {...}"), or a relayed string ("status 400", "status code: 503").
_STATUS_IN_TEXT = re.compile(r"\b(?:HTTP|Error code:|status(?: code)?:?)\s*([1-5]\d\d)\b", re.I)


class _ContextOverflowClassifier:
    """The bundled overflow classifier, callable as a function and assignable as an agent's
    `classify_chat_error` (`classify_chat_error = default_context_overflow_classifier`).

    An instance rather than a function because a function stored on a class becomes a method:
    Python would pass the agent as `error`. An instance is never bound, so both uses see the
    same `(error, ctx)` call.
    """

    __name__ = "default_context_overflow_classifier"

    def __call__(
        self, error: BaseException | str, ctx: object = None, /, *, status: int | None = None
    ) -> ChatErrorClass | None:
        """`"context_overflow"` when `error` is a provider saying the prompt does not fit the
        model's context window, else None. `ctx` (a `ChatErrorContext`, when called as the
        hook) is not needed. `status` is the HTTP status when the caller knows it and the error
        does not carry it; a 429 is never an overflow."""
        text = _text(error)
        if not text or not _OVERFLOW.search(text):
            return None
        if (status or _status(error, text)) == 429 or _RATE_LIMIT.search(text):
            return None
        return "context_overflow"

    def __repr__(self) -> str:
        return "<think.default_context_overflow_classifier>"


default_context_overflow_classifier = _ContextOverflowClassifier()
"""`"context_overflow"` for the overflow errors of the common providers, else None."""


def classify_model_error(error: BaseException | str, status: int | None = None) -> ChatErrorClass:
    """Sort a failed model request into overflow, rate limit, transient, fatal or unknown.

    The order matters: overflow first (it is a 400, but compaction can fix it), then billing
    (fatal, though OpenAI sends it as a 429), then rate limits, then the HTTP status, then
    what the exception's type and words say.
    """
    if default_context_overflow_classifier(error, status=status) == "context_overflow":
        return "context_overflow"
    text = _text(error)
    status = status or _status(error, text)
    if _BILLING.search(text):
        return "fatal"
    if status == 429 or _RATE_LIMIT.search(text):
        return "rate_limit"
    if status is not None:
        if status in (408, 409, 425) or status >= 500:
            return "transient"
        if 400 <= status < 500:
            return "fatal"
    if isinstance(error, BaseException) and any(
        isinstance(e, TimeoutError | ConnectionError) for e in _chain(error)
    ):
        return "transient"
    if _TRANSIENT.search(text):
        return "transient"
    if _FATAL.search(text):
        return "fatal"
    retryable = getattr(error, "retryable", None)
    if isinstance(retryable, bool):  # a ModelError: the adapter already judged it
        return "transient" if retryable else "fatal"
    return "unknown"


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error and what caused it (`raise ... from`), bounded against cycles."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _text(error: BaseException | str) -> str:
    if isinstance(error, str):
        return error
    parts: list[str] = []
    for e in _chain(error):
        parts.append(str(e))
        # Provider SDKs keep the machine-readable code beside the message (openai: `code`,
        # `type`); overflow and billing codes are worth matching.
        parts.extend(
            v for v in (getattr(e, "code", None), getattr(e, "type", None)) if isinstance(v, str)
        )
    return "\n".join(p for p in parts if p)


def _status(error: BaseException | str, text: str) -> int | None:
    if isinstance(error, BaseException):
        for e in _chain(error):
            # ModelError.status, openai's status_code, and other SDKs' spellings.
            for attr in ("status", "status_code", "http_status"):
                value = getattr(e, attr, None)
                if isinstance(value, int) and not isinstance(value, bool) and value >= 100:
                    return value
    match = _STATUS_IN_TEXT.search(text)
    return int(match.group(1)) if match else None
