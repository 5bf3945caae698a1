"""Who performs a write, as the audit ledger records it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from bailing.audit.models import AuditEvent


@dataclass(frozen=True)
class Actor:
    """The author of an audited change: a type of :class:`AuditEvent.ActorType` and a name.

    ``client_app_id`` and ``session_id`` are the context an agent or client actor brings: the ledger
    records them on the event unless the service names them itself.
    """

    type: str  # user | agent | client | system
    name: str
    client_app_id: str = ""
    session_id: uuid.UUID | None = None

    def __post_init__(self) -> None:
        if self.type not in AuditEvent.ActorType.values:
            raise ValueError(f"unknown actor type {self.type!r}")

    @classmethod
    def system(cls, name: str = "system") -> Actor:
        return cls("system", name)

    @classmethod
    def user(cls, user) -> Actor:
        return cls("user", user.get_username())

    @classmethod
    def client(cls, client) -> Actor:
        """A business system calling with its Client Token (``client`` has an ``app_id``)."""
        return cls("client", client.app_id, client_app_id=client.app_id)

    @classmethod
    def agent(cls, *, session_id: uuid.UUID, client_app_id: str) -> Actor:
        """A signed-in local agent: named by its session, in the context of its client."""
        return cls("agent", str(session_id), client_app_id=client_app_id, session_id=session_id)
