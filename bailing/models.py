"""Models of the plumbing app: the audit ledger (``bailing.audit``), used by every app."""

from bailing.audit.models import AuditEvent

__all__ = ["AuditEvent"]
