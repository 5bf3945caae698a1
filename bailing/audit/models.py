"""The append-only, hash-chained audit ledger: one table every app records its milestones in."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class AuditEvent(models.Model):
    """One audit milestone, recorded by a service in the same transaction as the change it describes.

    An event is appended *unsealed*: its ``content_hash`` (SHA-256 of its canonical content) is set,
    its chain columns are NULL. The sealer (``bailing.audit.ledger.audit_seal``) later gives it the
    next ``chain_seq`` position and ``chain_hash`` = SHA-256(``prev_hash`` + ``content_hash``), where
    ``prev_hash`` is the chain hash at position ``chain_seq - 1`` (genesis for the first). Changing,
    inserting or deleting a sealed event breaks every later link; ``manage.py approvals_audit_verify``
    names the first. A database trigger refuses every UPDATE and DELETE except that one-time fill of
    the chain columns of an unsealed event (``docs/audit.md``).
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
    # The OpenTelemetry trace the event was recorded in (32 hex digits; "" while tracing is off).
    # Not part of the content hash: a correlation aid, like a log line's trace id, so the chain and
    # every export verify exactly as before (docs/audit.md "Trace ids"). Set at append, never after
    # (the append-only trigger refuses any later change).
    trace_id = models.CharField(max_length=32, blank=True, default="", db_default="")
    content_hash = models.CharField(max_length=64)
    # The chain, filled once by the sealer; NULL while the event is unsealed.
    chain_seq = models.BigIntegerField(null=True, blank=True, unique=True)
    prev_hash = models.CharField(max_length=64, null=True, blank=True)
    chain_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)

    class Meta:
        app_label = "bailing"
        ordering = ["-id"]
        permissions = [("verify_auditevent", "Can verify the audit chain")]
        indexes = [
            # The sealer's work list: unsealed events in id order, however few among many.
            models.Index(fields=["id"], name="bailing_audit_unsealed", condition=Q(chain_seq__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"{self.action} #{self.id}"

    @property
    def sealed(self) -> bool:
        return self.chain_seq is not None
