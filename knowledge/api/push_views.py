"""The knowledge push API for business backends, under ``/kb/`` (docs/protocol.md "Knowledge ingestion").

``PUT /kb/{kb_id}/docs/{source_key}``    create or replace a document; it is queued for indexing
``DELETE /kb/{kb_id}/docs/{source_key}`` delete it with its chunks
``GET /kb/{kb_id}/docs``                 list the documents, ordered by ``source_key``, paginated

Authentication is the Client Token of an enabled client (401 ``unauthorized`` otherwise, a disabled
client included, as everywhere the token is checked). The client must be listed in the knowledge
base's ``writers``. As BailingHub does, an unknown knowledge base is 404 ``not_found`` and a known
one the client may not write is 403 ``forbidden``; a disabled knowledge base is 403 ``forbidden``
as well (it accepts no writes and serves no reads until re-enabled; 409 would suggest retrying
the same request could succeed on its own).

Replies are BailingHub's: ``PUT`` answers 200 ``{ok, doc_id, created, status}`` for a new and for a
replaced document alike (``created`` tells them apart; existing clients check 200), ``status`` being
the document's status after the put: ``embedding`` when queued, or the current one (``ready``) when
the content was unchanged and nothing was queued. ``DELETE`` answers ``{ok: true, deleted: true}``
or 404 ``not_found``. Nothing is written on any 4xx: every check happens before ``document_put``.

Every request of an authenticated client counts against its shared per-minute rate bucket
(``rate_limit_per_min``, 0 = unlimited; ``agent_runtime.services.rate_limits``, in PostgreSQL so
every worker shares it): over it, 429 ``rate_limited`` with ``Retry-After``.
"""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runtime.api.authentication import ClientTokenAuthentication
from agent_runtime.models import Client
from agent_runtime.services.rate_limits import client_rate_consume
from bailing.api.errors import InvalidRequest, NotFound
from bailing.api.serializers import JSONObjectField, StrictCharField, StrictSerializer, validate_strict
from bailing.api.timefmt import utc_iso
from bailing.audit.actor import Actor
from knowledge.models import SOURCE_KEY_RE, TITLE_MAX_CHARS, Document
from knowledge.selectors.bases import knowledge_base_writable_for_client
from knowledge.services.documents import document_delete, document_put

# UTF-16 code units, as BailingHub's JavaScript counts them (docs/protocol.md "Counting characters").
CONTENT_MAX_CHARS = 300_000
METADATA_MAX_BYTES = 16 * 1024  # compact UTF-8 JSON
# Raw body budget: 300,000 units written as ``\uXXXX`` escapes (json.dumps' default) are 1.8 MB;
# title, metadata and the envelope fit in the rest. Past it: 413 before the body is parsed.
PUSH_BODY_MAX_BYTES = 2 * 1024 * 1024
LIST_DEFAULT_LIMIT = 100
LIST_MAX_LIMIT = 500
_LIMIT_RE = re.compile(r"[1-9][0-9]{0,2}")
_PARAM_RE = re.compile(r"[A-Za-z0-9_]{1,64}")


