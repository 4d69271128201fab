"""Session fixtures: real Postgres, real Temporal, a real worker and gateway; a fake model.

Everything starts once per session. Tests isolate themselves with fresh conversation ids
(`cid`), never by resetting shared state, so the suite stays fast.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests._stack import Stack, extra_gateway, free_port, stack_env
from think._settings import Settings
from think.dev import Services, start_services
from think.storage import migrate
from think.testing import FakeAnthropicServer, FakeOpenAIServer, FakeResponsesServer
from think.turns._service import ThinkService
from think.workflows import connect


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    # With the Temporal Web UI (on a free port): the chat page links turns to it, and
    # tests/ui/test_temporal_ui.py takes the operators' screenshots of it.
    with start_services(tmp_path_factory.mktemp("think"), ui_port=0) as running:
        settings = running.settings()
        asyncio.run(migrate(settings))
        yield running


@pytest.fixture(scope="session")
def settings(services: Services) -> Settings:
    return services.settings(Settings(agents=["tests.agents:Helper"], task_queue="think-tests"))


@pytest.fixture(scope="session")
def fake_model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="session")
def fake_anthropic() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture(scope="session")
def fake_responses() -> Iterator[FakeResponsesServer]:
    with FakeResponsesServer() as server:
        yield server


@pytest.fixture(scope="session")
def stack(
    services: Services,
    settings: Settings,
    fake_model: FakeOpenAIServer,
    fake_anthropic: FakeAnthropicServer,
    fake_responses: FakeResponsesServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("logs")
    env = stack_env(
        database_url=services.database_url,
        temporal_address=services.temporal_address,
        task_queue=settings.task_queue,
        agents=(
            "tests.agents:Helper,tests.agents:Staller,tests.agents:Persister,"
            "tests.agents:GiveUp,tests.agents:Budgeted,tests.agents:Hurried,"
            "tests.agents:Gatekeeper,tests.agents:Guarded,tests.agents:Hooked,tests.agents:Hooks,"
            "tests.agents:Introspective,tests.agents:SelfCancelling,"
            "tests.agents:QuietReasoner,tests.agents:Judge,"
            "tests.agents:Compactor,tests.agents:Recoverer,tests.agents:Forethought,"
            "tests.agents:Lookout,"
            "tests.agents:Latest,tests.agents:Debouncer,tests.agents:Delegator,"
            "tests.agents:Remembering,tests.agents:Configured,tests.agents:Forgetful,"
            "tests.agents:Fragile,tests.agents:Wrecked,tests.agents:Unresponsive,"
            "tests.agents:Uncompacted,"
            "tests.agents:Patient,tests.agents:Watchful,tests.agents:Lead,tests.agents:Recursive,"
            "tests.agents:McpUser,tests.agents:McpImpatient,tests.agents:McpHidden,"
            "tests.agents:Workspaced,tests.agents:Skilled,tests.agents:Fetcher,"
            "tests.agents:Hostile,tests.agents:Tuned,tests.agents:Routed,tests.agents:Switchable,"
            "tests.agents:Streamer,tests.agents:Eraser,tests.agents:Salvager,"
            "tests.sub_agent_agents:Dispatcher,"
            "tests.action_agents:Refunder,tests.action_agents:FollowingUp,"
            "tests.action_agents:GuardedRefunder,"
            "tests.code_mode_agents:Coder,tests.code_mode_agents:NoCode,"
            "tests.code_execution_agents:Executor,tests.code_execution_agents:ScriptRunner,"
            "examples.assistant:Assistant"
        ),
        model_url=fake_model.base_url,
        home=logs,
    )
    # A second endpoint on the same fake server, without native structured output.
    plain = {"base_url": fake_model.base_url, "api_key": "test-key", "native_output": False}
    # And one whose key variable is not set: a model on it cannot be resolved.
    keyless = {"base_url": fake_model.base_url, "api_key_env": "THINK_TEST_UNSET_KEY"}
    # And one with its own prices (dollars per million tokens): tests/models/test_usage.py.
    priced = {
        "base_url": fake_model.base_url,
        "api_key": "test-key",
        "prices": {"input": 2, "output": 8, "cached_input": 0.5},
    }
    # And one on a port nothing listens on: every request to it is refused at once
    # (tests/models/test_fallback.py).
    down = {"base_url": f"http://127.0.0.1:{free_port()}/v1", "api_key": "test-key"}
    # And Anthropic's Messages API (tests/models/test_anthropic.py), its key from a variable.
    claude = {
        "api": "anthropic",
        "base_url": fake_anthropic.base_url,
        "api_key_env": "THINK_TEST_ANTHROPIC_KEY",
    }
    env["THINK_TEST_ANTHROPIC_KEY"] = "sk-ant-test"
    # And OpenAI's Responses API (tests/models/test_responses.py): as OpenAI's keeps nothing
    # by default, and in background mode.
    gpt = {
        "api": "responses",
        "base_url": fake_responses.base_url,
        "api_key_env": "THINK_TEST_OPENAI_KEY",
    }
    gptbg = {**gpt, "background": True}
    env["THINK_TEST_OPENAI_KEY"] = "sk-openai-test"
    endpoints = {"plain": plain, "keyless": keyless, "priced": priced, "down": down}
    env["THINK_MODEL_ENDPOINTS"] = json.dumps(
        {**endpoints, "claude": claude, "gpt": gpt, "gptbg": gptbg}
    )
    if services.temporal.ui_url:
        env["THINK_TEMPORAL_UI_URL"] = services.temporal.ui_url
    # The secret a conversation's MCP server names (tests/tools/test_mcp.py): never stored.
    env["MCP_TEST_AUTH"] = "Bearer mcp-test-secret"
    running = Stack(env=env, logs=logs)
    try:
        worker = running.start_worker()
        running.start_api()
        # Polling, and listening for the turns the gateway announces: a test's first turn
        # is started by it, not by the sweeper a second later.
        running.wait_polling(worker)
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def tenants(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway with two tenants' keys (`alice-key`: alice, `bob-key`: bob), on the suite's
    services and workers: its URL."""
    env = {**stack.env, "THINK_API_KEYS": "alice-key:alice,bob-key:bob"}
    with extra_gateway(env, tmp_path_factory.mktemp("tenants")) as url:
        yield url


