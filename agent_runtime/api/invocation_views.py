"""Governed tool invocations: create, resume, read-only receipt and inspection capabilities.

``POST /tool-invocations`` reads at most 2 MiB of raw JSON (413 ``arguments_too_large`` with
``limit_scope: request_body``), then measures ``arguments`` as UTF-8 bytes of ``JSON.stringify`` before
anything else looks at them (413 with ``limit_scope: arguments`` and the exact ``actual_bytes`` past
1 MiB); both budgets are the tool's own, independent of every other body limit. Nothing of the body is
echoed. ``…/resume`` takes exactly ``{}`` (at most 1 KiB).
"""

from __future__ import annotations

import re

from rest_framework.response import Response

from agent_runtime.api.base import AgentApiView, RawStringField, query_params
from agent_runtime.identity import SCOPE_TOOLS_CALL
from agent_runtime.selectors import invocations as invocation_selectors
from agent_runtime.services import invocations as service
from agent_runtime.tools.compiler import TOOL_NAME_RE
from bailing.api.errors import InvalidRequest
from bailing.api.serializers import JSONObjectField, StrictCharField, StrictSerializer, validate_strict

INVOCATION_ID_PATTERN = r"[0-9a-f]{64}"
_INVOCATION_ID_RE = re.compile(INVOCATION_ID_PATTERN)


def invocation_id_checked(value: str) -> str:
    """A path's invocation id: 64 lowercase hex, else 400 ``invalid_request`` (never a lookup)."""
    if not _INVOCATION_ID_RE.fullmatch(value):
        raise InvalidRequest(field="invocation_id")
    return value


class _NoQuery(StrictSerializer):
    """Endpoints that take no query parameters: any is 400 ``invalid_request``."""


class InvocationCreateApi(AgentApiView):
    """``POST /tool-invocations`` → ``bailing.agent-tool-invocation.v1``.

    Under a workspace data policy the result is released filtered and may carry the additive field
    ``data_policy: {"action": "redact"|"block"|"flag", "findings": {"<detector>": count}}``
    (docs/protocol.md "Data policy").
    """

    required_scopes = (SCOPE_TOOLS_CALL,)

    body_max_bytes = service.ENVELOPE_MAX_BYTES

    class InputSerializer(StrictSerializer):
        invocation_id = StrictCharField(pattern=INVOCATION_ID_PATTERN)
        route = RawStringField()
        tool = StrictCharField(pattern=TOOL_NAME_RE.pattern)
        arguments = JSONObjectField()
        capability_revision = StrictCharField(pattern=r"[0-9a-f]{64}")
        agent_run_id = RawStringField(required=False)

    def post(self, request):
        payload = request.data
        measured = None
        if isinstance(payload, dict) and "arguments" in payload:
            # Measured before anything else touches the arguments, whatever their type (413 first).
            measured = service.arguments_size_checked(payload["arguments"])
        data = validate_strict(self.InputSerializer, payload)
        result = service.invocation_create(
            identity=self.identity,
            request=service.InvocationRequest(
                invocation_id=data["invocation_id"],
                route=data["route"],
                tool=data["tool"],
                arguments=service.tool_arguments(data["arguments"], text=measured),
                capability_revision=data["capability_revision"],
                agent_run_id=data.get("agent_run_id"),
            ),
        )
        return Response(result)


class InvocationResumeApi(AgentApiView):
    """``POST /tool-invocations/:id/resume`` with body exactly ``{}``.

    Under a workspace data policy the result is released filtered and may carry the additive field
    ``data_policy: {"action": "redact"|"block"|"flag", "findings": {"<detector>": count}}``
    (docs/protocol.md "Data policy").
    """

    required_scopes = (SCOPE_TOOLS_CALL,)

    body_max_bytes = service.RESUME_BODY_MAX_BYTES

    class InputSerializer(StrictSerializer):
        pass

    def post(self, request, invocation_id: str):
        # The body first (budget, media type, exactly {}), as every endpoint does; then the path.
        validate_strict(self.InputSerializer, request.data)
        invocation_id = invocation_id_checked(invocation_id)
        return Response(service.invocation_resume(identity=self.identity, invocation_id=invocation_id))


class InvocationReceiptApi(AgentApiView):
    """``GET /tool-invocations/:id/receipt`` (``bailing.agent-invocation-receipt.v1``): read-only.

    Under a workspace data policy its ``result`` is released filtered and may carry the additive field
    ``data_policy: {"action": "redact"|"block"|"flag", "findings": {"<detector>": count}}``
    (docs/protocol.md "Data policy").
    """

    required_scopes = (SCOPE_TOOLS_CALL,)

    def get(self, request, invocation_id: str):
        query_params(request, _NoQuery)
        invocation_id = invocation_id_checked(invocation_id)
        alive = not service.invocation_lock_free(self.identity.session.pk, invocation_id)
        return Response(
            service.invocation_receipt_release(
                identity=self.identity, invocation_id=invocation_id, holder_alive=alive
            )
        )


class InspectionCapabilitiesApi(AgentApiView):
    """``GET /tool-invocations/inspection-capabilities``: no catalog is loaded, no run created."""

    required_scopes = ()

    def get(self, request):
        query_params(request, _NoQuery)
        return Response(invocation_selectors.inspection_capabilities())
