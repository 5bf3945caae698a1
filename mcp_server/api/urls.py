"""``/mcp/<route>`` (mounted by the root URLconf) and its RFC 9728 metadata under ``/.well-known/``."""

from django.urls import path

from mcp_server.api import views

urlpatterns = [
    path("mcp/<segment:route>", views.McpEndpoint.as_view(), name="mcp-endpoint"),
    path(
        ".well-known/oauth-protected-resource/mcp/<segment:route>",
        views.McpResourceMetadataApi.as_view(),
        name="mcp-protected-resource",
    ),
]
