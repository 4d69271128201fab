"""Context-overflow and rate-limit errors as providers really word them, shared by the
classifier's tests and the overflow recovery tests that feed them to a real turn.

Every row names the provider it came from; the strings are copied from provider responses as
reported in public bug trackers and SDK fixtures, numbers and all.
"""

from __future__ import annotations

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
