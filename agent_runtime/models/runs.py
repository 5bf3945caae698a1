"""Agent Client Runtime: conversations, runs (turns) and the visible message ledger memory is built from."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from agent_runtime.models.auth import AgentSession
from agent_runtime.models.clients import Client
from agent_runtime.models.routes import Route
from bailing.api.limits import SHORT_TEXT_MAX_CHARS


class AgentConversation(models.Model):
    """Maps a local agent's ``client_conversation_id`` to the hub's own conversation thread.

    The agent names its conversations; the hub keys them per (session, route) so two sessions, or
    one session in two workspaces, can never read each other's memory even with the same local id.
    The row is the anchor of the visible ledger (:class:`VisibleMessage`) from which turn memory is
    assembled; its UUID is what ``memory_refs[].thread_id`` exposes.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="conversations")
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="agent_conversations")
    route = models.ForeignKey(Route, on_delete=models.CASCADE, related_name="agent_conversations")
    client_conversation_id = models.CharField(max_length=128)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "route", "client_conversation_id"], name="agent_conversation_unique_key"
            )
        ]

    def __str__(self) -> str:
        return f"conversation {self.client_conversation_id} ({self.id})"


class AgentRun(models.Model):
    """One agent turn: the frozen context the hub handed out, then the agent's completion.

    ``context_ready`` (``context_body`` frozen) → ``completed`` / ``failed`` / ``cancelled``. A turn
    inserts its run with its final values, already ``context_ready``; ``preparing`` is never written
    (it stays a valid status, and every read still leaves it out). ``context_body`` keeps the exact
    response bytes: an idempotent replay returns them unchanged, even after the route's instructions
    or tools changed. The three unique keys make
    idempotency hold in the database under concurrency (turn key, user message id, assistant
    message id); ``request_hash`` and ``completion_hash`` tell a replay from a conflicting reuse.
    """

    class Status(models.TextChoices):
        PREPARING = "preparing"
        CONTEXT_READY = "context_ready"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    run_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="runs")
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="agent_runs")
    route = models.ForeignKey(Route, on_delete=models.CASCADE, related_name="agent_runs")
    conversation = models.ForeignKey(AgentConversation, on_delete=models.CASCADE, related_name="runs")
    client_turn_id = models.CharField(max_length=128)
    user_message_id = models.CharField(max_length=128)
    request_hash = models.CharField(max_length=64)
    user_input = models.TextField()
    knowledge_delivery = models.CharField(max_length=16, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PREPARING)
    context_body = models.TextField(blank=True, default="")
    profile_revision = models.CharField(max_length=64, blank=True, default="")
    capability_revision = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    context_ready_at = models.DateTimeField(null=True, blank=True)
    # Completion: written once, under the run's row lock; immutable afterwards.
    assistant_message_id = models.CharField(max_length=128, null=True, blank=True)
    completion_hash = models.CharField(max_length=64, blank=True, default="")
    final_content = models.TextField(null=True, blank=True)
    model = models.CharField(max_length=SHORT_TEXT_MAX_CHARS, null=True, blank=True)
    runtime = models.CharField(max_length=SHORT_TEXT_MAX_CHARS, null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "route", "conversation", "client_turn_id"], name="agent_run_unique_turn"
            ),
            models.UniqueConstraint(
                fields=["session", "route", "user_message_id"], name="agent_run_unique_user_message"
            ),
            models.UniqueConstraint(
                fields=["session", "route", "assistant_message_id"],
                condition=Q(assistant_message_id__isnull=False),
                name="agent_run_unique_assistant_message",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} ({self.status})"


class VisibleMessage(models.Model):
    """A message both sides saw: the user's input (``in``) or the agent's final answer (``out``).

    This is the conversation ledger memory is built from. The user message is appended when the
    turn's context is frozen (after memory was read, so a message never appears in its own memory);
    the assistant message when the run completes. Hidden reasoning never reaches this table. One
    message per run and direction keeps a replayed turn or completion from duplicating history.
    """

    class Direction(models.TextChoices):
        IN = "in"
        OUT = "out"

    conversation = models.ForeignKey(AgentConversation, on_delete=models.CASCADE, related_name="messages")
    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="messages")
    direction = models.CharField(max_length=3, choices=Direction.choices)
    external_message_id = models.CharField(max_length=128)
    content = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["conversation_id", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "direction"], name="visible_message_one_per_direction")
        ]
        indexes = [
            models.Index(fields=["conversation", "-created_at", "-id"], name="visible_message_recent_idx")
        ]

    def __str__(self) -> str:
        return f"{self.direction} message {self.external_message_id}"
