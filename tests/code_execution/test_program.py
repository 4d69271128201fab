"""`think.codemode.run_program` alone (no stack): a program in the sandbox, its calls answered
by the host in order, its result, its errors and its limits."""

from __future__ import annotations

from typing import Any

from think.codemode import CallAnswer, Paused, run_program

TOOLS = {"echo": {"description": "Echo the input.", "input_schema": {"type": "object"}}}


class Host:
    """Answers `echo` with its input, fails `boom`, pauses at `wait`; keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, str, Any]] = []

    async def __call__(self, seq: int, name: str, arguments: Any) -> CallAnswer:
        self.asked.append((seq, name, arguments))
        if name == "boom":
            return CallAnswer(error="boom failed")
        if name == "wait":
            raise Paused(seq)
        return CallAnswer(output={"echo": arguments})


async def test_calls_in_order_their_answers_and_the_last_expression_as_the_result() -> None:
    host = Host()
    code = (
        "import asyncio\n"
        "a = await tools.echo(x=1)\n"
        "both = await asyncio.gather(tools.echo(y=2), tools.echo(z=3))\n"
        "try:\n    await tools.boom()\nexcept ToolCallError as exc:\n    err = str(exc)\n"
        "print('said', a['echo']['x'])\n"
        "{'a': a, 'both': both, 'err': err, 'tools': describe()}"
    )
    ran = await run_program(code, TOOLS, host, timeout_seconds=30, max_calls=10)
    assert ran.error is None, ran
    assert ran.result == {
        "a": {"echo": {"x": 1}},
        "both": [{"echo": {"y": 2}}, {"echo": {"z": 3}}],
        "err": "boom failed",
        "tools": [{"name": "echo", **TOOLS["echo"]}],
    }
    assert ran.stdout == "said 1\n"
    assert host.asked == [
        (0, "echo", {"x": 1}),
        (1, "echo", {"y": 2}),
        (2, "echo", {"z": 3}),
        (3, "boom", {}),
    ]


async def test_a_pause_ends_the_run_at_that_call() -> None:
    host = Host()
    ran = await run_program(
        "await tools.echo(a=1)\nawait tools.wait()\nawait tools.echo(b=2)",
        TOOLS,
        host,
        timeout_seconds=30,
        max_calls=10,
    )
    assert (ran.paused_at, ran.calls) == (1, 2)
    assert [seq for seq, _, _ in host.asked] == [0, 1]


async def test_limits_and_failures_are_errors_not_crashes() -> None:
    host = Host()
    many = await run_program(
        "for i in range(5):\n    await tools.echo(i=i)",
        TOOLS,
        host,
        timeout_seconds=30,
        max_calls=3,
    )
    assert many.error is not None and "more than 3 tool calls" in many.error
    looping = await run_program(
        "while True:\n    pass", TOOLS, host, timeout_seconds=1, max_calls=3
    )
    assert looping.error == "the program ran longer than 1 s"
    broken = await run_program("def f(:", TOOLS, host, timeout_seconds=30, max_calls=3)
    assert broken.error is not None and broken.error.startswith("SyntaxError")
    raised = await run_program("return 1 / 0", TOOLS, host, timeout_seconds=30, max_calls=3)
    assert raised.error is not None and raised.error.startswith("ZeroDivisionError")
