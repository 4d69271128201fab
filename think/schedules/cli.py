"""`think schedules`: the deployment's scheduled tasks from the terminal, straight from
Temporal (no gateway needed), and `--trigger` to run one now."""

from __future__ import annotations

from think._settings import Settings
from think.agent import AgentRegistry
from think.schedules._operations import list_schedules, trigger
from think.workflows import connect


async def schedules_command(
    settings: Settings, agent: str | None, task: str | None, tenant: str, conversation: str | None
) -> list[str]:
    """The lines to print: one per task (or one saying what was triggered)."""
    registry = AgentRegistry.from_paths(settings.agents)
    client = await connect(settings)
    queue = settings.task_queue
    if task is not None:
        cls = registry.get(agent or "")
        await trigger(client, queue, cls, task, tenant, conversation)
        return [f"triggered {cls.name}/{task}: one occurrence starts now"]
    lines = []
    for cls in [registry.get(agent)] if agent else list(registry):
        for s in await list_schedules(client, queue, cls, tenant):
            nxt = s.next_runs[0].isoformat(timespec="minutes") if s.next_runs else "-"
            where = f" -> {s.conversation_id}" if s.conversation_id else ""
            paused = " (paused)" if s.paused else ""
            lines.append(
                f"{cls.name}/{s.task}: {s.schedule!r} [{s.timezone or 'UTC'}] {s.kind}{where}; "
                f"next {nxt}; last {s.last_result or '-'}{paused}"
            )
    return lines or ["no scheduled tasks"]
