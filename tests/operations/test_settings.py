"""The settings, declared once (`think._settings`): every variable refuses a bad value with a
`ConfigurationError` that names it, reads good ones (the declaration's own examples), and is
listed by `think settings` and docs/operating.md exactly as declared.

The variables come from the declaration itself, so a new setting is covered by every test
here without a line added, except a bad value for a free-text one (`BAD_TEXT` says so).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from think import cli
from think._settings import Settings, Variable, variables
from think.cli._settings import markdown_row, markdown_table
from think.exceptions import ConfigurationError

OPERATING = Path(__file__).resolve().parents[2] / "docs" / "operating.md"
VARIABLES = variables()

BAD_TEXT = {
    "THINK_AGENTS": "examples.assistant",
    "THINK_WORKFLOWS": "examples.webhook_reply",
    "THINK_ACTIVITIES": "examples.webhook_reply",
    "THINK_DATABASE_URL": "mysql://db/think",
    "TEMPORAL_ADDRESS": "http://temporal:7233",
    "TEMPORAL_NAMESPACE": "my namespace",
    "THINK_TASK_QUEUE": "two words",
    "OPENAI_BASE_URL": "localhost:11434/v1",
    "OPENAI_API_KEY": "sk-one two",
    "THINK_API_KEYS": ":acme",
    "THINK_HOME": "~/think",
    "THINK_TEMPORAL_UI_URL": "localhost:8233",
    "THINK_PUBLIC_URL": "chat.example.com",
    "THINK_CORS_ORIGINS": "chat.example.com",
    "THINK_MODEL_ENDPOINTS": '{"cheap": "https://cheap.example/v1"}',
}
"""A value each free-text variable refuses; a number, a flag or a choice refuses `bogus`."""


def _read(**env: str) -> Settings:
    return Settings.from_env(env, find_dev_stack=False)


def _bad_value(variable: Variable) -> str:
    if variable.name in BAD_TEXT:
        return BAD_TEXT[variable.name]
    annotation = Settings.model_fields[variable.field].annotation
    assert annotation is not str and annotation != (str | None), (
        f"{variable.name} is free text: add a value it refuses to BAD_TEXT"
    )
    return "bogus"


@pytest.mark.parametrize("variable", VARIABLES, ids=[v.name for v in VARIABLES])
def test_every_variable_refuses_a_bad_value_naming_itself(variable: Variable) -> None:
    bad = _bad_value(variable)
    with pytest.raises(ConfigurationError) as raised:
        _read(**{variable.name: bad})
    message = str(raised.value)
    assert message.startswith(variable.name), message
    if variable.secret:  # a key may be in the value: never echoed
        assert bad not in message
    else:
        assert f"{variable.name}={bad!r}" in message


@pytest.mark.parametrize("variable", VARIABLES, ids=[v.name for v in VARIABLES])
def test_every_variable_reads_its_examples_and_ignores_an_empty_value(variable: Variable) -> None:
    assert variable.description and variable.examples, f"{variable.name}: declare help, examples"
    for example in variable.examples:
        read = _read(**{variable.name: example})
        assert getattr(read, variable.field) != variable.default, example
    assert _read(**{variable.name: ""}) == _read()


@pytest.mark.parametrize("name", [v.name for v in VARIABLES if v.default in (True, False)])
def test_flags_read_the_usual_words_in_any_case(name: str) -> None:
    field = next(v.field for v in VARIABLES if v.name == name)
    for word in ("1", "true", "yes", "on", " On ", "TRUE", "y"):
        assert getattr(_read(**{name: word}), field) is True, word
    for word in ("0", "false", "no", "off", " No ", "OFF", "n"):
        assert getattr(_read(**{name: word}), field) is False, word
    with pytest.raises(ConfigurationError, match=f"{name}='2'"):
        _read(**{name: "2"})


def test_the_defects_of_the_hand_parser_are_gone() -> None:
    assert _read(THINK_WORKFLOW_SANDBOX="on").workflow_sandbox is True  # was silently false
    with pytest.raises(ConfigurationError) as raised:  # was a bare ValueError
        _read(THINK_MAX_BODY_BYTES="abc")
    assert str(raised.value) == "THINK_MAX_BODY_BYTES='abc': expected a whole number, 1 or more"
    with pytest.raises(ConfigurationError, match=r"THINK_PENDING_SWEEP_SECONDS='0'.*above 0"):
        _read(THINK_PENDING_SWEEP_SECONDS="0")


def test_values_read_as_they_always_have() -> None:
    read = _read(
        THINK_AGENTS=" a.b:C , d:E ,",
        THINK_API_KEYS="k1:acme, k2:acme:ops-lead, k3",
        THINK_CORS_ORIGINS="https://chat.example.com/, http://localhost:3000",
        THINK_PUBLIC_URL="https://chat.example.com/",
        THINK_EVENT_LOOP=" AsyncIO ",
        THINK_WORKER_METRICS_PORT="9464",
        THINK_SUBMISSIONS_PER_MINUTE="0.5",
        THINK_HOME="/srv/think",
    )
    assert read.agents == ["a.b:C", "d:E"]
    assert read.api_keys == {"k1": "acme", "k2": "acme", "k3": "default"}
    assert read.api_key_names == {"k2": "ops-lead"}
    assert read.cors_origins == ["https://chat.example.com", "http://localhost:3000"]
    assert read.public_url == "https://chat.example.com"
    assert (read.event_loop, read.worker_metrics_port) == ("asyncio", 9464)
    assert (read.submissions_per_minute, read.home) == (0.5, Path("/srv/think"))


def test_several_bad_values_are_all_named_and_secrets_never_shown() -> None:
    with pytest.raises(ConfigurationError) as raised:
        _read(THINK_KEEP_ALIVE_SECONDS="-1", OPENAI_API_KEY="sk-secret value", THINK_AGENTS="x")
    message = str(raised.value)
    for name in ("THINK_KEEP_ALIVE_SECONDS='-1'", "OPENAI_API_KEY:", "THINK_AGENTS='x'"):
        assert name in message
    assert "secret" not in message


def test_settings_built_in_code_read_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THINK_MAX_BODY_BYTES", "5")
    monkeypatch.setenv("THINK_TASK_QUEUE", "elsewhere")
    assert Settings().max_body_bytes == 16 * 1024 * 1024
    assert Settings(task_queue="mine").task_queue == "mine"
    read = Settings.from_env(find_dev_stack=False)
    assert (read.max_body_bytes, read.task_queue) == (5, "elsewhere")


# -- listed from the declaration -------------------------------------------------------------


def test_the_docs_settings_table_is_the_declaration() -> None:
    """Regenerate with `think settings --markdown` (between the two markers of "Settings")."""
    text = OPERATING.read_text()
    begin = text.index("<!-- settings table:")
    begin = text.index("\n", begin) + 1
    end = text.index("<!-- end of settings table -->")
    assert text[begin:end] == markdown_table(), "paste `think settings --markdown` there"
    rows = {v.name: markdown_row(v) for v in VARIABLES}
    for line in text.splitlines():  # the Limits and Workspace quotas tables repeat some rows
        named = re.match(r"\| `([A-Z_]+)` \|", line)
        if named and named.group(1) in rows:
            assert line == rows[named.group(1)]


def test_think_settings_lists_every_variable(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli._run(["settings"]) == 0
    listed = capsys.readouterr().out
    for variable in VARIABLES:
        assert f"\n{variable.name}  (default: " in listed
    assert cli._run(["settings", "--markdown"]) == 0
    assert capsys.readouterr().out == markdown_table()


def test_think_settings_check_names_a_bad_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("THINK_WORKFLOW_SANDBOX", "on")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-hidden")
    assert cli._run(["settings", "--check"]) == 0
    shown = capsys.readouterr().out
    assert "THINK_WORKFLOW_SANDBOX = True" in shown and "OPENAI_API_KEY = (set)" in shown
    assert "sk-hidden" not in shown
    monkeypatch.setenv("THINK_MAX_BODY_BYTES", "abc")
    assert cli._run(["settings", "--check"]) == 2
    assert "THINK_MAX_BODY_BYTES='abc'" in capsys.readouterr().err
