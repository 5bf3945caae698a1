"""Audit history: read-only list with filters, one event's detail, and the hash-chain check.

These views answer GET only (``http_method_names``): the ledger is append-only and written by
services, never by the console.
"""

from __future__ import annotations

import json
from dataclasses import replace
from urllib.parse import urlencode

from django.db.models import Q
from django.urls import reverse
from django.views.generic import DetailView, ListView, TemplateView

from agent_runtime.models import AgentSession
from approvals.console.forms import AuditFilterForm
from bailing.audit.ledger import audit_chain_verify
from bailing.audit.models import AuditEvent
from bailing.ui import tables
from bailing.ui.forms import filter_by_form
from bailing.ui.mixins import READ_ONLY, ConsoleView
from bailing.ui.pages import PAGE_SIZE

_DATA_PREVIEW_CHARS = 80


def _summary(event: AuditEvent) -> str:
    """Target and a bounded data preview, shown under the action (the detail page has it all)."""
    parts = []
    if event.target_type or event.target_id:
        target = f"{event.target_type}:{event.target_id}" if event.target_type else event.target_id
        parts.append(tables.shorten_ids(target))
    if event.data:
        text = json.dumps(event.data, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        if len(text) > _DATA_PREVIEW_CHARS:
            text = text[: _DATA_PREVIEW_CHARS - 1] + "…"
        parts.append(text)
    return " · ".join(parts)


def event_clients(events) -> dict[int, str]:
    """Event id → the App ID of the client the event concerns, for every event that has one: its
    recorded ``client_app_id``, else the client it targets, else the client of its agent session
    (events written by a user or the system about a session name the session, not always its
    client). The sessions of one page are read in one query."""
    events = list(events)
    session_ids = {event.session_id for event in events if event.session_id and not event.client_app_id}
    session_clients = dict(
        AgentSession.objects.filter(pk__in=session_ids).values_list("id", "client__app_id")
        if session_ids
        else []
    )
    found = {}
    for event in events:
        app_id = event.client_app_id
        if not app_id and event.target_type == "client":
            app_id = event.target_id
        if not app_id and event.session_id:
            app_id = session_clients.get(event.session_id, "")
        if app_id:
            found[event.id] = app_id
    return found


class AuditListView(ConsoleView, ListView):
    permission_required = "bailing.view_auditevent"
    http_method_names = READ_ONLY
    template_name = "approvals/audit_list.html"
    paginate_by = PAGE_SIZE

    def get_queryset(self):
        self.filter_form = AuditFilterForm(self.request.GET or None)
        queryset = filter_by_form(
            AuditEvent.objects.order_by("-id"),
            self.filter_form,
            {
                "actor": "actor",
                "action": "action__startswith",
                "session": "session_id",
                "route": "route_key",
                "since": "created_at__gte",
                "until": "created_at__lte",
            },
        )
        app_id = self.filter_form.cleaned_data.get("client") if self.filter_form.is_bound else None
        if app_id:
            # The same client the Client column shows (``event_clients``), so following its link
            # lists every row that showed it.
            queryset = queryset.filter(
                Q(client_app_id=app_id)
                | Q(client_app_id="", target_type="client", target_id=app_id)
                | Q(
                    client_app_id="",
                    session_id__in=AgentSession.objects.filter(client__app_id=app_id).values("id"),
                )
            )
        return queryset

    @staticmethod
    def _id_cell(event: AuditEvent) -> tables.Cell:
        """The event's number; an event not chained yet says so under it (docs/audit.md)."""
        cell = tables.mono(event.id, href=reverse("console:audit_detail", args=[event.id]))
        if event.sealed:
            return cell
        return replace(cell, sub="unsealed", title="Recorded; not yet given its place in the hash chain")

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        table = tables.Table(
            ["#", "Time (UTC)", "Action · target · data", "Actor", "Client", "Session", "Workspace"],
            empty="No audit events match.",
        )
        clients = event_clients(context["object_list"])
        for event in context["object_list"]:
            session = str(event.session_id) if event.session_id else ""
            app_id = clients.get(event.id, "")
            client_url = reverse("console:audit_list") + "?" + urlencode({"client": app_id})
            session_url = reverse("console:audit_list") + "?" + urlencode({"session": session})
            table.rows.append(
                [
                    self._id_cell(event),
                    tables.time(event.created_at),
                    tables.Cell(event.action, kind="mono", sub=_summary(event)),
                    tables.ident(f"{event.actor_type}: {event.actor}"),
                    tables.mono(app_id, href=client_url if app_id else None),
                    tables.ident(session, href=session_url if session else None),
                    tables.mono(event.route_key),
                ]
            )
        context["table"] = table
        context["filter_form"] = self.filter_form
        context["can_verify"] = self.request.user.has_perm("bailing.verify_auditevent")
        return context


class AuditDetailView(ConsoleView, DetailView):
    permission_required = "bailing.view_auditevent"
    http_method_names = READ_ONLY
    template_name = "approvals/audit_detail.html"
    context_object_name = "event"
    queryset = AuditEvent.objects.all()


class AuditVerifyView(ConsoleView, TemplateView):
    """Recomputes the whole chain on each visit: the answer must come from the rows, not a cache.
    A GET seals nothing: the unsealed tail is reported as it stands."""

    permission_required = "bailing.verify_auditevent"
    http_method_names = READ_ONLY
    template_name = "approvals/audit_verify.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        report = audit_chain_verify()
        context["report"] = report
        context["total"] = report.sealed + report.unsealed
        context["oldest_unsealed_age"] = report.oldest_unsealed_age()
        return context
