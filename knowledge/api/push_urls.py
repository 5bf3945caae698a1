"""``/kb/`` URLs of the knowledge push API (mounted by ``bailing.shell.urls``).

``source_key`` is captured as segments so that a key with a slash reaches the view and is answered
400 ``invalid_request`` (the key pattern), rather than an unexplained 404. A control character in
either parameter matches no pattern (``bailing.converters``) and is the JSON 404.
"""

from django.urls import path

from knowledge.api.push_views import DocumentApi, DocumentListApi

urlpatterns = [
    path("<segment:kb_id>/docs", DocumentListApi.as_view(), name="knowledge-push-docs"),
    path("<segment:kb_id>/docs/<segments:source_key>", DocumentApi.as_view(), name="knowledge-push-doc"),
]
