"""Agent API v1 views (``/agent-api/v1``): parse, call one service, return the spec's dict."""

from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runtime.services.workspaces import workspace_profile, workspace_resolve, workspaces_for_identity
from bailing.api.authentication import AgentBearerAuthentication


class AgentApiView(APIView):
    """Base for every agent endpoint: Agent bearer, revalidated on each request."""

    authentication_classes = [AgentBearerAuthentication]

    @property
    def identity(self):
        return self.request.auth


class WorkspaceListApi(AgentApiView):
    def get(self, request):
        return Response(workspaces_for_identity(self.identity))


class WorkspaceBootstrapApi(AgentApiView):
    def get(self, request, route: str):
        workspace = workspace_resolve(identity=self.identity, route_key=route)
        return Response(workspace_profile(workspace))
