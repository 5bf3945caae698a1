"""How one audit event reads in the audit list: a few key fields of its data, and its target as a link.

The list used to show the first 80 characters of the raw JSON, which for most actions ended before
the field that mattered. Instead :data:`KEY_FIELDS` names, in one place, the two or three data
fields that say what happened for each action (or each family of actions, by a prefix ending in
``.``); an action it does not know falls back to its first few fields as ``key=value``. The whole
data stays on the event's own page.

:func:`target_url` is the one place that knows which console page shows which kind of target
(``tool_invocation:<job id>`` → the tool call's trace, ``tool_approval:<id>`` → the approval, …). It
links only when the viewer may open that page, and never asks the database: a target deleted since
(a knowledge base, a user) is the site's 404, which leads back. Types without a page of their own
(``agent_authorization``, ``oauth_client``, ``agent_run``, ``knowledge_scope``) stay plain text.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from django.urls import NoReverseMatch, reverse

from bailing.audit.models import AuditEvent
from bailing.ui.tables import shorten_ids

# action (exact, or a family prefix ending in ".") → (label, data key) pairs shown in the list.
KEY_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    # tool calls and their approvals
    "agent_runtime.invocation.created": (("tool", "tool"), ("arguments", "argument_keys")),
    "agent_runtime.invocation.approval_requested": (
        ("tool", "tool"),
        ("policy", "policy"),
        ("approval", "approval_id"),
    ),
    "agent_runtime.invocation.dispatched": (("tool", "tool"), ("approval", "approval_id")),
    "agent_runtime.invocation.outcome": (
        ("tool", "tool"),
        ("state", "state"),
        ("business status", "business_status"),
        ("reason", "reason"),
    ),
    "agent_runtime.invocation.": (("tool", "tool"), ("reason", "reason"), ("status", "status")),
    "approvals.request.": (("tool", "tool"), ("decision", "decision"), ("via", "source")),
    "approvals.reconciliation.resolved": (("tool", "tool"), ("resolution", "resolution")),
    "approvals.answer.revealed": (("tool", "tool"), ("characters", "chars")),
    "agent_runtime.approval.notify_resent": (("channel", "channel"),),
    "agent_runtime.approval.": (("channel", "channel"), ("http", "http_status"), ("error", "error")),
    # agent sign-in and sessions
    "agent_auth.authorization.created": (("device", "device_label"), ("workspaces", "requested_routes")),
    "agent_auth.authorization.approved": (
        ("on behalf of", "on_behalf_of"),
        ("workspaces", "allowed_routes"),
        ("via", "via"),
    ),
    "agent_auth.token.issued": (("workspaces", "allowed_routes"),),
    "agent_auth.session.revoked": (("by", "by"), ("reason", "reason")),
    "agent_auth.oauth_client.registered": (("name", "client_name"), ("redirects", "redirect_hosts")),
    "agent_auth.oauth_client.metadata_document": (
        ("name", "client_name"),
        ("document host", "metadata_host"),
        ("redirects", "redirect_hosts"),
    ),
    # turns and runs
    "agent_runtime.turn.context_ready": (
        ("active tools", "active_tools"),
        ("prior messages", "prior_messages"),
        ("knowledge", "knowledge_delivery"),
    ),
    "agent_runtime.run.completed": (("status", "status"), ("model", "model")),
    # configuration
    "agent_runtime.client.token_rotated": (("token", "token_prefix"),),
    "agent_runtime.client.": (("fields", "fields"),),
    "agent_runtime.route.": (("fields", "fields"),),
    "agent_runtime.provider.spec_stored": (("tools", "tools"), ("added", "added"), ("removed", "removed")),
    "agent_runtime.provider.refresh_failed": (("error", "error"),),
    "agent_runtime.provider.authz_probe": (("status", "status"), ("reason", "reason")),
    "agent_runtime.provider.": (("fields", "fields"),),
    # knowledge
    "knowledge.document.deleted": (("source key", "source_key"),),
    "knowledge.document.": (("source key", "source_key"), ("characters", "chars")),
    "knowledge.base.requeued": (("documents", "documents"),),
    "knowledge.base.": (("fields", "fields"),),
    "knowledge.agent.search": (("status", "status"), ("hits", "hits"), ("mode", "mode")),
    "knowledge.agent.read": (("source key", "source_key"), ("bytes", "bytes"), ("truncated", "truncated")),
    "mcp.knowledge.": (("status", "status"), ("hits", "hits"), ("answer", "answer")),
    # console users
    "console.user.created": (("roles", "roles"),),
    "console.user.roles_set": (("before", "before"), ("after", "after")),
    "console.user.password_reset": (("generated", "generated"),),
    "console.login.": (("ip", "ip"),),
}
# An action KEY_FIELDS does not know shows this many of its data fields, in key order.
FALLBACK_FIELDS = 3
# One shown value at most this long (an error text, a long list of fields).
VALUE_CHARS = 40
SEPARATOR = " · "


def _fields_for(action: str) -> tuple[tuple[str, str], ...] | None:
    """The action's own entry, else the longest family prefix it starts with, else None."""
    if action in KEY_FIELDS:
        return KEY_FIELDS[action]
    families = [prefix for prefix in KEY_FIELDS if prefix.endswith(".") and action.startswith(prefix)]
    return KEY_FIELDS[max(families, key=len)] if families else None


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, list):
        text = ", ".join(_value_text(item) for item in value) or "none"
    elif isinstance(value, dict):
        text = "{…}" if value else "{}"
    else:
        text = shorten_ids(str(value))
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def key_fields(action: str, data: Any) -> str:
    """The line under an audit row's action: its key fields (``tool request_refund · state
    executed``), or ``key=value`` for an action without an entry; fields the event lacks (or holds
    as null) are left out."""
    if not isinstance(data, Mapping) or not data:
        return ""
    chosen = _fields_for(action)
    if chosen is None:
        keys = sorted(data)[:FALLBACK_FIELDS]
        return SEPARATOR.join(f"{key}={_value_text(data[key])}" for key in keys)
    return SEPARATOR.join(
        f"{label} {_value_text(data[key])}" for label, key in chosen if data.get(key) is not None
    )