class DocumentInput(StrictSerializer):
    title = StrictCharField(min_length=1, max_length=TITLE_MAX_CHARS, display=True)
    content = StrictCharField(min_length=1, max_length=CONTENT_MAX_CHARS, multiline=True)
    content_type = StrictCharField(pattern=r"text|markdown", required=False)
    metadata = JSONObjectField(max_bytes=METADATA_MAX_BYTES, required=False, allow_null=True)

    def validate_title(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("Blank title.")
        return value

    def validate_metadata(self, value: dict | None) -> dict:
        if value is not None and _holds_nul(value):
            # PostgreSQL's jsonb cannot store U+0000.
            raise serializers.ValidationError("Contains U+0000.")
        return value or {}


class DocumentListQuery(StrictSerializer):
    """The list's query string as the OpenAPI document shows it (``_list_params`` parses it)."""

    limit = StrictCharField(pattern=r"[1-9][0-9]{0,2}", required=False)
    cursor = StrictCharField(pattern=SOURCE_KEY_RE.pattern, required=False)


def _holds_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _client_actor(client: Client) -> Actor:
    return Actor.client(client)


def _checked_source_key(source_key: str) -> str:
    if not SOURCE_KEY_RE.fullmatch(source_key):
        raise InvalidRequest("source_key must match [A-Za-z0-9_.:-]{1,128}.", field="source_key")
    return source_key


class _PushApi(APIView):
    authentication_classes = [ClientTokenAuthentication]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        client_rate_consume(client=request.auth)


class DocumentApi(_PushApi):
    """``PUT`` / ``DELETE /kb/{kb_id}/docs/{source_key}``."""

    body_max_bytes = PUSH_BODY_MAX_BYTES
    schema_request_serializer = DocumentInput

    def put(self, request: Request, kb_id: str, source_key: str) -> Response:
        kb = knowledge_base_writable_for_client(kb_id=kb_id, client=request.auth)
        source_key = _checked_source_key(source_key)
        data = validate_strict(DocumentInput, request.data)
        result = document_put(
            kb=kb,
            source_key=source_key,
            title=data["title"],
            content=data["content"],
            content_type=data.get("content_type", "markdown"),
            metadata=data.get("metadata") or {},
            actor=_client_actor(request.auth),
        )
        document = result.document
        return Response(
            {"ok": True, "doc_id": document.pk, "created": result.created, "status": document.status}
        )

    def delete(self, request: Request, kb_id: str, source_key: str) -> Response:
        kb = knowledge_base_writable_for_client(kb_id=kb_id, client=request.auth)
        source_key = _checked_source_key(source_key)
        if not document_delete(kb=kb, source_key=source_key, actor=_client_actor(request.auth)):
            raise NotFound("Unknown document.")
        return Response({"ok": True, "deleted": True})


class DocumentListApi(_PushApi):
    """``GET /kb/{kb_id}/docs?limit=&cursor=``: documents ordered by ``source_key``.

    ``limit`` is 1–500 (default 100). ``next_cursor`` is null on the last page, otherwise the value
    to send as ``cursor`` for the next one (opaque to clients; documents added or removed between
    pages are seen or skipped by their key, never repeated).
    """

    schema_query_serializer = DocumentListQuery

    def get(self, request: Request, kb_id: str) -> Response:
        kb = knowledge_base_writable_for_client(kb_id=kb_id, client=request.auth)
        limit, cursor = _list_params(request)
        rows = Document.objects.filter(kb=kb)
        if cursor is not None:
            rows = rows.filter(source_key__gt=cursor)
        page = list(
            rows.order_by("source_key").only(
                "pk", "source_key", "title", "status", "error", "chunk_count", "updated_at"
            )[: limit + 1]
        )
        more = len(page) > limit
        page = page[:limit]
        return Response(
            {
                "kb_id": kb.kb_id,
                "docs": [
                    {
                        "source_key": doc.source_key,
                        "doc_id": doc.pk,
                        "title": doc.title,
                        "status": doc.status,
                        "error": doc.error,
                        "chunk_count": doc.chunk_count,
                        "updated_at": utc_iso(doc.updated_at),
                    }
                    for doc in page
                ],
                "next_cursor": page[-1].source_key if more else None,
            }
        )


def _list_params(request: Request) -> tuple[int, str | None]:
    params = request.query_params
    for name in params:
        if name not in ("limit", "cursor"):
            # The name is echoed only when it is a plain identifier.
            raise InvalidRequest("Unknown query parameter.", field=name if _PARAM_RE.fullmatch(name) else "$")
        if len(params.getlist(name)) > 1:
            raise InvalidRequest("Repeated query parameter.", field=name)
    limit = LIST_DEFAULT_LIMIT
    if "limit" in params:
        raw = params["limit"]
        if not _LIMIT_RE.fullmatch(raw) or int(raw) > LIST_MAX_LIMIT:
            raise InvalidRequest("limit must be an integer from 1 to 500.", field="limit")
        limit = int(raw)
    cursor = params.get("cursor")
    if cursor is not None and not SOURCE_KEY_RE.fullmatch(cursor):
        raise InvalidRequest("The cursor is invalid.", field="cursor")
    return limit, cursor