@pytest.fixture(scope="session")
async def api(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.api_url, timeout=30) as client:
        yield client


@pytest.fixture(scope="session")
async def service(stack: Stack, settings: Settings) -> AsyncIterator[ThinkService]:
    """The Python turn API in the test process, against the stack's Postgres and Temporal."""
    agents = [
        "tests.agents:Helper",
        "tests.agents:Latest",
        "tests.agents:Debouncer",
        "tests.agents:Delegator",
        "tests.agents:Hooks",
        "tests.agents:Lead",
        "tests.agents:Gatekeeper",
        "tests.sub_agent_agents:Dispatcher",
    ]
    async with await ThinkService.connect(settings.model_copy(update={"agents": agents})) as svc:
        yield svc


@pytest.fixture(scope="session")
async def engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    # Tests inspect the database through SQLAlchemy Core: independent of the code under test.
    engine = create_async_engine(settings.sqlalchemy_url, pool_size=4)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
async def temporal(settings: Settings):  # type: ignore[no-untyped-def]
    return await connect(settings)


@pytest.fixture
def cid() -> str:
    """A fresh conversation id: how tests stay independent on shared services."""
    return f"c-{secrets.token_hex(6)}"


@pytest.fixture
def stack_home(tmp_path: Path) -> Path:
    """A fresh directory for the stack a test starts itself (`start_services`, `think dev`):
    asking for it is what marks the test `stack`, so `make test-fast` leaves it out."""
    return tmp_path


@pytest.fixture
def sigint_default() -> Iterator[None]:
    """For a test that sends Ctrl-C: SIGINT raises KeyboardInterrupt in this process, and
    the processes it starts meanwhile begin with SIGINT's default action. A suite started in
    the background (`make test &`) or under `nohup` inherits SIGINT ignored, and an ignored
    signal stays ignored in every child; a handled one is reset to the default on exec."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.fixture
def root() -> Path:
    return Path(__file__).resolve().parent.parent


# The fixtures that start a live stack (embedded Postgres and Temporal, then a worker and
# the API on top): every test that uses one, directly or through another fixture, is a
# `stack` test, and `make test-fast` (`-m "not stack"`) leaves it out.
STACK_FIXTURES = frozenset({"services", "stack_home", "infra"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if STACK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.stack)


WHOLE_FILE_STACK = "pytestmark = pytest.mark.stack"
"""A test file whose every test needs the stack says so once, with this line."""


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """When only tests without the stack run (`make test-fast`: `-m "not stack"`), a file
    marked `stack` as a whole is not imported at all: building some files' tests costs more
    than running the fast tier's (schemathesis draws test_fuzz.py's cases at collection)."""
    if config.option.markexpr != "not stack" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    lines = collection_path.read_text(encoding="utf-8").splitlines()
    return True if WHOLE_FILE_STACK in lines else None


NOT_RUN = "not_run"
"""A part of a passing test that could not run here (see `not_run`): kept in the test's
report (`user_properties`), which reaches the summary from every process of a `-n` run."""


@pytest.fixture
def not_run(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Note a part of this test that could not run where the suite runs, and why: the test
    still runs (and passes or fails on the rest), and the summary lists the note with the
    checks that did not run."""

    def note(reason: str) -> None:
        request.node.user_properties.append((NOT_RUN, reason))

    return note


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say plainly which checks did not run, and why, under the usual counts: a green run
    without Node is not the same as a green run with it."""
    reasons: dict[str, int] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call":
                continue
            for name, note in getattr(report, "user_properties", ()):
                if name == NOT_RUN:
                    reasons[note] = reasons.get(note, 0) + 1
    for report in terminalreporter.stats.get("skipped", []):
        if isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        terminalreporter.section("checks that did not run")
        for reason, count in sorted(reasons.items()):
            terminalreporter.write_line(f"{count} test{'s' if count > 1 else ''}: {reason}")
