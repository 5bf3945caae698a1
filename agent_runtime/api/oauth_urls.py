"""Standard OAuth routes for MCP clients (docs/protocol.md "Standard OAuth sign-in for MCP clients").

Included at the site root by the project shell: RFC 8414 fixes the metadata under ``/.well-known/``,
and the endpoints live under ``/oauth/``. Neither is an API prefix: the authorize endpoint answers
HTML error pages, and every JSON answer sets its own ``Cache-Control: no-store``.
"""

from django.urls import path

from agent_runtime.api import oauth_views as views

urlpatterns = [
    path(
        ".well-known/oauth-authorization-server",
        views.AuthorizationServerMetadataView.as_view(),
        name="oauth-authorization-server-metadata",
    ),
    path(
        ".well-known/openid-configuration",
        views.OpenIdConfigurationView.as_view(),
        name="openid-configuration",
    ),
    path("oauth/authorize", views.AuthorizeView.as_view(), name="oauth-authorize"),
    path("oauth/token", views.TokenView.as_view(), name="oauth-token"),
    path("oauth/register", views.RegisterView.as_view(), name="oauth-register"),
    path("oauth/revoke", views.RevokeView.as_view(), name="oauth-revoke"),
]
