"""`THINK_WORKFLOWS` and `THINK_ACTIVITIES`: a worker hosts your own workflows and activities,
and a wrong entry stops it at once, naming the variable (`think.engine._hosted`)."""

from __future__ import annotations

import pytest

from examples.webhook_reply import WebhookReply, post_reply
from think._settings import Settings
from think.engine._hosted import hosted_activities, hosted_workflows
from think.exceptions import ConfigurationError


def _settings(**env: str) -> Settings:
    return Settings.from_env(env, find_dev_stack=False)


def test_the_entries_load_as_what_they_are() -> None:
    settings = _settings(
        THINK_WORKFLOWS="examples.webhook_reply:WebhookReply",
        THINK_ACTIVITIES="examples.webhook_reply:post_reply",
    )
    assert hosted_workflows(settings) == [WebhookReply]
    assert hosted_activities(settings) == [post_reply]
    assert hosted_workflows(_settings()) == [] and hosted_activities(_settings()) == []


@pytest.mark.parametrize(
    ("variable", "entry", "says"),
    [
        ("THINK_WORKFLOWS", "examples.nowhere:Flow", "cannot import it"),
        ("THINK_WORKFLOWS", "examples.webhook_reply:Missing", "has no 'Missing'"),
        ("THINK_WORKFLOWS", "examples.webhook_reply:Ticket", "decorate the class with @workflow"),
        ("THINK_ACTIVITIES", "examples.webhook_reply:accept", "decorate the function with @act"),
    ],
)
def test_a_wrong_entry_names_its_variable(variable: str, entry: str, says: str) -> None:
    settings = _settings(**{variable: entry})
    with pytest.raises(ConfigurationError) as wrong:
        hosted_workflows(settings)
        hosted_activities(settings)
    assert variable in str(wrong.value) and repr(entry) in str(wrong.value)
    assert says in str(wrong.value)
