"""Agent API v1 routes (/agent-api/v1/)."""

from django.urls import path

from agent_runtime.api import views

urlpatterns = [
    path("workspaces", views.WorkspaceListApi.as_view(), name="agent-workspaces"),
    path("workspaces/<str:route>/bootstrap", views.WorkspaceBootstrapApi.as_view(), name="agent-bootstrap"),
]
