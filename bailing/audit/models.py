"""The append-only, hash-chained audit ledger: one table every app records its milestones in."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class AuditEvent(models.Model):
    """One audit milestone, recorded by a service in the same transaction as the change it describes.

    Events form a hash chain in ``id`` order: ``content_hash`` is the SHA-256 of the event's canonical
    content, and ``chain_hash`` = SHA-256(``prev_hash`` + ``content_hash``). Changing, inserting or
    deleting an event breaks every later link; ``manage.py approvals_audit_verify`` names the first.
    Rows are never updated or deleted by the application.
    """

    class ActorType(models.TextChoices):
        USER = "user"
        AGENT = "agent"
        CLIENT = "client"
        SYSTEM = "system"

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor_type = models.CharField(max_length=16, choices=ActorType.choices)
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=100, db_index=True)
    client_app_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    session_id = models.UUIDField(null=True, blank=True, db_index=True)
    route_key = models.CharField(max_length=128, blank=True, default="", db_index=True)
    target_type = models.CharField(max_length=64, blank=True, default="")
    target_id = models.CharField(max_length=200, blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    # X-Request-Id of the request that caused the event ("" outside a request: commands, workers).
    request_id = models.CharField(max_length=128, blank=True, default="", db_index=True)
    prev_hash = models.CharField(max_length=64)
    content_hash = models.CharField(max_length=64)
    chain_hash = models.CharField(max_length=64, unique=True)

    class Meta:
        app_label = "bailing"
        ordering = ["-id"]
        permissions = [("verify_auditevent", "Can verify the audit chain")]

    def __str__(self) -> str:
        return f"{self.action} #{self.id}"
