"""Agent knowledge protocol views (``/agent-api/v1/workspaces/:route/knowledge/…``).

Each view parses its strict input (unknown fields, wrong JSON types and out-of-range values are
400 ``invalid_request`` naming the field — never coerced, clamped or ignored) and calls one service
of :mod:`knowledge.services.agent_knowledge`. The agent bearer is revalidated on every request and
the middleware adds ``Cache-Control: no-store``. There is no field for a knowledge base or document
id: the workspace's configuration decides what can be searched.
"""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response

from agent_runtime.api.base import AgentApiView, RawStringField
from agent_runtime.identity import SCOPE_KNOWLEDGE_READ
from bailing.api.errors import InvalidRequest
from bailing.api.serializers import StrictCharField, StrictIntegerField, StrictSerializer, validate_strict
from knowledge import budgets
from knowledge.budget import SEARCH_MAX_RESULTS
from knowledge.services import agent_knowledge
from knowledge.tokens import MAX_TOKEN_CHARS

# Raw JSON budgets: a query of AGENT_QUERY_MAX_CHARS (2000) units escaped as \uXXXX is 12,000 bytes;
# a reference and a cursor are at most MAX_TOKEN_CHARS each.
SEARCH_BODY_MAX_BYTES = budgets.SEARCH_BODY_MAX_BYTES
READ_BODY_MAX_BYTES = budgets.READ_BODY_MAX_BYTES


class KnowledgeCapabilitiesApi(AgentApiView):
    """``GET …/knowledge/capabilities`` → ``bailing.agent-knowledge-capabilities.v1``."""

    required_scopes = (SCOPE_KNOWLEDGE_READ,)

    def get(self, request, route: str):
        if request.query_params:
            raise InvalidRequest(field=next(iter(request.query_params)))
        return Response(
            agent_knowledge.agent_knowledge_capabilities_get(identity=self.identity, route_key=route)
        )


class KnowledgeSearchApi(AgentApiView):
    """``POST …/knowledge/search`` → ``bailing.agent-knowledge-search.v1``.

    ``query``: a string (TAB/LF/CR allowed, other control characters and lone surrogates rejected)
    that the service requires to be non-blank and at most 2000 UTF-16 units
    (:func:`~knowledge.services.agent_knowledge.agent_query_check`, the rule of every surface);
    ``limit``: integer 1–3; ``run_id``: a UUID (its currency is the service's 404). Under a workspace
    data policy the hints are released filtered and the response may carry the additive field
    ``data_policy`` (counts per detector; docs/protocol.md "Data policy").
    """

    required_scopes = (SCOPE_KNOWLEDGE_READ,)

    body_max_bytes = SEARCH_BODY_MAX_BYTES

    class InputSerializer(StrictSerializer):
        query = StrictCharField(multiline=True, allow_blank=True)
        limit = StrictIntegerField(min_value=1, max_value=SEARCH_MAX_RESULTS, required=False)
        run_id = RawStringField(required=False)

    def post(self, request, route: str):
        data = validate_strict(self.InputSerializer, request.data)
        return Response(
            agent_knowledge.agent_knowledge_search(
                identity=self.identity,
                route_key=route,
                query=data["query"],
                limit=data.get("limit"),
                run_id=data.get("run_id"),
            )
        )


class TokenField(RawStringField):
    """A reference or cursor: any string up to ``MAX_TOKEN_CHARS``; everything else about it is the
    token module's 400 ``knowledge_reference_invalid`` (one code for every malformed token)."""

    default_error_messages = {**RawStringField.default_error_messages, "too_long": "Too long."}

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if len(value) > MAX_TOKEN_CHARS:
            self.fail("too_long")
        return value


class KnowledgeReadApi(AgentApiView):
    """``POST …/knowledge/read`` → ``bailing.agent-knowledge-read.v1``; ``max_bytes`` 4096–32768.

    Under a workspace data policy the page is released filtered and may carry the additive field
    ``data_policy`` (counts per detector; docs/protocol.md "Data policy").
    """

    required_scopes = (SCOPE_KNOWLEDGE_READ,)

    body_max_bytes = READ_BODY_MAX_BYTES

    class InputSerializer(StrictSerializer):
        ref = TokenField()
        run_id = RawStringField(required=False)
        cursor = TokenField(required=False)
        max_bytes = StrictIntegerField(
            min_value=agent_knowledge.READ_MIN_BYTES, max_value=agent_knowledge.READ_MAX_BYTES, required=False
        )

    def post(self, request, route: str):
        data = validate_strict(self.InputSerializer, request.data)
        return Response(
            agent_knowledge.agent_knowledge_read(
                identity=self.identity,
                route_key=route,
                ref=data["ref"],
                run_id=data.get("run_id"),
                cursor=data.get("cursor"),
                max_bytes=data.get("max_bytes", agent_knowledge.READ_DEFAULT_BYTES),
            )
        )
