"""Console pages of knowledge (included into the ``console`` namespace by the shell)."""

from django.urls import path

from knowledge.console import views as knowledge

urlpatterns = [
    path("knowledge/", knowledge.KnowledgeBaseListView.as_view(), name="knowledge_list"),
    path("knowledge/<segment:kb_id>/", knowledge.KnowledgeBaseDetailView.as_view(), name="knowledge_detail"),
    path(
        "knowledge/<segment:kb_id>/enabled/",
        knowledge.KnowledgeBaseSetEnabledView.as_view(),
        name="knowledge_set_enabled",
    ),
    path(
        "knowledge/<segment:kb_id>/delete/",
        knowledge.KnowledgeBaseDeleteView.as_view(),
        name="knowledge_delete",
    ),
    path(
        "knowledge/<segment:kb_id>/search/",
        knowledge.KnowledgeHitTestView.as_view(),
        name="knowledge_hit_test",
    ),
    path(
        "knowledge/<segment:kb_id>/add/", knowledge.DocumentAddView.as_view(), name="knowledge_document_add"
    ),
    path(
        "knowledge/<segment:kb_id>/upload/",
        knowledge.DocumentUploadView.as_view(),
        name="knowledge_document_upload",
    ),
    # Documents by their numeric id: a source key may be "." or "..", which no URL path can carry.
    path(
        "knowledge/<segment:kb_id>/docs/<int:doc_id>/",
        knowledge.DocumentDetailView.as_view(),
        name="knowledge_document_detail",
    ),
    path(
        "knowledge/<segment:kb_id>/docs/<int:doc_id>/delete/",
        knowledge.DocumentDeleteView.as_view(),
        name="knowledge_document_delete",
    ),
]
