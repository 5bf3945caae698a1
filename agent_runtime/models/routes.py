"""Routes: for agents, workspaces."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class Route(models.Model):
    """A route; for agents, a workspace (docs/protocol.md "Workspaces").

    The JSON blocks are stored as validated by ``agent_runtime.config`` (defaults are applied when
    read, see ``agent_runtime.config.route_effective``). ``run_config`` keeps the ``/run``-only
    fields of BailingHub's route schema so exported configs round-trip; agent surfaces never read it.
    """

    class Permission(models.TextChoices):
        READONLY = "readonly"
        READWRITE = "readwrite"
        FULL = "full"

    route_key = models.CharField(max_length=128, unique=True)
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    target = models.CharField(max_length=64, default="llm")
    target_config = models.JSONField(default=dict, blank=True)
    permission = models.CharField(max_length=16, choices=Permission.choices, null=True, blank=True)
    audience = models.JSONField(default=dict, blank=True)
    memory = models.JSONField(default=dict, blank=True)
    knowledge = models.JSONField(default=dict, blank=True)
    tools = models.JSONField(default=dict, blank=True)
    agent_client = models.JSONField(default=dict, blank=True)
    # What the workspace filters out of what its agents see (agent_runtime.data_policy); {} = nothing.
    data_policy = models.JSONField(default=dict, blank=True)
    run_config = models.JSONField(default=dict, blank=True)
    # Bumped by a database trigger on every INSERT/UPDATE (a value of one shared sequence, never
    # reused), so per-process caches keyed by it see any change, even one made with raw SQL
    # (bailing.versioned, migration 0008).
    version = models.BigIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["route_key"]

    def __str__(self) -> str:
        return self.route_key
