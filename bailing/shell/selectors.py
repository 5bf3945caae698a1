"""Reads of the project shell: console users (administrators' Users page) and the sign-in
throttle's failure counts. Nothing here writes; ``bailing.shell.users`` changes users."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db.models import Count, Prefetch, Q, QuerySet

from bailing.audit.models import AuditEvent


def user_list() -> QuerySet:
    """Every console user by username, with their groups as a list (``group_list``)."""
    return (
        get_user_model()
        .objects.prefetch_related(Prefetch("groups", to_attr="group_list"))
        .order_by("username")
    )


def user_get(*, username: str):
    """The console user ``username``, or None."""
    return get_user_model().objects.filter(username=username).first()


@dataclass(frozen=True)
class LoginFailures:
    """Failed sign-ins from one IP address since a time: for one username, and for any."""

    for_username: int
    for_ip: int


def login_failures_since(*, ip: str, username: str, since: datetime) -> LoginFailures:
    """The ``console.login.failed`` events from ``ip`` since ``since``, for ``username`` and in all,
    counted in one query."""
    counts = AuditEvent.objects.filter(
        action="console.login.failed", data__ip=ip, created_at__gte=since
    ).aggregate(for_username=Count("id", filter=Q(actor=username)), for_ip=Count("id"))
    return LoginFailures(for_username=counts["for_username"], for_ip=counts["for_ip"])