# --- targets -------------------------------------------------------------------------------------------
def _uuid(value: str) -> str | None:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def _integer(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() else None


def _document_url(target_id: str, data: Mapping[str, Any]) -> str | None:
    """A document is named ``<kb_id>/<source key>`` by writes and by its number by agent reads
    (whose data carries the ``kb_id``). Pages are by number, so a named one is found through its
    knowledge base's document search."""
    number = _integer(target_id)
    if number is not None and data.get("kb_id"):
        return reverse("console:knowledge_document_detail", args=[str(data["kb_id"]), number])
    kb_id, slash, source_key = target_id.partition("/")
    if not slash or not kb_id:
        return None
    return reverse("console:knowledge_detail", args=[kb_id]) + "?" + urlencode({"q": source_key})


def _by(url_name: str, parse: Callable[[str], Any] = str) -> Callable[[str, Mapping[str, Any]], str | None]:
    def url(target_id: str, data: Mapping[str, Any]) -> str | None:
        value = parse(target_id)
        return None if value is None else reverse(url_name, args=[value])

    return url


# target type → (permissions the page needs, its URL from the target id and the event's data).
TARGET_PAGES: dict[str, tuple[tuple[str, ...], Callable[[str, Mapping[str, Any]], str | None]]] = {
    "tool_invocation": (("agent_runtime.view_toolinvocation",), _by("console:invocation_detail", _uuid)),
    "tool_approval": (("agent_runtime.view_toolapproval",), _by("console:approval_detail", _integer)),
    "client": (("agent_runtime.view_client",), _by("console:client_detail")),
    "agent_session": (("agent_runtime.view_agentsession",), _by("console:session_detail", _uuid)),
    "route": (("agent_runtime.view_route",), _by("console:workspace_detail")),
    "tool_provider": (("agent_runtime.view_toolprovider",), _by("console:provider_detail")),
    "knowledge_base": (("knowledge.view_knowledgebase",), _by("console:knowledge_detail")),
    "knowledge_document": (("knowledge.view_knowledgebase",), _document_url),
    "user": (("auth.change_user",), _by("console:user_detail")),
}


def target_url(event: AuditEvent, user) -> str | None:
    """The console page of what ``event`` acted on, when there is one and ``user`` may open it."""
    page = TARGET_PAGES.get(event.target_type)
    if page is None or not event.target_id:
        return None
    permissions, url = page
    if not user.has_perms(permissions):
        return None
    try:
        return url(event.target_id, event.data if isinstance(event.data, Mapping) else {})
    except NoReverseMatch:
        # An id no page path can carry (a control character, an empty segment).
        return None


def target_text(event: AuditEvent) -> str:
    """A target's id as the list shows it: UUIDs shortened (the full value goes in a title)."""
    return shorten_ids(event.target_id)
