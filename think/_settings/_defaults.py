"""The defaults of the settings that need a reason beside them: what each bounds, and why
there (the workspace quotas, the submission limit of a deployment with keys)."""

from __future__ import annotations

DEFAULT_WORKSPACE_MAX_FILE_BYTES = 10 * 1024 * 1024
"""One workspace file: as much as `read` shows a model as media, under the 16 MiB body limit. A
model writes a file through a tool call's arguments, which its output-token limit keeps far
below this (128k tokens are about half a MiB); a file this large is a loop or an attack."""
DEFAULT_WORKSPACE_MAX_BYTES = 100 * 1024 * 1024
"""One conversation's workspace: ten files of the largest size."""
DEFAULT_WORKSPACE_MAX_FILES = 10_000
"""Files in one conversation's workspace: `ls`, `find` and `grep` read every one of them."""
DEFAULT_TENANT_WORKSPACE_MAX_BYTES = 10 * 1024 * 1024 * 1024
"""All of one tenant's workspaces: a hundred conversations at `DEFAULT_WORKSPACE_MAX_BYTES`.
The conversation limits bound one conversation, not how many a tenant opens; this bounds what
one tenant can make the database hold, high enough that a tenant of ordinary use (a few MiB a
conversation, thousands of conversations) does not meet it. Its check reads one usage row
(migration 0014), so it costs the same at any tenant size (docs/benchmarks.md, "The quota
check"). A single-tenant deployment has every conversation in the tenant `default`: one that
means to keep more raises it, or sets 0 (off)."""

MULTI_TENANT_SUBMISSIONS_PER_MINUTE = 600.0
"""The submission limit of a deployment with API keys that sets none: ten turns a second per
tenant, bursts of `THINK_SUBMISSION_BURST`, enough for a person or a busy integration and a
bound on one tenant's runaway script. Set `THINK_SUBMISSIONS_PER_MINUTE` to what the workers
can serve divided among the tenants that may burst at once (docs/api.md, "Limits")."""
