"""Console roles as Django groups of model permissions.

* administrator — everything the console offers (configuration, clients, sessions, knowledge
  documents, audit, reconciling unknown tool-call outcomes, resending approval notifications) except
  deciding approvals, which is the approver role's.
  Also the console users themselves (``auth.change_user``: the Users page).
* approver — reads workspaces/clients/sessions/conversations/knowledge bases/invocations and decides
  approvals of tool calls (``agent_runtime.decide_toolapproval``; never for a call made on their own
  behalf).
* auditor — read-only: clients, sessions, conversations, workspaces, knowledge bases, audit history.

Every role may read knowledge bases and run their hit test (a read that writes nothing and is not
audited); adding, uploading and deleting documents and enabling or deleting a knowledge base is
``knowledge.manage_knowledgebase``, administrators only.

Every role may approve an agent sign-in *for themselves* on the consent page: the agent then acts on
behalf of that user, so no one can grant more than they are.
"""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

ADMINISTRATOR = "administrator"
APPROVER = "approver"
AUDITOR = "auditor"

_READ = [
    "agent_runtime.view_client",
    "agent_runtime.view_route",
    "agent_runtime.view_agentsession",
    "agent_runtime.view_toolprovider",
    "agent_runtime.view_providertool",
    "agent_runtime.view_agentconversation",
    "agent_runtime.view_agentrun",
    "agent_runtime.consent_agentauthorization",
    "knowledge.view_knowledgebase",
    "agent_runtime.view_toolinvocation",
    "agent_runtime.view_toolapproval",
]

ROLE_PERMISSIONS: dict[str, list[str]] = {
    ADMINISTRATOR: [
        *_READ,
        "agent_runtime.add_client",
        "agent_runtime.change_client",
        "agent_runtime.change_agentsession",
        "agent_runtime.add_toolprovider",
        "agent_runtime.change_toolprovider",
        "knowledge.manage_knowledgebase",
        "bailing.view_auditevent",
        "bailing.verify_auditevent",
        "agent_runtime.resolve_toolcalljournal",
        "agent_runtime.change_toolapproval",
        # Console users and their roles (the Users page, administrators only).
        "auth.change_user",
    ],
    # Separation of duties: approvers decide on tool calls; administrators configure (and reconcile
    # unknown outcomes) but decide only if they also hold the approver role.
    APPROVER: [*_READ, "agent_runtime.decide_toolapproval"],
    AUDITOR: [*_READ, "bailing.view_auditevent", "bailing.verify_auditevent"],
}


def roles_sync() -> None:
    """Create or update the three role groups with exactly their permissions."""
    for role, names in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        perms = []
        for name in names:
            app_label, codename = name.split(".", 1)
            perm = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if perm is not None:
                perms.append(perm)
        group.permissions.set(perms)


def roles_sync_after_migrate(**kwargs) -> None:
    roles_sync()
