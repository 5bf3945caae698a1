"""Agent API v1 routes (/agent-api/v1/). The knowledge protocol under the same prefix
(``workspaces/<route>/knowledge/``) is mounted by the root URLconf: this app does not name the apps
above it."""

from django.urls import path

from agent_runtime.api import invocation_views, runtime_views, views

urlpatterns = [
    path("workspaces", views.WorkspaceListApi.as_view(), name="agent-workspaces"),
    path(
        "workspaces/<segment:route>/bootstrap", views.WorkspaceBootstrapApi.as_view(), name="agent-bootstrap"
    ),
    path(
        "workspaces/<segment:route>/capabilities/search",
        views.CapabilitySearchApi.as_view(),
        name="agent-capability-search",
    ),
    path("tools", views.ToolCatalogApi.as_view(), name="agent-tool-catalog"),
    path("tools/<segment:name>", views.ToolDetailApi.as_view(), name="agent-tool-detail"),
    # Agent Client Runtime turns and runs (agent_runtime.api.runtime_views).
    path("workspaces/<segment:route>/turns", runtime_views.TurnCreateApi.as_view(), name="agent-turns"),
    path("runs/<segment:run_id>/complete", runtime_views.RunCompleteApi.as_view(), name="agent-run-complete"),
    # Governed tool invocations (agent_runtime.api.invocation_views). The fixed path comes before the id.
    path("tool-invocations", invocation_views.InvocationCreateApi.as_view(), name="agent-tool-invocations"),
    path(
        "tool-invocations/inspection-capabilities",
        invocation_views.InspectionCapabilitiesApi.as_view(),
        name="agent-tool-invocation-inspection",
    ),
    path(
        "tool-invocations/<segment:invocation_id>/resume",
        invocation_views.InvocationResumeApi.as_view(),
        name="agent-tool-invocation-resume",
    ),
    path(
        "tool-invocations/<segment:invocation_id>/receipt",
        invocation_views.InvocationReceiptApi.as_view(),
        name="agent-tool-invocation-receipt",
    ),
    path(
        "task-control/capabilities",
        runtime_views.TaskControlCapabilitiesApi.as_view(),
        name="agent-task-control-capabilities",
    ),
]
