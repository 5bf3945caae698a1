"""Console navigation: every app's entries in their declared order, filtered by the signed-in user's
permissions (the context processor behind ``base.html``'s sidebar)."""

from __future__ import annotations

from agent_runtime.console import nav as agent_runtime_nav
from approvals.console import nav as approvals_nav
from bailing.ui.nav import NavItem
from knowledge.console import nav as knowledge_nav

# The apps whose console pages the shell composes, bottom layer first.
CONSOLE_APPS = (agent_runtime_nav, knowledge_nav, approvals_nav)


def nav_items() -> list[NavItem]:
    return sorted((item for app in CONSOLE_APPS for item in app.NAV), key=lambda item: item.order)


def console_nav(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"console_nav": []}
    items = [{"label": "Dashboard", "url_name": "console:dashboard"}]
    for item in nav_items():
        if user.has_perm(item.permission):
            entry = {"label": item.label, "url_name": item.url_name}
            if item.badge is not None:
                entry["badge"] = item.badge(user)
            items.append(entry)
    if user.has_perm("auth.change_user"):
        items.append({"label": "Users", "url_name": "console:user_list"})
    return {"console_nav": items}
