"""The agent: the `Think` base class a team subclasses, its hooks' contexts, the turn API on
the agent itself (`self.run_turn(...)`), compaction driven by its hooks, and the registry of
hosted agents.

Who may import it: `turns`, `engine`, `schedules`, `server` and the apps (see the layers in
docs/architecture.md). It imports the layers below it (sessions, tools, models, storage).
"""

from think.agent._registry import AgentRegistry
from think.agent._think import Think

__all__ = ["AgentRegistry", "Think"]
