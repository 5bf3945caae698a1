"""The console home page: headline counts and what database the hub runs on."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from django.views.generic import TemplateView

from agent_runtime.models import AgentSession, Client, Route
from bailing.audit.models import AuditEvent
from bailing.db.features import server_version, vector_available
from bailing.ui.mixins import ConsoleView
from bailing.ui.tables import utc_iso
from knowledge.models import Document, KnowledgeBase

_ROLE_PERMS = (
    "knowledge.view_knowledgebase",
    "agent_runtime.view_client",
    "agent_runtime.view_route",
    "agent_runtime.view_agentsession",
    "bailing.view_auditevent",
)


class DashboardView(ConsoleView, TemplateView):
    """Any signed-in user may land here (it is where login leads); each count is shown only to users
    who may open the page it summarises, so a user without a role sees no figures at all."""

    template_name = "console/dashboard.html"
    permission_required = None

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        user = self.request.user
        now = timezone.now()
        cards = []
        if user.has_perm("agent_runtime.view_client"):
            cards.append(
                {
                    "label": "Clients",
                    "value": Client.objects.count(),
                    "note": f"{Client.objects.filter(enabled=True).count()} enabled",
                    "url": reverse("console:client_list"),
                }
            )
        if user.has_perm("agent_runtime.view_agentsession"):
            active = AgentSession.objects.filter(revoked_at__isnull=True, refresh_expires_at__gt=now)
            cards.append(
                {
                    "label": "Active agent sessions",
                    "value": active.count(),
                    "note": f"{AgentSession.objects.count()} in total",
                    "url": reverse("console:session_list") + "?state=active",
                }
            )
        if user.has_perm("agent_runtime.view_route"):
            cards.append(
                {
                    "label": "Workspaces",
                    "value": Route.objects.count(),
                    "note": f"{Route.objects.filter(agent_client__enabled=True).count()} open to agents",
                    "url": reverse("console:workspace_list"),
                }
            )
        if user.has_perm("knowledge.view_knowledgebase"):
            waiting = Document.objects.filter(status=Document.Status.EMBEDDING).count()
            failed = Document.objects.filter(status=Document.Status.ERROR).count()
            bases = KnowledgeBase.objects.count()
            cards.append(
                {
                    "label": "Knowledge documents ready",
                    "value": Document.objects.filter(status=Document.Status.READY).count(),
                    "note": f"{waiting} waiting, {failed} failed, in {bases} knowledge bases",
                    "url": reverse("console:knowledge_list"),
                }
            )
        if user.has_perm("bailing.view_auditevent"):
            since = now - timedelta(hours=24)
            cards.append(
                {
                    "label": "Audit events, last 24 h",
                    "value": AuditEvent.objects.filter(created_at__gte=since).count(),
                    "note": f"since {utc_iso(since)}",
                    "url": reverse("console:audit_list") + "?since=" + since.strftime("%Y-%m-%dT%H:%M:%S"),
                }
            )
        context["cards"] = cards
        context["has_role"] = any(user.has_perm(perm) for perm in _ROLE_PERMS)
        if context["has_role"]:
            context["database"] = {
                "embedded": settings.BAILING_EMBEDDED_DB,
                "server_version": server_version(),
                "vector": vector_available(),
            }
        return context
