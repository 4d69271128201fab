"""`think chat`: a line-based terminal client of one conversation, built on `ThinkClient`.

Each line read is a turn. Its reply streams as it is written: text as it arrives, a tool call
as `→ name {input}`, its result as `← output`. A tool that needs approval asks
`approve name {input}? [y/N]` and sends the answer; the turn then goes on. Ctrl-C during a
reply cancels the turn; `/quit` or the end of the input leaves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TextIO

from think.client._errors import ThinkAPIError, ThinkConnectionError
from think.client._models import StreamChunk, new_idempotency_key
from think.client._sync import ThinkClient

QUIT = frozenset({"/quit", "/exit"})
HELP = frozenset({"/help", "/?"})
HELP_TEXT = """\
Each line you type is a turn; the reply streams as it is written.
  /help        this text (answered here, not by the agent)
  /quit /exit  leave (so does the end of the input, Ctrl-D)
  Ctrl-C       during a reply: cancel that turn
A tool that needs approval asks `approve name {input}? [y/N]` first.
Any other line, even one starting with `/` (the offline model's `/call tool {json}`),
goes to the agent."""


def run_chat(
    *,
    url: str,
    agent: str,
    conversation: str | None,
    api_key: str | None,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    """Talk to `agent` until the input ends; returns the exit status."""
    with ThinkClient(url, api_key=api_key) as client:
        try:
            # Creating is idempotent with an id, and checks the agent before the first line.
            conv = client.create_conversation(agent, id=conversation)
        except ThinkAPIError as error:
            print(f"think chat: error: {error}", file=stderr)
            return 2 if error.status < 500 else 1
        except ThinkConnectionError as error:
            print(f"think chat: cannot reach {url}: {error}", file=stderr)
            return 1
        print(
            f"think chat: conversation {conv.id} with agent {agent!r}; "
            "/help for help; /quit or end of input leaves",
            file=stderr,
            flush=True,
        )
        return _Chat(client, agent, conv.id, stdin, stdout, stderr).run()


@dataclass(eq=False)
class _Chat:
    """One conversation, talked to line by line: what it was started with, and where the
    terminal stands."""

    client: ThinkClient
    agent: str
    cid: str
    stdin: TextIO
    out: TextIO
    err: TextIO
    tty: bool = field(init=False)
    """The input is a terminal: prompt for it, and let it echo the answers."""
    at_line_start: bool = field(default=True, init=False)
    input_ended: bool = field(default=False, init=False)
    tools: dict[str, tuple[str, Any]] = field(default_factory=dict, init=False)
    """Each tool call's name and input, by id, to name it when it asks for approval."""
    delegated: dict[str, str] = field(default_factory=dict, init=False)
    """A sub-agent's answer so far, by tool call (from its preliminary tool outputs)."""
    failed: bool = field(default=False, init=False)
    """A turn ended in `error`, or could not be submitted or followed: the exit status is 1,
    so a script piping lines into `think chat` learns of it."""

    def __post_init__(self) -> None:
        self.tty = self.stdin.isatty()

    def run(self) -> int:
        while not self.input_ended:
            if self.tty:
                self.write("you> ")
            try:
                line = self.stdin.readline()
            except KeyboardInterrupt:
                self.write("\n")
                return self.status()
            if not line:
                break
            text = line.strip()
            if text in QUIT:
                break
            if text in HELP:
                print(HELP_TEXT, file=self.err, flush=True)
                continue
            if text:
                self.turn(text)
        return self.status()

    def status(self) -> int:
        """0, or 1 when a turn ended in `error` (or could not be submitted or followed)."""
        if self.failed:
            print("think chat: a turn ended in error", file=self.err, flush=True)
        return 1 if self.failed else 0

    def turn(self, text: str) -> None:
        try:
            turn = self.client.submit(
                self.agent, self.cid, text, idempotency_key=new_idempotency_key()
            )
        except (ThinkAPIError, ThinkConnectionError) as error:
            self.problem(error)
            return
        try:
            self.follow(turn.turn_id)
        except KeyboardInterrupt:
            self.line()
            try:
                self.client.cancel(self.agent, self.cid, turn.turn_id, "cancelled in think chat")
                self.write("[cancelled]\n")
            except (ThinkAPIError, ThinkConnectionError) as error:
                self.problem(error)
        except (ThinkAPIError, ThinkConnectionError) as error:
            self.problem(error)
        self.line()

    def follow(self, turn_id: str) -> None:
        last: int | None = None
        while True:
            decided = False
            with self.client.stream_turn(self.agent, self.cid, turn_id, last) as stream:
                for chunk in stream:
                    decided = self.show(turn_id, chunk) or decided
            last = stream.last_event_id
            # A stream follows its turn through a pause; should one have ended at the pause,
            # the decision made the turn go on: follow it from where we are.
            if not decided or self.client.get_turn(self.agent, self.cid, turn_id).terminal:
                return

    def show(self, turn_id: str, chunk: StreamChunk) -> bool:
        """Print one chunk; True when it asked for, and got, an approval decision."""
        kind = chunk.type
        if kind == "text-delta":
            self.write(str(chunk.get("delta", "")))
        elif kind == "tool-input-available":
            name, value = str(chunk.get("toolName", "tool")), chunk.get("input")
            self.tools[str(chunk.get("toolCallId"))] = (name, value)
            self.line()
            self.write(f"→ {name} {_json(value)}\n")
        elif kind == "tool-output-available" and chunk.get("preliminary"):
            self.progress(str(chunk.get("toolCallId")), chunk.get("output"))
        elif kind == "tool-output-available":
            output = chunk.get("output")
            self.line()
            self.write(f"← {output if isinstance(output, str) else _json(output)}\n")
        elif kind == "tool-output-error":
            self.line()
            self.write(f"← error: {chunk.get('errorText', '')}\n")
        elif kind == "tool-output-denied":
            self.line()
            self.write("← denied\n")
        elif kind == "tool-approval-request":
            return self.ask(turn_id, chunk)
        elif kind == "reset-step":
            self.line()
            self.write("[the model was interrupted; it answers again]\n")
        elif kind == "error":
            self.failed = True
            self.line()
            self.write(f"error: {chunk.get('errorText', '')}\n")
        elif kind == "abort":
            self.line()
            self.write(f"[stopped: {chunk.get('reason') or 'cancelled'}]\n")
        return False

    def progress(self, call_id: str, output: Any) -> None:
        """A sub-agent's progress (docs/sub-agents.md): where it runs, then its answer as it
        grows, indented under the call; the call's final output follows as any tool's."""
        if not isinstance(output, dict) or not isinstance(output.get("text"), str):
            return
        text = output["text"]
        if call_id not in self.delegated:
            self.line()
            self.write(f"  {output.get('agent', 'agent')} ({output.get('conversation_id')}): ")
            self.delegated[call_id] = ""
        shown = self.delegated[call_id]
        if text.startswith(shown) and len(text) > len(shown):
            self.write(text[len(shown) :].replace("\n", "\n  "))
            self.delegated[call_id] = text

    def ask(self, turn_id: str, chunk: StreamChunk) -> bool:
        name, value = self.tools.get(str(chunk.get("toolCallId")), ("tool", None))
        self.line()
        self.write(f"approve {name} {_json(value)}? [y/N] ")
        answer = self.stdin.readline()
        if not answer:
            self.input_ended = True  # no one left to ask: refuse, finish the turn, leave
        # A terminal has echoed the answer and its newline; piped input is shown here.
        self.at_line_start = self.tty
        self.write("" if self.tty else f"{answer.strip()}\n")
        approved = answer.strip().lower() in ("y", "yes")
        try:
            self.client.approve(
                self.agent, self.cid, turn_id, str(chunk.get("approvalId")), approved
            )
        except ThinkAPIError as error:
            self.problem(error)
            return False
        return True

    def write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self.at_line_start = text.endswith("\n")

    def line(self) -> None:
        """Go to the start of a line, if not there already."""
        if not self.at_line_start:
            self.write("\n")

    def problem(self, error: Exception) -> None:
        self.failed = True
        self.line()
        print(f"error: {error}", file=self.err, flush=True)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
