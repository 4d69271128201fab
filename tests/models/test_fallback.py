"""Fallback chains: a list of models for a step, the next asked when one fails before it
answers (unreachable, overloaded, refusing our key), the answering one recorded; a model that
breaks mid-answer has the step reset and retried from the next model; a request refused for
what it is (a 400) is not handed on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests._sse import chunks, read_stream
from tests._turn_helpers import wait_turn
from think.exceptions import ModelError
from think.models import (
    FallbackModel,
    Finish,
    ModelEvent,
    ModelRequest,
    TextDelta,
    Usage,
    answering,
    chain_of,
)
from think.testing import FakeOpenAIServer, disconnect, error, text

# -- the chain, on clients of its own ----------------------------------------------------------


class Canned:
    """A model client that answers `words`, or fails with `failure` after `after` events."""

    def __init__(
        self, name: str, words: str = "", failure: ModelError | None = None, after: int = 0
    ) -> None:
        self._name, self.words, self.failure, self.after = name, words, failure, after
        self.asked = 0

    @property
    def name(self) -> str:
        return self._name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.asked += 1
        events: list[ModelEvent] = [TextDelta(delta=w) for w in self.words.split()]
        for index, event in enumerate(events):
            if self.failure is not None and index == self.after:
                raise self.failure
            yield event
        if self.failure is not None:
            raise self.failure
        yield Finish(usage=Usage(input_tokens=1, output_tokens=len(events)))


REQUEST = ModelRequest(model="any", messages=[{"role": "user", "content": "hi"}])


async def answer(model: FallbackModel) -> list[ModelEvent]:
    return [event async for event in model.stream(REQUEST)]


async def test_the_next_model_is_asked_when_one_fails_before_answering() -> None:
    down = Canned("a", failure=ModelError("unreachable", retryable=True))
    refusing = Canned("b", failure=ModelError("bad key", retryable=False, status=401))
    up = Canned("c", words="hello there")
    chain = FallbackModel([down, refusing, up])
    events = await answer(chain)
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["hello", "there"]
    assert (down.asked, refusing.asked, up.asked) == (1, 1, 1)
    assert answering(chain) is up and chain.name == "c"
    assert chain_of(chain) == [down, refusing, up]


async def test_a_request_refused_for_what_it_is_is_not_handed_on() -> None:
    bad = Canned("a", failure=ModelError("context too long", retryable=False, status=400))
    spare = Canned("b", words="never")
    with pytest.raises(ModelError, match="context too long"):
        await answer(FallbackModel([bad, spare]))
    assert spare.asked == 0


async def test_a_failure_after_the_answer_began_is_the_turns_to_recover() -> None:
    breaking = Canned("a", words="half an", failure=ModelError("dropped", retryable=True), after=1)
    spare = Canned("b", words="never")
    chain = FallbackModel([breaking, spare])
    with pytest.raises(ModelError, match="dropped"):
        await answer(chain)
    assert spare.asked == 0 and answering(chain) is breaking


async def test_when_every_model_fails_the_error_names_each() -> None:
    first = Canned("a", failure=ModelError("overloaded", retryable=True, status=529))
    last = Canned("b", failure=ModelError("unreachable", retryable=True))
    with pytest.raises(ModelError) as failed:
        await answer(FallbackModel([first, last]))
    assert str(failed.value) == ("every model of the chain failed: a: overloaded; b: unreachable")
    assert failed.value.retryable


async def test_a_retry_begins_at_the_model_after_the_one_that_failed() -> None:
    a, b, c = Canned("a", words="x"), Canned("b", words="y"), Canned("c", words="z")
    chain = FallbackModel([a, b, c], start=4)  # four failures so far: begin at b
    await answer(chain)
    assert (a.asked, b.asked, c.asked) == (0, 1, 0)


# -- whole turns -----------------------------------------------------------------------------------


async def chained_turn(api: httpx.AsyncClient, cid: str, models: list[str]) -> dict[str, Any]:
    settings = {"model": models}
    return await wait_turn(api, "tuned", cid, "go", body={"settings": settings}, wait_timeout=30)


async def test_an_unreachable_first_model_is_passed_over_in_the_same_attempt(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("answered by the second"))
    done = await chained_turn(api, cid, ["down/model-a", "priced/model-b"])
    assert done["status"] == "completed", done
    assert done["message"]["parts"][-1]["text"] == "answered by the second"
    assert done["usage"]["models"] == ["priced/model-b"]  # which model answered
    assert done["usage"]["cost"] is not None  # at the answering model's prices
    assert [r["body"]["model"] for r in fake_model.requests(cid)] == ["model-b"]
    _, events = await read_stream(api, done["stream_url"])
    assert "reset-step" not in [c["type"] for c in chunks(events)]


async def test_an_overloaded_first_model_is_passed_over(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, error(503, "overloaded"), text("from the spare"))
    done = await chained_turn(api, cid, ["plain/model-a", "plain/model-b"])
    assert done["status"] == "completed", done
    assert [r["body"]["model"] for r in fake_model.requests(cid)] == ["model-a", "model-b"]
    assert done["usage"]["models"] == ["plain/model-b"]


async def test_a_model_that_breaks_mid_answer_is_reset_and_the_next_asked(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("half an ans") + disconnect(), text("a whole answer"))
    done = await chained_turn(api, cid, ["plain/model-a", "plain/model-b"])
    assert done["status"] == "completed", done
    assert done["message"]["parts"][-1]["text"] == "a whole answer"
    assert [r["body"]["model"] for r in fake_model.requests(cid)] == ["model-a", "model-b"]
    _, events = await read_stream(api, done["stream_url"])
    assert "reset-step" in [c["type"] for c in chunks(events)]


async def test_a_bad_request_is_not_handed_to_the_next_model(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, error(400, "unsupported parameter"), text("never"))
    done = await chained_turn(api, cid, ["plain/model-a", "plain/model-b"])
    assert done["status"] == "error", done
    assert "unsupported parameter" in done["error"]
    assert fake_model.calls(cid) == 1
