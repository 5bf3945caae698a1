"""Agent API v1 routes (/agent-api/v1/)."""

from django.urls import include, path

from agent_runtime.api import runtime_views, views

urlpatterns = [
    path("workspaces", views.WorkspaceListApi.as_view(), name="agent-workspaces"),
    path("workspaces/<str:route>/bootstrap", views.WorkspaceBootstrapApi.as_view(), name="agent-bootstrap"),
    path(
        "workspaces/<str:route>/capabilities/search",
        views.CapabilitySearchApi.as_view(),
        name="agent-capability-search",
    ),
    path("workspaces/<str:route>/knowledge/", include("knowledge.api.agent_urls")),
    path("tools", views.ToolCatalogApi.as_view(), name="agent-tool-catalog"),
    path("tools/<str:name>", views.ToolDetailApi.as_view(), name="agent-tool-detail"),
    # Agent Client Runtime turns and runs (agent_runtime.api.runtime_views).
    path("workspaces/<str:route>/turns", runtime_views.TurnCreateApi.as_view(), name="agent-turns"),
    path("runs/<str:run_id>/complete", runtime_views.RunCompleteApi.as_view(), name="agent-run-complete"),
    path(
        "task-control/capabilities",
        runtime_views.TaskControlCapabilitiesApi.as_view(),
        name="agent-task-control-capabilities",
    ),
]
