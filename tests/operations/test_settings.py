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
    "THINK_DEFAULT_TENANT": "two words",
    "THINK_HOME": "~/think",
    "THINK_TEMPORAL_UI_URL": "localhost:8233",
    "THINK_PUBLIC_URL": "chat.example.com",
    "THINK_CORS_ORIGINS": "chat.example.com",
    "THINK_MODEL_ENDPOINTS": '{"cheap": "https://cheap.example/v1"}',
    "TEMPORAL_API_KEY": "two words",
    "TEMPORAL_TLS_SERVER_NAME": "two words",
    "TEMPORAL_PROFILE": "two words",
    "THINK_WEBHOOK_SECRET": "two words",
    "THINK_WEBHOOK_URLS": "hooks.example.com/think",
    "THINK_WEBHOOK_PRIVATE_HOSTS": "http://hooks.internal",
}
"""A value each free-text variable refuses; a number, a flag or a choice refuses `bogus`, and
a file variable `bogus` too (no such file)."""

FILES = {
    "TEMPORAL_CONFIG_FILE": "[profile.default]\n",
    "TEMPORAL_TLS_CLIENT_CERT_PATH": "",
    "TEMPORAL_TLS_CLIENT_KEY_PATH": "",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH": "",
}
"""Variables that name a file, which must exist to be read: their examples are made under a
temporary directory (with this content) before they are read."""
NEEDS = {"TEMPORAL_PROFILE": {"TEMPORAL_CONFIG_FILE": "[profile.prod]\n"}}
"""Variables whose examples read only beside another's (a profile needs a file that has it):
the other's file is made with this content."""


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
def test_every_variable_reads_its_examples_and_ignores_an_empty_value(
    variable: Variable, tmp_path: Path
) -> None:
    assert variable.description and variable.examples, f"{variable.name}: declare help, examples"

    def made(name: str, example: str, content: str) -> str:
        path = tmp_path / example.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        return str(path)

    beside = {
        name: made(name, f"{name.lower()}.toml", content)
        for name, content in NEEDS.get(variable.name, {}).items()
    }
    for example in variable.examples:
        if variable.name in FILES:
            example = made(variable.name, example, FILES[variable.name])
        read = _read(**beside, **{variable.name: example})
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


def test_a_running_think_dev_lends_its_deployment_to_a_second_shell(tmp_path: Path) -> None:
    """Issue 37: the agents, workflows, activities, task queue and namespace of a running
    `think dev` (its endpoints file), unless this shell sets them; given both addresses, the
    shell describes another deployment and the file is not read."""
    from think._settings import write_endpoints

    write_endpoints(
        tmp_path,
        {
            "database_url": "postgresql://think@127.0.0.1:5999/think",
            "temporal_address": "127.0.0.1:7999",
            "agents": ["examples.digest:Digest"],
            "workflows": ["examples.webhook_reply:WebhookReply"],
            "activities": [],
            "task_queue": "think-dev",
            "temporal_namespace": "dev-ns",
        },
    )
    lent = Settings.from_env({"THINK_HOME": str(tmp_path)})
    assert lent.agents == ["examples.digest:Digest"]
    assert lent.workflows == ["examples.webhook_reply:WebhookReply"]
    assert (lent.task_queue, lent.temporal_namespace) == ("think-dev", "dev-ns")
    assert lent.temporal_address == "127.0.0.1:7999"
    own = Settings.from_env(
        {"THINK_HOME": str(tmp_path), "THINK_AGENTS": "m:A", "THINK_TASK_QUEUE": "q"}
    )
    assert (own.agents, own.task_queue, own.workflows) == (
        ["m:A"],
        "q",
        ["examples.webhook_reply:WebhookReply"],
    )
    elsewhere = Settings.from_env(
        {
            "THINK_HOME": str(tmp_path),
            "THINK_DATABASE_URL": "postgresql://db/think",
            "TEMPORAL_ADDRESS": "temporal:7233",
        }
    )
    assert elsewhere.agents == Settings().agents and elsewhere.task_queue == "think"


def test_the_default_tenant_names_keys_without_one() -> None:
    settings = Settings.from_env(
        {"THINK_API_KEYS": "k1:acme,k2", "THINK_DEFAULT_TENANT": "globex"}, find_dev_stack=False
    )
    assert settings.api_keys == {"k1": "acme", "k2": "globex"}
    assert Settings.from_env({"THINK_API_KEYS": "k2"}, find_dev_stack=False).api_keys == {
        "k2": "default"
    }


def test_every_variable_is_in_a_subcommands_help(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 37: `--help` of a subcommand said nothing of the variables that configure it."""
    from think.cli._help import COMMAND_VARIABLES

    declared = {v.name for v in VARIABLES}
    listed = {name for names in COMMAND_VARIABLES.values() for name in names}
    assert listed <= declared, listed - declared
    assert {*COMMAND_VARIABLES["api"], *COMMAND_VARIABLES["worker"]} == declared
    for command, expected in [
        ("worker", "THINK_AGENTS"),
        ("api", "THINK_PORT"),
        ("dev", "THINK_PORT"),
    ]:
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        out = capsys.readouterr().out
        assert "environment (`think settings`" in out and f"  {expected} " in out, out


def test_capacity_and_grace_periods_are_settings() -> None:
    """Issue 37: worker concurrency, the Postgres pool and the shutdown grace periods were
    fixed in code."""
    from datetime import timedelta

    from think.engine._worker import capacity

    settings = Settings.from_env(
        {
            "THINK_WORKER_MAX_ACTIVITIES": "7",
            "THINK_DB_POOL_SIZE": "3",
            "THINK_WORKER_SHUTDOWN_GRACE_SECONDS": "25",
            "THINK_API_SHUTDOWN_GRACE_SECONDS": "12.5",
            "THINK_WORKER_WORKFLOW_TASK_SLOTS": "9",
        },
        find_dev_stack=False,
    )
    assert capacity(settings) == {
        "max_concurrent_activities": 7,
        "max_concurrent_local_activities": 7,
        "max_concurrent_workflow_tasks": 9,
        "graceful_shutdown_timeout": timedelta(seconds=25),
    }
    assert (settings.db_pool_size, settings.api_shutdown_grace_seconds) == (3, 12.5)
    defaults = Settings()
    assert capacity(defaults)["max_concurrent_activities"] == 200
    assert (defaults.db_pool_size, defaults.worker_shutdown_grace_seconds) == (20, 10.0)
