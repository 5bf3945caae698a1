"""Agent API v1 views (``/agent-api/v1``): parse, call one service, return the spec's dict."""

from __future__ import annotations

from rest_framework.response import Response

from agent_runtime.api.authentication import ALL_ROUTES
from agent_runtime.api.base import AgentApiView, RawStringField, query_params
from agent_runtime.identity import SCOPE_TOOLS_READ
from agent_runtime.selectors import catalog
from agent_runtime.selectors.routes import route_for_identity
from agent_runtime.selectors.workspaces import workspace_profile, workspaces_for_identity
from agent_runtime.tools.compiler import TOOL_NAME_RE
from bailing.api.errors import InvalidRequest
from bailing.api.serializers import StrictCharField, StrictIntegerField, StrictSerializer, validate_strict


class WorkspaceListApi(AgentApiView):
    required_scopes = ()

    def prefetch_routes(self, request):
        return ALL_ROUTES

    def get(self, request):
        return Response(workspaces_for_identity(self.identity))


class WorkspaceBootstrapApi(AgentApiView):
    required_scopes = (SCOPE_TOOLS_READ,)

    def get(self, request, route: str):
        access = route_for_identity(identity=self.identity, route_key=route)
        return Response(workspace_profile(access.route, identity=self.identity, effective=access.effective))


class CapabilitySearchApi(AgentApiView):
    """``POST /workspaces/:route/capabilities/search`` (``bailing.agent-capability-search.v1``).

    Needs a non-empty ``query`` or a ``run_id`` of this session and workspace (spec "Turn";
    docs/protocol.md "Capability search"); with a run and no usable query, the search ranks for that
    run's user input, as BailingHub does. A query of whitespace only is no query (BailingHub trims
    before this check; a run's blank query is treated the same way), so without a run it is 400
    ``invalid_request``. A ``run_id`` that is not a UUID is 400 ``invalid_request``; a run of another
    session or workspace is 404 ``run_not_found``.
    """

    required_scopes = (SCOPE_TOOLS_READ,)

    body_max_bytes = catalog.SEARCH_BODY_MAX_BYTES

    class InputSerializer(StrictSerializer):
        # TAB/LF/CR are allowed as BailingHub's client-text rule allows them; other controls are not.
        query = StrictCharField(
            max_length=catalog.SEARCH_QUERY_MAX_CHARS, multiline=True, allow_blank=True, required=False
        )
        limit = StrictIntegerField(min_value=1, max_value=catalog.SEARCH_LIMIT_MAX, required=False)
        run_id = RawStringField(required=False)

    def post(self, request, route: str):
        data = validate_strict(self.InputSerializer, request.data)
        query = data.get("query", "")
        if "run_id" not in data and not query.strip():
            raise InvalidRequest(field="query")
        return Response(
            catalog.capability_search(
                identity=self.identity,
                route_key=route,
                query=query,
                limit=data.get("limit"),
                run_id=data.get("run_id"),
            )
        )


class ToolCatalogApi(AgentApiView):
    """``GET /tools?route=`` (``bailing.agent-tool-catalog.v1``), the older direct-tool surface."""

    required_scopes = (SCOPE_TOOLS_READ,)

    class InputSerializer(StrictSerializer):
        route = RawStringField()

    def get(self, request):
        params = query_params(request, self.InputSerializer)
        return Response(catalog.tool_catalog_get(identity=self.identity, route_key=params["route"]))


class ToolDetailApi(AgentApiView):
    """``GET /tools/:name?route=&capability_revision=`` (``bailing.agent-tool-detail.v1``)."""

    required_scopes = (SCOPE_TOOLS_READ,)

    class InputSerializer(StrictSerializer):
        route = RawStringField()
        capability_revision = StrictCharField(pattern=r"[0-9a-f]{64}")

    def get(self, request, name: str):
        params = query_params(request, self.InputSerializer)
        if not TOOL_NAME_RE.fullmatch(name):
            raise InvalidRequest(field="name")
        return Response(
            catalog.tool_detail_get(
                identity=self.identity,
                route_key=params["route"],
                name=name,
                capability_revision=params["capability_revision"],
            )
        )
