"""Tools as typed Python, without a stack: schemas, docstrings, validation, policy, outputs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field, ValidationError
from typing_extensions import TypedDict

from think import Tool, ToolContext, ToolError, UserError, tool
from think.tools._schema import parse_docstring
from think.tools._tool import DEFAULT_HEARTBEAT_SECONDS, ToolPolicy, tool_output_json


def context(**update: Any) -> ToolContext:
    return ToolContext(
        agent="a", conversation_id="c", turn_id="turn_1", tool_call_id="call_9", tool_name="t"
    ).model_copy(update=update)


# -- representative tools ------------------------------------------------------------------


class Place(BaseModel):
    """Where to go."""

    city: str
    country: str = "FR"


@tool
async def plan(
    place: Place,
    days: Annotated[int, Field(ge=1, le=14, description="How many days")] = 3,
    pace: Literal["slow", "fast"] = "slow",
    ctx: ToolContext | None = None,
) -> str:
    """Plan a trip."""
    assert ctx is not None
    return f"{place.city} {days} {pace} {ctx.turn_id}"


@tool
def book(city: str, nights: int, breakfast: bool = False) -> str:
    """Book a hotel room.

    Prefer this over guessing prices.

    Args:
        city: The city, as the user
            spelled it.
        nights (int): How many nights to stay.
        breakfast (bool, optional): Whether breakfast is included.

    Returns:
        A booking reference.

    Raises:
        ValueError: When the city is unknown.
    """
    return f"{city}:{nights}:{breakfast}"


class Color(enum.Enum):
    """A paint colour."""

    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Size:
    width: int
    height: int = 1


class Label(TypedDict):
    text: str


@tool
async def paint(
    color: Color,
    sizes: list[Size],
    labels: dict[str, Label],
    note: str | None = None,
    tags: list[str] | None = None,
) -> dict[str, Any]:
    """Paint things.

    Parameters
    ----------
    color : Color
        The colour to use.
    sizes : list of Size
        Every surface,
        one by one.
    labels : dict
        Labels by surface name.

    Returns
    -------
    dict
        What was painted.

    Examples
    --------
    paint(color="red", sizes=[], labels={})
    """
    return {"color": color, "sizes": sizes, "labels": labels, "note": note}


class Node(BaseModel):
    name: str
    children: list[Node] = []


@tool
def walk(root: Node) -> int:
    """Count the nodes of a tree.

    :param root: The root of the tree.
    :type root: Node
    :returns: The number of nodes.
    :rtype: int
    """

    def count(node: Node) -> int:
        return 1 + sum(count(c) for c in node.children)

    return count(root)


# -- schemas -------------------------------------------------------------------------------


def test_plan_schema_is_exact() -> None:
    spec = plan.spec
    assert spec.name == "plan"
    assert spec.description == "Plan a trip."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "place": {
                "type": "object",
                "description": "Where to go.",
                "properties": {
                    "city": {"type": "string"},
                    "country": {"type": "string", "default": "FR"},
                },
                "required": ["city"],
            },
            "days": {
                "type": "integer",
                "description": "How many days",
                "minimum": 1,
                "maximum": 14,
                "default": 3,
            },
            "pace": {"type": "string", "enum": ["slow", "fast"], "default": "slow"},
        },
        "required": ["place"],
        "additionalProperties": False,
    }


def test_google_docstring_schema_is_exact() -> None:
    spec = book.spec
    assert spec.description == "Book a hotel room.\n\nPrefer this over guessing prices."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city, as the user spelled it."},
            "nights": {"type": "integer", "description": "How many nights to stay."},
            "breakfast": {
                "type": "boolean",
                "description": "Whether breakfast is included.",
                "default": False,
            },
        },
        "required": ["city", "nights"],
        "additionalProperties": False,
    }


def test_numpy_docstring_enum_dataclass_typeddict_schema_is_exact() -> None:
    spec = paint.spec
    assert spec.description == (
        'Paint things.\n\nExamples\n--------\npaint(color="red", sizes=[], labels={})'
    )
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "color": {
                "type": "string",
                "enum": ["red", "blue"],
                "description": "The colour to use.",
            },
            "sizes": {
                "type": "array",
                "description": "Every surface, one by one.",
                "items": {
                    "type": "object",
                    "properties": {
                        "width": {"type": "integer"},
                        "height": {"type": "integer", "default": 1},
                    },
                    "required": ["width"],
                    "additionalProperties": False,
                },
            },
            "labels": {
                "type": "object",
                "description": "Labels by surface name.",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                    "additionalProperties": False,
                },
            },
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "tags": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
            },
        },
        "required": ["color", "sizes", "labels"],
        "additionalProperties": False,
    }


def test_a_recursive_type_keeps_its_defs_and_nothing_else_does() -> None:
    spec = walk.spec
    assert spec.description == "Count the nodes of a tree."
    node = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "default": []},
        },
        "required": ["name"],
    }
    assert spec.parameters == {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node", "description": "The root of the tree."}},
        "required": ["root"],
        "additionalProperties": False,
        "$defs": {"Node": node},
    }
    assert "$defs" not in plan.spec.parameters and "$defs" not in paint.spec.parameters


def test_no_parameters_and_a_parameter_named_title() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    @tool
    def rename(title: str) -> str:
        """Rename."""
        return title

    assert ping.spec.parameters == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert rename.spec.parameters["properties"] == {"title": {"type": "string"}}


def test_spec_is_a_copy() -> None:
    plan.spec.parameters["properties"].clear()
    assert "place" in plan.spec.parameters["properties"]


def test_context_parameter_is_hidden_in_every_spelling() -> None:
    @tool
    def a(x: int, ctx: ToolContext) -> None:
        """A."""

    @tool
    def b(x: int, context: ToolContext | None = None) -> None:
        """B."""

    assert a.context_param == "ctx" and b.context_param == "context"
    assert plan.context_param == "ctx"
    for t in (a, b, plan):
        assert set(t.spec.parameters["properties"]).isdisjoint({"ctx", "context"})


# -- descriptions --------------------------------------------------------------------------


def test_annotations_win_over_the_docstring() -> None:
    @tool
    def f(
        a: Annotated[int, Field(description="from Field")],
        b: Annotated[int, "plain text"],
        c: Annotated[int, Field(ge=0), "plain with a constraint"],
        d: int = Field(default=2, description="from a default Field"),
        e: int = 5,
    ) -> None:
        """F.

        Args:
            a: doc a
            b: doc b
            c: doc c
            d: doc d
            e: doc e
        """

    props = f.spec.parameters["properties"]
    assert props == {
        "a": {"type": "integer", "description": "from Field"},
        "b": {"type": "integer", "description": "plain text"},
        "c": {"type": "integer", "description": "plain with a constraint", "minimum": 0},
        "d": {"type": "integer", "description": "from a default Field", "default": 2},
        "e": {"type": "integer", "description": "doc e", "default": 5},
    }
    assert f.spec.description == "F."
    with pytest.raises(ToolError, match=r"c: Input should be greater than or equal to 0"):
        f.validate({"a": 1, "b": 1, "c": -1})


def test_an_explicit_description_replaces_the_docstring_but_not_its_parameters() -> None:
    named = tool(name="book_room", description="Reserve a room.")(book.fn)
    assert named.name == "book_room" and named.description == "Reserve a room."
    assert named.spec.parameters == book.spec.parameters


def test_google_style() -> None:
    doc = parse_docstring(
        """Summary line.

        More detail.

        Arguments:
            x (list[tuple[int, int]], optional): First,
                and more.

            *names: Ignored by tools but parsed.
            y: Second.

        Example:
            f(1)

        Yields:
            Nothing.
        """
    )
    assert doc.description == "Summary line.\n\nMore detail.\n\nExample:\n    f(1)"
    assert doc.params == {
        "x": "First, and more.",
        "names": "Ignored by tools but parsed.",
        "y": "Second.",
    }


def test_google_returns_inline_and_no_sections() -> None:
    doc = parse_docstring("Do it.\n\nReturns: the result.\n    Really.\n\nNote: kept.")
    assert doc == ("Do it.\n\nNote: kept.", {})
    assert parse_docstring(None) == ("", {})
    assert parse_docstring("   One line.   ") == ("One line.", {})


def test_numpy_style() -> None:
    doc = parse_docstring(
        """Summary.

        Parameters
        ----------
        x, y : int
            Coordinates.
        label
            A label,
            on two lines.

        Raises
        ------
        ValueError
            Sometimes.

        Notes
        -----
        Kept.
        """
    )
    assert doc.description == "Summary.\n\nNotes\n-----\nKept."
    assert doc.params == {
        "x": "Coordinates.",
        "y": "Coordinates.",
        "label": "A label, on two lines.",
    }


def test_sphinx_style() -> None:
    doc = parse_docstring(
        """Summary.

        :param int x: The x,
            continued.
        :param list[str] names: Names.
        :type names: list[str]
        :keyword flag: A flag.
        :raises ValueError: Never.
        :returns: Something.
        :rtype: int
        :seealso: kept, not a parameter field
        """
    )
    assert doc.description == "Summary.\n\n:seealso: kept, not a parameter field"
    assert doc.params == {"x": "The x, continued.", "names": "Names.", "flag": "A flag."}


# -- validation ----------------------------------------------------------------------------


def test_validation_message_names_tool_fields_expectations_and_inputs() -> None:
    @tool(name="book")
    def book_it(city: str, nights: int) -> None:
        """Book."""

    with pytest.raises(ToolError) as caught:
        book_it.validate({"nights": "three"})
    assert str(caught.value) == (
        "invalid arguments for tool 'book': city: Field required; nights: Input should be a "
        "valid integer, unable to parse string as an integer (got 'three')"
    )


def test_validation_paths_extras_and_truncation() -> None:
    with pytest.raises(ToolError) as caught:
        paint.validate(
            {
                "color": "green",
                "sizes": [{"width": 1}, {"width": "x" * 200}],
                "labels": {"door": {}},
                "nope": 1,
            }
        )
    message = str(caught.value)
    assert message.startswith("invalid arguments for tool 'paint': ")
    assert "color: Input should be 'red' or 'blue' (got 'green')" in message
    assert "sizes[1].width: Input should be a valid integer" in message
    assert "(got '" + "x" * 78 + "…)" in message  # 80 characters of repr at most
    assert "labels.door.text: Field required" in message
    assert "nope: Extra inputs are not permitted (got 1)" in message


def test_validation_of_a_non_object_and_of_many_errors() -> None:
    with pytest.raises(ToolError, match=r"arguments: Input should be a valid dictionary"):
        book.validate([1, 2])  # type: ignore[arg-type]  # what a broken model may send

    @tool
    def many(
        a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int, i: int, j: int, k: int
    ) -> None:
        """Many."""

    with pytest.raises(ToolError) as caught:
        many.validate({})
    assert str(caught.value).endswith("j: Field required; and 1 more")


def test_validation_is_lax_and_returns_typed_values() -> None:
    assert book.validate({"city": "Oslo", "nights": "3", "breakfast": "true"}) == {
        "city": "Oslo",
        "nights": 3,
        "breakfast": True,
    }
    arguments = paint.validate(
        {"color": "red", "sizes": [{"width": "2"}], "labels": {"door": {"text": "Front"}}}
    )
    assert arguments == {
        "color": Color.RED,
        "sizes": [Size(width=2, height=1)],
        "labels": {"door": {"text": "Front"}},
        "note": None,
        "tags": None,
    }
    assert plan.validate({"place": {"city": "Paris"}})["place"] == Place(city="Paris")


# -- running -------------------------------------------------------------------------------


async def test_sync_tools_run_in_a_thread_and_async_tools_on_the_loop() -> None:
    loop_thread = threading.get_ident()

    @tool
    def sync_tool(x: int, ctx: ToolContext) -> tuple[int, int, str]:
        """Sync."""
        return x, threading.get_ident(), ctx.idempotency_key

    @tool
    async def async_tool() -> int:
        """Async."""
        return threading.get_ident()

    x, thread, key = await sync_tool(context(), **sync_tool.validate({"x": "4"}))
    assert (x, key) == (4, "turn_1:call_9") and thread != loop_thread
    assert await async_tool() == loop_thread


async def test_context_is_required_when_declared_and_callable_objects_work() -> None:
    with pytest.raises(UserError, match=r"needs a ToolContext"):
        await plan(None, **plan.validate({"place": {"city": "Paris"}}))
    assert await plan(context(), **plan.validate({"place": {"city": "Rome"}})) == (
        "Rome 3 slow turn_1"
    )

    class Greeter:
        """Greet someone."""

        async def __call__(self, who: str) -> str:
            return f"hi {who}"

    greeter = tool(name="greet")(Greeter())
    assert greeter.description == "Greet someone."
    assert greeter.spec.parameters["properties"] == {"who": {"type": "string"}}
    assert await greeter(**greeter.validate({"who": "Ada"})) == "hi Ada"


def test_tool_context_config_and_key() -> None:
    ctx = context()
    assert ctx.config == {}
    assert context(config={"tier": "pro"}).config == {"tier": "pro"}
    assert ctx.model_copy(update={"attempt": 3}).idempotency_key == ctx.idempotency_key
    with pytest.raises(ValidationError):
        ctx.turn_id = "other"  # type: ignore[misc]  # the assignment under test


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda: tool(lambda a: a), r"'<lambda>' is not accepted", id="lambda"),
        pytest.param(lambda: tool(name="get weather")(book.fn), r"'get weather'", id="space"),
        pytest.param(lambda: tool(name="v")(lambda *a: a), r"\*args and \*\*kwargs", id="args"),
        pytest.param(lambda: tool(_positional_only), r"positional-only", id="posonly"),
        pytest.param(lambda: tool(_unschemable), r"cannot be described", id="type"),
        pytest.param(lambda: tool(_callable_param), r"no JSON Schema", id="callable"),
    ],
)
def test_misdeclared_tools_fail_at_declaration(make: Callable[[], Tool], message: str) -> None:
    with pytest.raises(UserError, match=message):
        make()


def _positional_only(a: int, /) -> None:
    """P."""


class _Opaque:
    pass


def _unschemable(a: _Opaque) -> None:
    """U."""


def _callable_param(a: Callable[[int], int]) -> None:
    """C."""


# -- policy --------------------------------------------------------------------------------


def test_policy_defaults_agree_with_the_decorator() -> None:
    assert book.policy == ToolPolicy()
    assert ToolPolicy() == ToolPolicy(
        timeout_seconds=300,
        heartbeat_seconds=None,
        max_attempts=1,
        retry_initial_seconds=1.0,
        retry_backoff=2.0,
        retry_max_seconds=30.0,
        needs_approval=False,
        approval_timeout_seconds=None,
    )
    assert book.policy.heartbeat_timeout_seconds == DEFAULT_HEARTBEAT_SECONDS == 30.0
    assert book.needs_approval is False and book.may_need_approval is False


def test_policy_from_decorator_keywords() -> None:
    @tool(
        timeout=dt.timedelta(minutes=2),
        heartbeat_timeout=5,
        retries=2,
        retry_backoff=1.5,
        needs_approval=True,
        approval_timeout=dt.timedelta(hours=1),
    )
    def careful(x: int) -> int:
        """Careful."""
        return x

    assert careful.policy == ToolPolicy(
        timeout_seconds=120,
        heartbeat_seconds=5,
        max_attempts=3,
        retry_backoff=1.5,
        needs_approval=True,
        approval_timeout_seconds=3600,
    )
    assert careful.policy.heartbeat_timeout_seconds == 5


def test_policy_is_frozen_plain_data() -> None:
    policy = ToolPolicy(timeout_seconds=10, needs_approval=True)
    assert ToolPolicy.model_validate_json(policy.model_dump_json()) == policy
    with pytest.raises(ValidationError):
        policy.timeout_seconds = 5  # type: ignore[misc]  # the assignment under test
    for bad in (
        {"timeout_seconds": 0},
        {"heartbeat_seconds": -1},
        {"max_attempts": 0},
        {"retry_backoff": 0.5},
        {"timeout_seconds": math.inf},
        {"retry_initial_seconds": 10, "retry_max_seconds": 5},
    ):
        with pytest.raises(ValidationError):
            ToolPolicy(**bad)


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"timeout": -1}, r"timeout=-1 must be a positive number of seconds"),
        ({"timeout": 0}, r"timeout=0 must be a positive"),
        ({"timeout": math.nan}, r"timeout=nan must be a positive"),
        ({"timeout": True}, r"timeout=True must be a positive"),
        ({"timeout": dt.timedelta(0)}, r"timeout=datetime.timedelta\(0\) must be"),
        ({"heartbeat_timeout": 0}, r"heartbeat_timeout=0 must be a positive"),
        ({"retries": -1}, r"retries=-1 must be a whole number"),
        ({"retries": 1.5}, r"retries=1.5 must be a whole number"),
        ({"retry_backoff": 0.5}, r"retry_backoff=0.5 must be a number of 1 or more"),
        ({"approval_timeout": 60}, r"approval_timeout=60 has no effect without needs_approval"),
        ({"needs_approval": True, "approval_timeout": -5}, r"approval_timeout=-5 must be"),
        ({"needs_approval": "yes"}, r"needs_approval='yes' must be True, False or a function"),
        ({"needs_approval": lambda: True}, r"the approval policy .* must accept two arguments"),
    ],
)
def test_bad_policy_keywords_are_user_errors(keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=rf"^tool 'book': {message}"):
        tool(**keywords)(book.fn)


# -- approval ------------------------------------------------------------------------------


async def test_approval_as_a_bool() -> None:
    gated = tool(needs_approval=True)(book.fn)
    assert gated.needs_approval is True and gated.may_need_approval
    assert await gated.approval_required({"city": "Oslo", "nights": 1}, context()) is True
    assert await book.approval_required({"city": "Oslo", "nights": 1}, context()) is False


async def test_approval_policy_sync_and_async() -> None:
    seen: list[tuple[dict[str, Any], ToolContext]] = []

    def expensive(arguments: dict[str, Any], ctx: ToolContext) -> bool:
        seen.append((arguments, ctx))
        arguments["nights"] = 0  # a policy cannot change what the tool receives
        return bool(ctx.config.get("strict")) or arguments["city"] == "Paris"

    async def night_owl(arguments: dict[str, Any], ctx: ToolContext) -> bool:
        return int(arguments["nights"]) > 7

    sync_gated = tool(needs_approval=expensive)(book.fn)
    async_gated = tool(needs_approval=night_owl, approval_timeout=60)(book.fn)
    assert sync_gated.needs_approval is expensive and sync_gated.may_need_approval
    assert sync_gated.policy.needs_approval and async_gated.policy.approval_timeout_seconds == 60

    arguments = sync_gated.validate({"city": "Oslo", "nights": 2})
    assert await sync_gated.approval_required(arguments, context()) is False
    assert arguments["nights"] == 2 and seen[0][1] == context()
    assert await sync_gated.approval_required(arguments, context(config={"strict": 1})) is True
    assert await sync_gated.approval_required({"city": "Paris", "nights": 1}, context())
    assert await async_gated.approval_required({"city": "Oslo", "nights": 9}, context())
    assert not await async_gated.approval_required({"city": "Oslo", "nights": 1}, context())


async def test_an_approval_policy_must_answer_with_a_bool() -> None:
    def forgot_return(arguments: dict[str, Any], ctx: ToolContext) -> bool:
        return None  # type: ignore[return-value]  # the mistake under test

    gated = tool(needs_approval=forgot_return)(book.fn)
    with pytest.raises(UserError, match=r"approval policy of tool 'book' returned None"):
        await gated.approval_required({"city": "Oslo", "nights": 1}, context())


# -- outputs -------------------------------------------------------------------------------


def test_tool_output_json() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque!"

    circular: list[Any] = []
    circular.append(circular)
    when = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert tool_output_json(
        {
            "place": Place(city="Oslo"),
            "size": Size(width=2),
            "color": Color.BLUE,
            "when": when,
            "day": when.date(),
            "tags": {"a"},
            "pair": (1, 2),
            "ratio": math.nan,
            "text": b"hi",
            "other": Opaque(),
            3: None,
        }
    ) == {
        "place": {"city": "Oslo", "country": "FR"},
        "size": {"width": 2, "height": 1},
        "color": "blue",
        "when": "2025-01-02T03:04:05Z",
        "day": "2025-01-02",
        "tags": ["a"],
        "pair": [1, 2],
        "ratio": None,
        "text": "hi",
        "other": "opaque!",
        "3": None,
    }
    assert tool_output_json(b"\xff\x00") == "_wA="
    assert tool_output_json(circular) == "[[...]]"
    assert tool_output_json("plain") == "plain" and tool_output_json(None) is None
