"""Agent Client Runtime views: turns, run completion and the task-control capabilities.

Each view parses its strict input, calls one service in ``agent_runtime.services.runs`` and returns
the spec's body. ``turns`` and ``complete`` read at most 512 KiB of raw JSON (413
``arguments_too_large`` with ``limit_scope: request_body``, ``max_bytes``, ``observed_bytes``).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from rest_framework.response import Response

from agent_runtime.api.base import AgentApiView
from agent_runtime.budgets import TURN_TEXT_MAX_CHARS
from agent_runtime.errors import TaskControlUnsupported
from agent_runtime.identity import SCOPE_KNOWLEDGE_READ, SCOPE_TOOLS_READ
from agent_runtime.services import runs
from bailing.api.limits import SHORT_TEXT_MAX_CHARS
from bailing.api.serializers import (
    JSONObjectField,
    StrictCharField,
    StrictIntegerField,
    StrictListField,
    StrictNumberField,
    StrictSerializer,
    validate_strict,
)

# Client identifiers (docs/protocol.md "Identifiers"): never trimmed; binary comparison.
CLIENT_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}"
RENDERER_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}"
CLIENT_TEXT_MAX_CHARS = TURN_TEXT_MAX_CHARS
RENDERERS_MAX = 20
LABEL_MAX_CHARS = SHORT_TEXT_MAX_CHARS
# JavaScript's Number.MAX_SAFE_INTEGER: larger counts cannot round-trip through a JS client.
USAGE_COUNT_MAX = 2**53 - 1


class ClientTextField(StrictCharField):
    """Visible client text (``user_input``, ``content``): multi-line, ≤ 64,000 UTF-16 units, and
    not empty or whitespace only (BailingHub's ``requireContent``)."""

    default_error_messages = {**StrictCharField.default_error_messages, "empty": "Must not be empty."}

    def __init__(self, **kwargs: Any):
        super().__init__(max_length=CLIENT_TEXT_MAX_CHARS, multiline=True, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not value.strip():
            self.fail("empty")
        return value


class CompletionUsageSerializer(StrictSerializer):
    """Public usage keys only; counts are JSON integers, cost a non-negative number (docs/protocol.md
    "Run completion")."""

    input_tokens = StrictIntegerField(min_value=0, max_value=USAGE_COUNT_MAX, required=False)
    cached_input_tokens = StrictIntegerField(min_value=0, max_value=USAGE_COUNT_MAX, required=False)
    output_tokens = StrictIntegerField(min_value=0, max_value=USAGE_COUNT_MAX, required=False)
    total_tokens = StrictIntegerField(min_value=0, max_value=USAGE_COUNT_MAX, required=False)
    tool_calls = StrictIntegerField(min_value=0, max_value=USAGE_COUNT_MAX, required=False)
    cost_usd = StrictNumberField(min_value=0, required=False)


def json_text_response(body: str) -> HttpResponse:
    """Send a stored JSON text as is, so a replay is byte-identical to the first response."""
    return HttpResponse(body.encode("utf-8"), content_type="application/json")


class TurnCreateApi(AgentApiView):
    """``POST /workspaces/:route/turns`` → ``bailing.agent-turn-context.v1``."""

    required_scopes = (SCOPE_KNOWLEDGE_READ, SCOPE_TOOLS_READ)

    body_max_bytes = runs.RUNTIME_BODY_MAX_BYTES

    class InputSerializer(StrictSerializer):
        client_conversation_id = StrictCharField(pattern=CLIENT_ID_PATTERN)
        client_turn_id = StrictCharField(pattern=CLIENT_ID_PATTERN)
        user_message_id = StrictCharField(pattern=CLIENT_ID_PATTERN)
        user_input = ClientTextField()
        # Size is checked by the service: over 16 KiB is 413 page_context_too_large, not 400.
        page_context = JSONObjectField(required=False)
        renderers = StrictListField(
            child=StrictCharField(pattern=RENDERER_PATTERN),
            max_length=RENDERERS_MAX,
            unique=True,
            required=False,
        )
        knowledge_delivery = StrictCharField(pattern="on_demand", required=False)

    def post(self, request, route: str):
        payload = request.data
        # Task control is not implemented: a binding is refused with its own code, never ignored.
        if isinstance(payload, dict) and "task_binding" in payload:
            raise TaskControlUnsupported()
        data = validate_strict(self.InputSerializer, payload)
        return json_text_response(runs.turn_prepare(identity=self.identity, route_key=route, data=data))


class RunCompleteApi(AgentApiView):
    """``POST /runs/:run_id/complete`` → ``bailing.agent-run-completion.v1``."""

    required_scopes = (SCOPE_KNOWLEDGE_READ, SCOPE_TOOLS_READ)

    body_max_bytes = runs.RUNTIME_BODY_MAX_BYTES

    class InputSerializer(StrictSerializer):
        assistant_message_id = StrictCharField(pattern=CLIENT_ID_PATTERN)
        status = StrictCharField(pattern="completed|failed|cancelled")
        content = ClientTextField()
        # Both are shown on the console's conversation page.
        model = StrictCharField(max_length=LABEL_MAX_CHARS, allow_blank=True, required=False, display=True)
        runtime = StrictCharField(max_length=LABEL_MAX_CHARS, allow_blank=True, required=False, display=True)
        usage = CompletionUsageSerializer(required=False)

    def post(self, request, run_id: str):
        data = validate_strict(self.InputSerializer, request.data)
        return Response(runs.run_complete(identity=self.identity, run_id=run_id, data=data))


class TaskControlCapabilitiesApi(AgentApiView):
    """``GET /task-control/capabilities``: this hub advertises that it has no task control."""

    required_scopes = ()

    def get(self, request):
        return Response(runs.task_control_capabilities())
