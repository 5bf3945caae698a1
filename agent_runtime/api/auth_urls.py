"""Agent Auth v1 routes (/agent-auth/v1/).

Ids are captured as plain segments (``bailing.converters``: no control characters): the services
answer a malformed id with the same 404 ``not_found`` as an unknown one. Anything else under
/agent-auth/ falls through to the JSON 404.
"""

from django.urls import path

from agent_runtime.api import auth_views as views

urlpatterns = [
    path("authorizations", views.AuthorizationCreateApi.as_view(), name="agent-auth-authorization-create"),
    path(
        "authorizations/<segment:authorization_id>",
        views.AuthorizationDetailApi.as_view(),
        name="agent-auth-authorization-detail",
    ),
    path(
        "authorizations/<segment:authorization_id>/approve",
        views.AuthorizationApproveApi.as_view(),
        name="agent-auth-authorization-approve",
    ),
    path(
        "authorizations/<segment:authorization_id>/deny",
        views.AuthorizationDenyApi.as_view(),
        name="agent-auth-authorization-deny",
    ),
    path(
        "authorizations/<segment:authorization_id>/revoke",
        views.AuthorizationRevokeApi.as_view(),
        name="agent-auth-authorization-revoke",
    ),
    path("token", views.TokenApi.as_view(), name="agent-auth-token"),
    path("session", views.SessionDetailApi.as_view(), name="agent-auth-session"),
    path("revoke", views.RevokeApi.as_view(), name="agent-auth-revoke"),
    path("sessions", views.SessionListApi.as_view(), name="agent-auth-session-list"),
    path(
        "sessions/<segment:session_id>/revoke",
        views.SessionRevokeApi.as_view(),
        name="agent-auth-session-revoke",
    ),
]
