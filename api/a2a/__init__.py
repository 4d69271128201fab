"""The A2A endpoint: every hosted agent as an A2A v1.0 agent at `/a2a/{agent}`, with its
agent card, on `a2a-sdk`'s JSON-RPC dispatcher and the one front door (docs/protocols.md).

A context is a conversation, a task is a turn, `input-required` is a turn awaiting a person
or a client tool; nothing is stored for A2A's sake.
"""

from api.a2a._routes import agent_card, install

__all__ = ["agent_card", "install"]
