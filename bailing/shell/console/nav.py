"""Console navigation: one list, filtered by the signed-in user's permissions."""

from __future__ import annotations

NAV = [
    ("Dashboard", "console:dashboard", None),
    ("Workspaces", "console:workspace_list", "agent_runtime.view_route"),
    ("Tool providers", "console:provider_list", "agent_runtime.view_toolprovider"),
    ("Knowledge bases", "console:knowledge_list", "knowledge.view_knowledgebase"),
    ("Clients", "console:client_list", "agent_runtime.view_client"),
    ("Agent sessions", "console:session_list", "agent_runtime.view_agentsession"),
    ("Conversations", "console:conversation_list", "agent_runtime.view_agentrun"),
    ("Audit history", "console:audit_list", "bailing.view_auditevent"),
]


def console_nav(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"console_nav": []}
    items = [
        {"label": label, "url_name": url_name}
        for label, url_name, perm in NAV
        if perm is None or user.has_perm(perm)
    ]
    return {"console_nav": items}
