"""What every agent API view builds on: the Agent bearer, strict query strings, raw route keys.

Public to the apps above the runtime (knowledge's agent endpoints, the MCP surface): their agent
endpoints authenticate and parse exactly like the runtime's own.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.views import APIView

from agent_runtime.api.authentication import AgentBearerAuthentication
from agent_runtime.errors import InsufficientScope
from agent_runtime.identity import SCOPES, AgentIdentity
from bailing.api.errors import InvalidRequest
from bailing.api.serializers import StrictSerializer, validate_strict


class AgentApiView(APIView):
    """Base for every agent endpoint: Agent bearer, revalidated on each request.

    ``required_scopes`` are the OAuth scopes (agent_runtime.identity.SCOPES) a standard OAuth (MCP)
    sign-in's token needs for the view; an Agent Auth v1 session needs none. Every view names them
    (``()`` for none); a view that does not needs every scope (fail closed).
    """

    authentication_classes = [AgentBearerAuthentication]
    required_scopes: tuple[str, ...] | None = None

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if self.identity.scopes is None:
            return
        required = SCOPES if self.required_scopes is None else self.required_scopes
        if self.identity.scopes_missing(required):
            raise InsufficientScope(list(required))

    @property
    def identity(self) -> AgentIdentity:
        return self.request.auth

    def prefetch_routes(self, request):
        """Which route the bearer statement should read with the session: the ``route`` path
        segment, else a single ``route`` query parameter, else none (``ALL_ROUTES`` for every route
        of the session). Only a hint: the route gate runs as always, on what was read."""
        route = self.kwargs.get("route")
        if route is None:
            values = request._request.GET.getlist("route")
            route = values[0] if len(values) == 1 else None
        return route


class RawStringField(serializers.Field):
    """Any string, passed on unchanged: the route gate judges route keys (400 ``invalid_route``)."""

    default_error_messages = {"type": "Must be a string."}
    openapi_schema = {"type": "string"}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("type")
        return data


def query_params(request, serializer_class: type[StrictSerializer]) -> dict[str, Any]:
    """The query string validated like a body: unknown or repeated parameters are 400 ``invalid_request``
    naming the parameter, never ignored (a misspelt ``capability_revision`` must not read as absent)."""
    params = {}
    for key in request.query_params:
        values = request.query_params.getlist(key)
        if len(values) != 1:
            raise InvalidRequest(field=key)
        params[key] = values[0]
    return validate_strict(serializer_class, params)
