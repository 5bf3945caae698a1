"""Reads of tool providers for the console's health overview."""

from __future__ import annotations

from django.db.models import Case, IntegerField, Q, Value, When
from django.db.models.fields.json import KeyTextTransform

from agent_runtime.models import ToolProvider
from agent_runtime.selectors.workspace_overview import Capped

HEALTH_LIMIT = 12
# Columns the health overview never needs: the sealed secret, the specs and the compile findings.
_HEAVY = ("secret_encrypted", "spec_json", "spec_inline", "compile_warnings")


def providers_health(*, limit: int = HEALTH_LIMIT) -> Capped:
    """Providers with their last refresh and probes, those that need a look first (a failed refresh,
    a suspect or inconclusive authorization probe, a public spec that should be protected), then by
    name; at most ``limit``, with the total. One query (two when there are more than ``limit``)."""
    authz = KeyTextTransform("status", "authz_probe")
    access = KeyTextTransform("status", "access_probe")
    attention = Case(
        When(Q(enabled=True, last_refresh_status="failed"), then=Value(0)),
        When(Q(enabled=True) & Q(authz_probe__status__in=["suspect", "inconclusive"]), then=Value(1)),
        When(
            Q(enabled=True, spec_access_policy=ToolProvider.AccessPolicy.SIGNED_REQUIRED)
            & Q(access_probe__status__in=["public", "inconclusive"]),
            then=Value(1),
        ),
        When(Q(enabled=True, last_refresh_status="never"), then=Value(2)),
        When(enabled=True, then=Value(3)),
        default=Value(4),
        output_field=IntegerField(),
    )
    queryset = (
        ToolProvider.objects.defer(*_HEAVY)
        .annotate(attention=attention, authz_status=authz, access_status=access)
        .order_by("attention", "name")
    )
    rows = list(queryset[: limit + 1])
    if len(rows) <= limit:
        return Capped(rows, len(rows))
    return Capped(rows[:limit], ToolProvider.objects.count())
