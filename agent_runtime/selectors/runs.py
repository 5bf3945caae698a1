"""Read-only lookups of agent runs, always scoped to the calling agent session.

A run is visible only to the session (and client) that prepared it, and only once its context is
frozen: a ``preparing`` run exists only inside the transaction that creates it, and is treated as
absent everywhere else. Callers never look a run up by bare primary key.
"""

from __future__ import annotations

import re
import uuid

from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentRun
from bailing.api.errors import InvalidRequest

# UUID versions 1–5 with the RFC 4122 variant, as BailingHub's ``safeRunId`` accepts
# (docs/protocol.md "Identifiers").
_RUN_ID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", re.I)


def run_id_parse(value: object, *, field: str = "run_id") -> uuid.UUID:
    """A run id as sent by an agent: a UUID string, never trimmed; else 400 ``invalid_request``."""
    if not isinstance(value, str) or not _RUN_ID_RE.fullmatch(value):
        raise InvalidRequest(field=field)
    return uuid.UUID(value)


def run_get_for_session(*, identity: AgentIdentity, run_id: uuid.UUID, route_key: str | None = None):
    """The caller's run ``run_id`` (optionally also bound to ``route_key``), or ``None``."""
    runs = AgentRun.objects.filter(
        run_id=run_id, session_id=identity.session.pk, client_id=identity.client.pk
    ).exclude(status=AgentRun.Status.PREPARING)
    if route_key is not None:
        runs = runs.filter(route__route_key=route_key)
    return runs.first()
