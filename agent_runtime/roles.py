"""What the agent runtime's console pages grant each console role (``bailing.roles``).

Every role reads clients, workspaces (routes), agent sessions, conversations and their runs, tool
providers and their tools. Every role may also approve an agent sign-in *for themselves* on the
consent page: the agent then acts on behalf of that user, so no one can grant more than they are.
Adding and changing clients, sessions and tool providers is the administrator's.
"""

from __future__ import annotations

from bailing.roles import ADMINISTRATOR, APPROVER, AUDITOR

_READ = (
    "agent_runtime.view_client",
    "agent_runtime.view_route",
    "agent_runtime.view_agentsession",
    "agent_runtime.view_toolprovider",
    "agent_runtime.view_providertool",
    "agent_runtime.view_agentconversation",
    "agent_runtime.view_agentrun",
    "agent_runtime.consent_agentauthorization",
)

ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    ADMINISTRATOR: (
        *_READ,
        "agent_runtime.add_client",
        "agent_runtime.change_client",
        "agent_runtime.change_agentsession",
        "agent_runtime.add_toolprovider",
        "agent_runtime.change_toolprovider",
    ),
    APPROVER: _READ,
    AUDITOR: _READ,
}
