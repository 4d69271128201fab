"""The messengers a process serves: each agent's declarations (`Think.get_messengers()`,
read once) and one platform client per (agent, messenger), opened on first use and closed
with the process. The gateway (webhooks, button presses) and the worker (deliveries) each
hold one."""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client

from think._settings import Settings
from think.agent import AgentRegistry, Think
from think.messengers import Messenger, Platform, check_messengers
from think.storage import Store

log = logging.getLogger("think.messengers")


class MessengerHub:
    def __init__(
        self, store: Store, temporal: Client, settings: Settings, registry: AgentRegistry
    ) -> None:
        self.store = store
        self.temporal = temporal
        self.settings = settings
        self.registry = registry
        self._declared: dict[str, dict[str, Messenger]] = {}
        self._clients: dict[tuple[str, str], Platform] = {}

    @property
    def task_queue(self) -> str:
        return self.settings.task_queue

    def agent(self, name: str) -> type[Think] | None:
        return self.registry.get(name) if name in self.registry else None

    def declared(self, agent: type[Think]) -> dict[str, Messenger]:
        """The agent's messengers by name (checked, as at the worker's start)."""
        found = self._declared.get(agent.name)
        if found is None:
            messengers = list(agent().get_messengers())
            check_messengers(agent.name, messengers)
            found = {m.name: m for m in messengers}
            self._declared[agent.name] = found
        return found

    def messenger(self, agent: str, name: str) -> tuple[type[Think], Messenger] | None:
        cls = self.agent(agent)
        if cls is None:
            return None
        messenger = self.declared(cls).get(name)
        return None if messenger is None else (cls, messenger)

    def client(self, agent: str, messenger: Messenger) -> Platform:
        key = (agent, messenger.name)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = messenger.client()
        return client

    def check_all(self) -> None:
        """Load and check every agent's declarations: a worker refuses to start on a bad one."""
        check_registry(self.registry)

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        results = await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                log.debug("closing a messenger client failed: %s", result)


def check_registry(registry: AgentRegistry) -> None:
    """Every hosted agent's messenger declarations, checked (`MessengerConfigError` names the
    first that cannot run): what a worker does before it connects to anything."""
    for agent in registry:
        check_messengers(agent.name, list(agent().get_messengers()))
