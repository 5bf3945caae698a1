"""Console pages of the agent runtime (included into the ``console`` namespace by the shell)."""

from django.urls import path

from agent_runtime.console import clients, consent, conversations, providers, sessions, tools, workspaces

urlpatterns = [
    path("workspaces/", workspaces.WorkspaceListView.as_view(), name="workspace_list"),
    path(
        "workspaces/<segment:route_key>/", workspaces.WorkspaceDetailView.as_view(), name="workspace_detail"
    ),
    path("providers/", providers.ProviderListView.as_view(), name="provider_list"),
    path("providers/<segment:name>/", providers.ProviderDetailView.as_view(), name="provider_detail"),
    path(
        "providers/<segment:name>/refresh/", providers.ProviderRefreshView.as_view(), name="provider_refresh"
    ),
    path(
        "providers/<segment:name>/tools/<segment:tool>/",
        providers.ProviderToolDetailView.as_view(),
        name="provider_tool_detail",
    ),
    path("tools/", tools.ToolListView.as_view(), name="tool_list"),
    path("clients/", clients.ClientListView.as_view(), name="client_list"),
    # "_new" can never be an App ID (those start with a letter or digit), so it never shadows a client.
    path("clients/_new/", clients.ClientCreateView.as_view(), name="client_create"),
    path("clients/<segment:app_id>/", clients.ClientDetailView.as_view(), name="client_detail"),
    path("clients/<segment:app_id>/edit/", clients.ClientEditView.as_view(), name="client_edit"),
    path(
        "clients/<segment:app_id>/enabled/", clients.ClientSetEnabledView.as_view(), name="client_set_enabled"
    ),
    path(
        "clients/<segment:app_id>/rotate-token/",
        clients.ClientTokenRotateView.as_view(),
        name="client_token_rotate",
    ),
    path("sessions/", sessions.SessionListView.as_view(), name="session_list"),
    path("sessions/<uuid:session_id>/", sessions.SessionDetailView.as_view(), name="session_detail"),
    path("sessions/<uuid:session_id>/revoke/", sessions.SessionRevokeView.as_view(), name="session_revoke"),
    path("conversations/", conversations.ConversationListView.as_view(), name="conversation_list"),
    path(
        "conversations/<uuid:conversation_id>/",
        conversations.ConversationDetailView.as_view(),
        name="conversation_detail",
    ),
    path("consent/", consent.ConsentView.as_view(), name="consent"),
]
