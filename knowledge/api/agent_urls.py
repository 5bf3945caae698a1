"""Agent knowledge protocol routes, mounted under ``/agent-api/v1/workspaces/<route>/knowledge/``."""

from django.urls import path

from knowledge.api import agent_views

urlpatterns = [
    path("capabilities", agent_views.KnowledgeCapabilitiesApi.as_view(), name="agent-knowledge-capabilities"),
    path("search", agent_views.KnowledgeSearchApi.as_view(), name="agent-knowledge-search"),
    path("read", agent_views.KnowledgeReadApi.as_view(), name="agent-knowledge-read"),
]
