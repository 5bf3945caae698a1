"""Audit history: read-only list with filters, one event's detail, and the hash-chain check.

These views answer GET only (``http_method_names``): the ledger is append-only and written by
services, never by the console.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

from django.urls import reverse
from django.views.generic import DetailView, ListView, TemplateView

from approvals.console.audit_rows import key_fields, target_text, target_url
from approvals.console.forms import AuditFilterForm
from approvals.selectors import audit_event_clients, audit_event_get, audit_event_list
from bailing.audit.ledger import audit_chain_verify
from bailing.audit.models import AuditEvent
from bailing.ui import tables
from bailing.ui.forms import form_filters
from bailing.ui.mixins import READ_ONLY, ConsoleView
from bailing.ui.pages import PAGE_SIZE, or_404


class AuditListView(ConsoleView, ListView):
    permission_required = "bailing.view_auditevent"
    http_method_names = READ_ONLY
    template_name = "approvals/audit_list.html"
    paginate_by = PAGE_SIZE

    def get_queryset(self):
        self.filter_form = AuditFilterForm(self.request.GET or None)
        return audit_event_list(filters=form_filters(self.filter_form))

    @staticmethod
    def _id_cell(event: AuditEvent) -> tables.Cell:
        """The event's number; an event not chained yet says so under it (docs/audit.md)."""
        cell = tables.mono(event.id, href=reverse("console:audit_detail", args=[event.id]))
        if event.sealed:
            return cell
        return replace(cell, sub="unsealed", title="Recorded; not yet given its place in the hash chain")

    @staticmethod
    def _target_cell(event: AuditEvent, user) -> tables.Cell:
        """What the event acted on: its id (UUIDs shortened), linked to its console page where there
        is one, with its type underneath."""
        if not event.target_id:
            return tables.Cell(event.target_type or "—", kind="mono" if event.target_type else "muted")
        full = f"{event.target_type}:{event.target_id}" if event.target_type else event.target_id
        return tables.Cell(
            target_text(event),
            href=target_url(event, user),
            kind="mono",
            title=full,
            sub=event.target_type.replace("_", " "),
        )

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        table = tables.Table(
            ["#", "Time (UTC)", "Action", "Target", "Actor", "Client", "Session", "Workspace"],
            empty="No audit events match.",
        )
        user = self.request.user
        clients = audit_event_clients(context["object_list"])
        for event in context["object_list"]:
            session = str(event.session_id) if event.session_id else ""
            app_id = clients.get(event.id, "")
            client_url = reverse("console:audit_list") + "?" + urlencode({"client": app_id})
            session_url = reverse("console:audit_list") + "?" + urlencode({"session": session})
            table.rows.append(
                [
                    self._id_cell(event),
                    tables.time(event.created_at),
                    tables.Cell(event.action, kind="mono", sub=key_fields(event.action, event.data)),
                    self._target_cell(event, user),
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

    def get_object(self, queryset=None):
        return or_404(audit_event_get(event_id=self.kwargs["pk"]))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["target_url"] = target_url(self.object, self.request.user)
        return context


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
