"""Console routes (/console/). URL names are used by ``bailing.shell.console.nav``."""

from django.contrib.auth import views as auth_views
from django.urls import path

from agent_runtime.console import clients, consent, conversations, providers, sessions, workspaces
from approvals.console import views as audit
from bailing.shell.console import dashboard, login
from knowledge.console import views as knowledge

app_name = "console"

urlpatterns = [
    path("", dashboard.DashboardView.as_view(), name="dashboard"),
    path("login/", login.ConsoleLoginView.as_view(), name="login"),
    # Django's LogoutView accepts POST only: a link or an image tag cannot sign anyone out.
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("workspaces/", workspaces.WorkspaceListView.as_view(), name="workspace_list"),
    path("workspaces/<str:route_key>/", workspaces.WorkspaceDetailView.as_view(), name="workspace_detail"),
    path("providers/", providers.ProviderListView.as_view(), name="provider_list"),
    path("providers/<str:name>/", providers.ProviderDetailView.as_view(), name="provider_detail"),
    path("providers/<str:name>/refresh/", providers.ProviderRefreshView.as_view(), name="provider_refresh"),
    path(
        "providers/<str:name>/tools/<str:tool>/",
        providers.ProviderToolDetailView.as_view(),
        name="provider_tool_detail",
    ),
    path("knowledge/", knowledge.KnowledgeBaseListView.as_view(), name="knowledge_list"),
    path("knowledge/<str:kb_id>/", knowledge.KnowledgeBaseDetailView.as_view(), name="knowledge_detail"),
    path(
        "knowledge/<str:kb_id>/enabled/",
        knowledge.KnowledgeBaseSetEnabledView.as_view(),
        name="knowledge_set_enabled",
    ),
    path(
        "knowledge/<str:kb_id>/delete/", knowledge.KnowledgeBaseDeleteView.as_view(), name="knowledge_delete"
    ),
    path(
        "knowledge/<str:kb_id>/search/", knowledge.KnowledgeHitTestView.as_view(), name="knowledge_hit_test"
    ),
    path("knowledge/<str:kb_id>/add/", knowledge.DocumentAddView.as_view(), name="knowledge_document_add"),
    path(
        "knowledge/<str:kb_id>/upload/",
        knowledge.DocumentUploadView.as_view(),
        name="knowledge_document_upload",
    ),
    # Documents by their numeric id: a source key may be "." or "..", which no URL path can carry.
    path(
        "knowledge/<str:kb_id>/docs/<int:doc_id>/",
        knowledge.DocumentDetailView.as_view(),
        name="knowledge_document_detail",
    ),
    path(
        "knowledge/<str:kb_id>/docs/<int:doc_id>/delete/",
        knowledge.DocumentDeleteView.as_view(),
        name="knowledge_document_delete",
    ),
    path("clients/", clients.ClientListView.as_view(), name="client_list"),
    # "_new" can never be an App ID (those start with a letter or digit), so it never shadows a client.
    path("clients/_new/", clients.ClientCreateView.as_view(), name="client_create"),
    path("clients/<str:app_id>/", clients.ClientDetailView.as_view(), name="client_detail"),
    path("clients/<str:app_id>/enabled/", clients.ClientSetEnabledView.as_view(), name="client_set_enabled"),
    path(
        "clients/<str:app_id>/rotate-token/",
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
    path("audit/", audit.AuditListView.as_view(), name="audit_list"),
    path("audit/verify/", audit.AuditVerifyView.as_view(), name="audit_verify"),
    path("audit/<int:pk>/", audit.AuditDetailView.as_view(), name="audit_detail"),
    path("consent/", consent.ConsentView.as_view(), name="consent"),
]
