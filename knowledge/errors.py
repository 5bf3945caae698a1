"""Error codes of the agent knowledge protocol ``bailing.agent-knowledge.v1``.

Declared once here (docs/errors.md "Error codes" lists them with their statuses); services raise
them, the shared exception handler renders them. Messages are fixed texts: a reference, cursor,
document body, credential or SQL fragment never reaches them, so an error cannot leak what the
caller was not allowed to read.
"""

from __future__ import annotations

from bailing.api.errors import ApiError

__all__ = [
    "KnowledgeChanged",
    "KnowledgeReferenceExpired",
    "KnowledgeReferenceInvalid",
    "KnowledgeScopeChanged",
    "KnowledgeUnavailable",
]


class KnowledgeReferenceInvalid(ApiError):
    """A reference or cursor that is malformed, forged, signed under another key, of the wrong kind,
    or bound to another identity (client, session, principal, workspace or run). One code for all of
    them, so a caller cannot probe which binding failed."""

    code = "knowledge_reference_invalid"
    http_status = 400
    default_message = "The knowledge reference or cursor is invalid; search again."


class KnowledgeReferenceExpired(ApiError):
    """An authentic reference or cursor past its five-minute lifetime (see docs/protocol.md
    "References and cursors")."""

    code = "knowledge_reference_expired"
    http_status = 410
    default_message = "The knowledge reference has expired; search again."


class KnowledgeScopeChanged(ApiError):
    """The workspace's knowledge configuration changed since the reference was issued (see
    docs/protocol.md "Scope and document revisions")."""

    code = "knowledge_scope_changed"
    http_status = 409
    default_message = "The workspace's knowledge configuration changed; search again."


class KnowledgeChanged(ApiError):
    """The referenced document changed or is no longer ready (docs/protocol.md "Scope and document
    revisions"): a newer body is never substituted for the revision the reference names."""

    code = "knowledge_changed"
    http_status = 409
    default_message = "The referenced knowledge changed; search again."


class KnowledgeUnavailable(ApiError):
    """Knowledge could not be read right now (a backend failure), which is not "no knowledge"."""

    code = "knowledge_unavailable"
    http_status = 503
    default_message = "Knowledge is temporarily unavailable."
