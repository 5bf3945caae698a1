"""The one knowledge orchestration for agents: every surface that hands knowledge to an agent calls
it — the agent knowledge protocol ``bailing.agent-knowledge.v1`` (REST), the MCP tools
``search_knowledge`` / ``ask_knowledge`` and knowledge delivered in turns.

Each operation validates the agent's input (:func:`agent_query_check`, one rule and one limit for
every surface), resolves the workspace's scope (:func:`workspace_knowledge_scope`), retrieves
(:func:`knowledge_retrieve`), builds the result and records its audit event (:func:`_audit`); the
surfaces only translate their input and render what comes back.

Operations (spec "Agent knowledge search and read"; docs/protocol.md "Knowledge protocol limits" and
"MCP endpoint"):

* :func:`agent_knowledge_capabilities_get` — negotiation: the limits below and the scope revision.
* :func:`agent_knowledge_search` — at most three hints (one per parent document), the whole
  response within 4096 UTF-8 bytes (:func:`knowledge.budget.fit_search_hints`).
* :func:`agent_knowledge_read` — one page of one referenced document revision, the whole response
  within the caller's byte budget, a reading chain capped at 131072 content bytes
  (:func:`knowledge.budget.read_page`).
* :func:`knowledge_passages_search` — ranked chunks with their sources (``search_knowledge``); the
  surface's own response budget decides how many of them it shows.
* :func:`knowledge_ask` — an answer citing only retrieved sources (``ask_knowledge``,
  :mod:`knowledge.services.answers`).

Shared with turns (:mod:`knowledge.services.turns`):

* :func:`knowledge_hints_search` / :func:`knowledge_hints_build` — the same hints a search returns,
  so ``context.knowledge_delivery`` of an ``on_demand`` turn is exactly what a search would say;
* :func:`knowledge_delivery_build` — that block, fitted to 4096 bytes;
* :func:`knowledge_inline_build` — the legacy inline ``knowledge`` / ``knowledge_refs`` arrays.

Knowledge leaving towards an agent: every knowledge text an agent receives from any surface passes
:func:`knowledge_text_release`, and only there: the title, content and source label of each hit
(:func:`knowledge_retrieve`, the only retrieval the builders here are given: search hints and
summaries, MCP excerpts and sources, the sources an answer is written from, inline chunks), the title
and body of a document read whole (:func:`_read_state` for ``read`` pages, :func:`_inline_documents`
for inline ``doc`` mode) and the text of an answer (:func:`knowledge_ask`). Texts are released
before any surface cuts them. The workspace's data policy is applied there (surface
``knowledge``); each operation collects what it found (:func:`knowledge_policy_tally`) for its
response's additive ``data_policy`` field, its audit event and the findings metric
(docs/protocol.md "Data policy"). Those counts cover only what the agent receives: the findings of a
retrieved hit are *held* until the operation knows which hits its response keeps — one per document,
at most ``limit``, within the byte budget — and which of their texts it shows (a hint shows a title
and a summary, an inline chunk no source label, an answer only its sources' titles and labels), and
only then counted (:meth:`PolicyTally.deliver`). A hint kept with its summary cut short still counts
the findings of its whole chunk (the text was released whole, before the cut).

Decisions (recorded here because the spec leaves them open; summarised in docs/protocol.md from
"Knowledge protocol limits" to "Knowledge in turns"):

* ``query`` must be a string with a non-whitespace character (whitespace only counts as empty, as
  capability search does) and is at most :data:`AGENT_QUERY_MAX_CHARS` (2000) UTF-16 units, on
  every surface; a REST ``limit`` is a JSON integer 1–3 (``true`` and ``"2"`` are rejected, never
  coerced or clamped) and defaults to 3.
* Retrieval asks for ``max(route top_k, limit)`` hits with the route's ``min_score`` (which bounds
  the vector lane, see :mod:`knowledge.selectors.search`), keeps the best chunk of each parent
  document, best first, and stops at ``limit`` documents.
* A hint's ``summary`` is the best current chunk's text, verbatim, cut to 480 UTF-16 units without
  splitting a character (the byte budget may shorten it further). ``title`` is cut to 191 units.
  ``score`` is the fused ranking score rounded to 4 decimals: a ranking score, not a probability.
* References bind :func:`caller_binding` (client, session, the session's principal and
  on_behalf_of, route, run or ``None``), the scope revision (:mod:`knowledge.selectors.scope`),
  the document id and its revision. A read recomputes the binding from the *current* caller and
  the request's ``run_id``: a reference searched with a run must be read with that run, one searched
  without a run must be read without one.
* A cursor carries only its reference's digest, the next offset and the bytes served so far, and
  expires with its reference: a reading chain must be finished within 300 s of the search that
  issued the reference; after that the agent searches again (410, then a new reference).
* ``run_id`` must name a ``context_ready`` run of this session, client and route; anything else —
  unknown, foreign, still preparing, completed, failed, cancelled — is 404
  ``run_not_found``. Turn preparation (server side) may bind hints to its own run while it is still
  preparing; they become readable once the turn is ``context_ready``.
* The ``on_demand`` delivery block has no ``truncated`` field (the spec lists its fields): its
  hints are fitted with the search rules and the block is at most 4096 bytes.
* Passages (``search_knowledge``) are one per retrieved chunk, best first; ``source_id`` (and its
  alias ``document_id``) is ``<kb_id>:<source_key>``, ``source`` the document metadata's ``source``
  label when its connector recorded one. ``ask`` retrieves :data:`ASK_RETRIEVE` chunks and gives the
  answerer one source per document, its :data:`ASK_CHUNKS_PER_SOURCE` best chunks. A retrieval in
  which no source answered (``unavailable``) is 503 ``knowledge_unavailable`` naming the reasons for
  both (the REST search reports it as its ``status`` instead).

Knowledge operations only read: no invocation, job, approval or business request is created, and
they work in knowledge-only workspaces (``agent_direct`` off). One audit event per operation, never
the query, content or answer: ``knowledge.agent.search`` (status and counts), ``knowledge.agent.read``
(document coordinates and bytes served), ``mcp.knowledge.search`` / ``mcp.knowledge.ask`` (status,
mode and counts).
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from django.db import DatabaseError, connection, transaction

from agent_runtime.data_policy import KNOWLEDGE, PolicyOutcome, data_policy_apply
from agent_runtime.data_policy.policy import ACTION_STRENGTH
from agent_runtime.errors import RunNotFound
from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentRun
from agent_runtime.selectors.routes import WorkspaceAccess, route_for_identity
from agent_runtime.selectors.runs import run_get_for_session, run_id_parse
from agent_runtime.services.data_policy import data_policy_count
from bailing.api.errors import InvalidRequest
from bailing.api.limits import SHORT_TEXT_MAX_CHARS, cut_utf16, utf16_length
from bailing.api.timefmt import utc_iso
from bailing.audit.ledger import audit_record
from knowledge import budgets
from knowledge.budget import (
    READ_CHAIN_MAX_BYTES,
    SEARCH_MAX_BYTES,
    SEARCH_MAX_RESULTS,
    fit_search_hints,
    read_page,
)
from knowledge.errors import (
    KnowledgeChanged,
    KnowledgeReferenceInvalid,
    KnowledgeScopeChanged,
    KnowledgeUnavailable,
)
from knowledge.models import Document
from knowledge.selectors.scope import KnowledgeScope, knowledge_scope
from knowledge.selectors.search import STATUS_UNAVAILABLE, Hit, SearchResult
from knowledge.services.answers import AnswerSource, AnswerUnavailable, knowledge_answer
from knowledge.services.documents import document_revision
from knowledge.services.retrieval import knowledge_search
from knowledge.tokens import (
    REFERENCE_TTL_SECONDS,
    RefClaims,
    cursor_issue,
    cursor_open,
    identity_binding,
    reference_check_access,
    reference_check_revision,
    reference_issue,
    reference_open,
)

logger = logging.getLogger(__name__)

PROTOCOL = "bailing.agent-knowledge.v1"
CAPABILITIES_SCHEMA = "bailing.agent-knowledge-capabilities.v1"
SEARCH_SCHEMA = "bailing.agent-knowledge-search.v1"
READ_SCHEMA = "bailing.agent-knowledge-read.v1"
DELIVERY_SCHEMA = "bailing.agent-knowledge-delivery.v1"
TRUST = "reference_only"
DELIVERY_MODES = ["inline", "on_demand"]

# What an agent may ask, on every surface (REST search, MCP search_knowledge and ask_knowledge), in
# UTF-16 units. Retrieval reads at most retrieval.RETRIEVAL_QUERY_MAX_CHARS of any query (a turn's
# is longer).
AGENT_QUERY_MAX_CHARS = budgets.QUERY_MAX_CHARS
QUERY_REQUIRED_TEXT = "`query` must be a non-empty string"
QUERY_TOO_LONG_TEXT = f"`query` must be at most {AGENT_QUERY_MAX_CHARS} characters"
READ_DEFAULT_BYTES = 16384
READ_MIN_BYTES = 4096
READ_MAX_BYTES = budgets.READ_MAX_BYTES
LIMITS: dict[str, int] = {
    "search_max_results": SEARCH_MAX_RESULTS,
    "search_max_bytes": SEARCH_MAX_BYTES,
    "read_default_bytes": READ_DEFAULT_BYTES,
    "read_max_bytes": READ_MAX_BYTES,
    "reference_ttl_seconds": REFERENCE_TTL_SECONDS,
    "read_chain_max_bytes": READ_CHAIN_MAX_BYTES,
}

SUMMARY_MAX_CHARS = 480
HINT_TITLE_MAX_CHARS = SHORT_TEXT_MAX_CHARS
SCORE_DECIMALS = 4

# Legacy inline delivery (docs/protocol.md "Knowledge in turns"): caps in UTF-16 units.
INLINE_TITLE_MAX_CHARS = 300
INLINE_CHUNK_MAX_CHARS = 3000
INLINE_DOC_MAX_CHARS = 6000
INLINE_DOC_MIN_CANDIDATES = 8

# ask: chunks retrieved, and the best chunks of one document the answerer reads as its source.
ASK_RETRIEVE = 8
ASK_CHUNKS_PER_SOURCE = 2

# A read must neither hang on a lock nor hold a connection for long; past these it is 503.
READ_LOCK_TIMEOUT_MS = 2000
READ_STATEMENT_TIMEOUT_MS = 5000


# --------------------------------------------------------------------------------------------------
# The shared steps: input, scope, retrieval, release, audit
# --------------------------------------------------------------------------------------------------


def agent_query_check(query: Any) -> str:
    """An agent's ``query``, unchanged, when it is a string with a non-whitespace character and at
    most :data:`AGENT_QUERY_MAX_CHARS` UTF-16 units; else 400 ``invalid_request`` naming ``query``
    (the message says which rule failed)."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidRequest(QUERY_REQUIRED_TEXT, field="query")
    if utf16_length(query) > AGENT_QUERY_MAX_CHARS:
        raise InvalidRequest(QUERY_TOO_LONG_TEXT, field="query")
    return query


def workspace_knowledge_scope(access: WorkspaceAccess) -> KnowledgeScope:
    """The knowledge scope of a workspace the route gate let the agent into."""
    return knowledge_scope(route=access.route, effective=access.effective)


KNOWLEDGE_WITHHELD_TEXT = "[This text was withheld by the workspace's data policy (detectors: {detectors}).]"


# The texts of a hit (its released fields) that each surface hands to the agent.
HINT_FIELDS = ("title", "content")  # search and on-demand hints: the title and a summary of the chunk
PASSAGE_FIELDS = ("title", "content", "source")  # MCP search_knowledge results
INLINE_CHUNK_FIELDS = ("title", "content")  # legacy inline chunks (no source label)
TITLE_FIELDS = ("title",)  # inline doc mode: the document's body is released by itself
SOURCE_FIELDS = ("title", "source")  # ask_knowledge's cited sources
CONTENT_FIELDS = ("content",)  # ... and the chunks their answer was written from


class PolicyTally:
    """What the data policy found in the texts one knowledge operation delivered: counts per detector
    and the strongest action, for its response's ``data_policy`` field, its audit event and the
    findings metric.

    A text released with a ``hold`` key (a retrieved hit's title, content or source label) is held
    until :meth:`deliver` says the response keeps it; what is never delivered is never counted."""

    def __init__(self) -> None:
        self.findings: dict[str, int] = {}
        self.action: str | None = None
        self._held: dict[tuple[int, str], tuple[str, PolicyOutcome]] = {}

    @staticmethod
    def _merge(findings: dict[str, int], action: str | None, outcome: PolicyOutcome) -> str | None:
        for detector, count in outcome.findings.items():
            findings[detector] = findings.get(detector, 0) + count
        if action is None or ACTION_STRENGTH[outcome.action] > ACTION_STRENGTH[action]:
            return outcome.action
        return action

    def add(self, outcome: PolicyOutcome, *, route_key: str) -> None:
        """Count a delivered text's findings (the operation's totals and the metric)."""
        data_policy_count(route_key=route_key, outcome=outcome)
        self.action = self._merge(self.findings, self.action, outcome)

    def hold(self, key: tuple[int, str], outcome: PolicyOutcome, *, route_key: str) -> None:
        self._held[key] = (route_key, outcome)

    def _held_of(self, hits: Iterator[Hit] | list[Hit], fields: tuple[str, ...]):
        for hit in hits:
            for name in fields:
                held = self._held.get((hit.chunk_id, name))
                if held is not None:
                    yield (hit.chunk_id, name), held

    def deliver(self, hits: list[Hit], fields: tuple[str, ...]) -> None:
        """The response keeps ``fields`` of ``hits``: count what was held for them."""
        for key, (route_key, outcome) in list(self._held_of(hits, fields)):
            del self._held[key]
            self.add(outcome, route_key=route_key)

    def summary_if(self, hits: list[Hit], fields: tuple[str, ...]) -> dict[str, Any] | None:
        """The summary as it would be if ``fields`` of ``hits`` were delivered (nothing is counted)."""
        findings, action = dict(self.findings), self.action
        for _, (_, outcome) in self._held_of(hits, fields):
            action = self._merge(findings, action, outcome)
        return {"action": action, "findings": findings} if findings else None

    @property
    def summary(self) -> dict[str, Any] | None:
        """``{"action", "findings"}`` — counts only — or None when no delivered text was touched."""
        return {"action": self.action, "findings": dict(self.findings)} if self.findings else None

    def audit(self) -> dict[str, Any]:
        summary = self.summary
        return {"data_policy": summary} if summary else {}


_tally: ContextVar[PolicyTally | None] = ContextVar("knowledge_policy_tally", default=None)


@contextmanager
def knowledge_policy_tally() -> Iterator[PolicyTally]:
    """Collect the data policy's findings of the texts released inside the block."""
    tally = PolicyTally()
    token = _tally.set(tally)
    try:
        yield tally
    finally:
        _tally.reset(token)


def knowledge_text_release(text: str, *, scope: KnowledgeScope, hold: tuple[int, str] | None = None) -> str:
    """A knowledge text on its way to an agent of ``scope``'s workspace, as the agent may receive it.

    The one place every knowledge text bound for an agent passes (see the module docstring), before
    any surface cuts it: the route's data policy (surface ``knowledge``) redacts its findings, flags
    them (the text is unchanged), or withholds the whole text — an excerpt, a page, an answer —
    leaving a note naming the detectors (:data:`KNOWLEDGE_WITHHELD_TEXT`). The findings are counted
    in ``bailing_data_policy_findings_total`` and in the operation's tally (its response's
    ``data_policy`` field and audit event) — with ``hold`` (a hit's chunk id and field), only once
    the operation delivers that text (:meth:`PolicyTally.deliver`). No policy: the text leaves as
    stored.
    """
    policy = scope.data_policy
    if policy is None or not policy.applies_to(KNOWLEDGE):
        return text
    outcome = data_policy_apply(policy=policy, value=text, surface=KNOWLEDGE)
    if not outcome.touched:
        return text
    tally = _tally.get()
    if tally is None:  # no operation to say what it delivers: counted as released
        data_policy_count(route_key=scope.route_key, outcome=outcome)
    elif hold is not None:
        tally.hold(hold, outcome, route_key=scope.route_key)
    else:
        tally.add(outcome, route_key=scope.route_key)
    if outcome.blocked:
        return KNOWLEDGE_WITHHELD_TEXT.format(detectors=", ".join(outcome.findings))
    return outcome.value


def knowledge_retrieve(*, scope: KnowledgeScope, query: str, limit: int) -> SearchResult:
    """Up to ``limit`` fresh hits for ``query`` in ``scope`` (the route's ``min_score``), their
    title, content and source label released (their findings held for :meth:`PolicyTally.deliver`).
    A scope without knowledge answers ``disabled``."""
    result = knowledge_search(scope=scope, query=query, limit=limit)
    hits = [
        dataclasses.replace(
            hit,
            title=knowledge_text_release(hit.title, scope=scope, hold=(hit.chunk_id, "title")),
            content=knowledge_text_release(hit.content, scope=scope, hold=(hit.chunk_id, "content")),
            source=None
            if hit.source is None
            else knowledge_text_release(hit.source, scope=scope, hold=(hit.chunk_id, "source")),
        )
        for hit in result.hits
    ]
    return dataclasses.replace(result, hits=hits)


def _audit(
    *, identity: AgentIdentity, route_key: str, action: str, target_type: str, target_id: str, data: dict
) -> None:
    """One audit event of the agent's session, in its own transaction."""
    with transaction.atomic():
        audit_record(
            action=action,
            actor=identity.actor,
            route_key=route_key,
            target_type=target_type,
            target_id=target_id,
            data=data,
        )


def _audit_scope(
    *, identity: AgentIdentity, access: WorkspaceAccess, action: str, scope: KnowledgeScope, data: dict
) -> None:
    """The audit event of an operation over a whole scope (search, passages, ask)."""
    _audit(
        identity=identity,
        route_key=access.route_key,
        action=action,
        target_type="knowledge_scope",
        target_id=scope.revision,
        data=data,
    )


def _retrieve_answering(
    *, identity: AgentIdentity, access: WorkspaceAccess, query: Any, limit: int, action: str
) -> tuple[KnowledgeScope, SearchResult]:
    """Query rule, scope and retrieval of an operation that needs a source to answer (passages, ask):
    a retrieval in which no source answered is audited (``action``, its status only) and is 503
    ``knowledge_unavailable`` naming the reasons."""
    agent_query_check(query)
    scope = workspace_knowledge_scope(access)
    result = knowledge_retrieve(scope=scope, query=query, limit=limit)
    if result.status == STATUS_UNAVAILABLE:
        _audit_scope(
            identity=identity, access=access, action=action, scope=scope, data={"status": result.status}
        )
        reasons = ", ".join(result.degraded) or "no knowledge base answered"
        raise KnowledgeUnavailable(f"the knowledge base is unavailable ({reasons})")
    return scope, result


# --------------------------------------------------------------------------------------------------
# Binding and run checks
# --------------------------------------------------------------------------------------------------


def caller_binding(*, identity: AgentIdentity, route_key: str, run_id: uuid.UUID | None) -> str:
    """The identity binding of references issued to (and read by) this caller in this workspace.

    Computed from the database rows of the current session on both sides, so the principal has the
    same JSON types at search and at read (:func:`knowledge.tokens.identity_binding`).
    """
    session = identity.session
    return identity_binding(
        client_id=identity.client.pk,
        session_id=session.pk,
        principal={"principal": session.principal, "on_behalf_of": session.on_behalf_of},
        route_key=route_key,
        run_id=run_id,
    )


def _run_parse(run_id: str | None) -> uuid.UUID | None:
    """Syntax only (400 ``invalid_request``); whether the run is current is :func:`_run_require`."""
    return None if run_id is None else run_id_parse(run_id)


def _run_require(*, identity: AgentIdentity, route_key: str, run_id: uuid.UUID | None) -> None:
    """A given run must be a ``context_ready`` run of this session, client and route (see
    docs/protocol.md "Knowledge protocol limits")."""
    if run_id is None:
        return
    run = run_get_for_session(identity=identity, run_id=run_id, route_key=route_key)
    if run is None or run.status != AgentRun.Status.CONTEXT_READY:
        raise RunNotFound()


# --------------------------------------------------------------------------------------------------
# Capabilities
# --------------------------------------------------------------------------------------------------


def agent_knowledge_capabilities_get(*, identity: AgentIdentity, route_key: str) -> dict[str, Any]:
    """``bailing.agent-knowledge-capabilities.v1`` for the workspace ``route_key``.

    ``enabled`` is true when at least one configured knowledge base is enabled: a workspace without
    one still supports the protocol (searches answer ``disabled``).
    """
    access = route_for_identity(identity=identity, route_key=route_key)
    scope = workspace_knowledge_scope(access)
    return {
        "schema_version": CAPABILITIES_SCHEMA,
        "protocol": PROTOCOL,
        "supported": True,
        "route": access.route_key,
        "enabled": bool(scope.bases),
        "knowledge_scope_revision": scope.revision,
        "delivery_modes": list(DELIVERY_MODES),
        "limits": dict(LIMITS),
    }


# --------------------------------------------------------------------------------------------------
# Hints (search and on-demand turns)
# --------------------------------------------------------------------------------------------------


def knowledge_hints_search(
    *, scope: KnowledgeScope, query: str, limit: int = SEARCH_MAX_RESULTS
) -> SearchResult:
    """Retrieve the candidates of up to ``limit`` hints: ``max(top_k, limit)`` fresh hits with the
    route's ``min_score``. A scope without knowledge answers ``disabled`` without searching."""
    return knowledge_retrieve(scope=scope, query=query, limit=max(scope.config["top_k"], limit))


def knowledge_hints_build(
    *,
    scope: KnowledgeScope,
    result: SearchResult,
    limit: int,
    binding: str,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """One hint per parent document, best first, at most ``limit``, each with a signed reference.

    Only hits of the result are used, so a summary is always an excerpt of a real current chunk.
    """
    hints: list[dict[str, Any]] = []
    for hit in hint_hits(result, limit):
        issued = reference_issue(
            binding=binding,
            scope_revision=scope.revision,
            document_id=hit.document_id,
            revision=hit.revision,
            now=now,
        )
        hints.append(
            {
                "ref": issued.token,
                "title": cut_utf16(hit.title, HINT_TITLE_MAX_CHARS)[0],
                "summary": cut_utf16(hit.content, SUMMARY_MAX_CHARS)[0],
                "revision": hit.revision,
                "score": round(hit.score, SCORE_DECIMALS),
                "expires_at": utc_iso(issued.expires_at),
            }
        )
    return hints


def hint_hits(result: SearchResult, limit: int) -> list[Hit]:
    """The hits :func:`knowledge_hints_build` makes hints of: the best of each document, best first,
    at most ``limit``."""
    picked: list[Hit] = []
    seen: set[int] = set()
    for hit in result.hits:
        if hit.document_id not in seen:
            seen.add(hit.document_id)
            picked.append(hit)
            if len(picked) == limit:
                break
    return picked


def _deliver_hints(tally: PolicyTally, hits: list[Hit], fitted: list[dict[str, Any]]) -> None:
    """The fitted hints (a prefix of ``hits``' hints) are delivered: each one's title, and its
    content when the budget left any of its summary."""
    for hit, hint in zip(hits, fitted, strict=False):
        tally.deliver([hit], HINT_FIELDS if hint["summary"] else TITLE_FIELDS)


def knowledge_delivery_build(
    *,
    scope: KnowledgeScope,
    result: SearchResult,
    binding: str,
    now: datetime | None = None,
    tally: PolicyTally | None = None,
) -> dict[str, Any]:
    """``context.knowledge_delivery`` of an ``on_demand`` turn, at most 4096 UTF-8 bytes.

    Hints are built and fitted exactly like a search's; the fitting's ``truncated`` flag is not part
    of this block (the spec lists its fields), the block is only ever smaller than what was measured.
    ``tally`` (the one ``result`` was retrieved under) counts the findings of the hints kept.
    """
    envelope = {
        "schema_version": DELIVERY_SCHEMA,
        "mode": "on_demand",
        "protocol": PROTOCOL,
        "knowledge_scope_revision": scope.revision,
        "status": result.status,
    }
    hints = knowledge_hints_build(
        scope=scope, result=result, limit=SEARCH_MAX_RESULTS, binding=binding, now=now
    )
    fitted = fit_search_hints(envelope=envelope, hints=hints)
    if tally is not None:
        _deliver_hints(tally, hint_hits(result, SEARCH_MAX_RESULTS), fitted["hints"])
    return {**envelope, "hints": fitted["hints"]}


def agent_knowledge_search(
    *,
    identity: AgentIdentity,
    route_key: str,
    query: str,
    limit: int | None = None,
    run_id: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """``bailing.agent-knowledge-search.v1``: bounded hints for ``query`` in workspace ``route_key``.

    Order of checks: ``query`` (400 ``invalid_request``) → route gate → ``run_id`` syntax (400
    ``invalid_request``) → the run is current (404 ``run_not_found``); ``limit`` (1–3) is the view's.
    Retrieval failures are a status (``partial`` / ``unavailable``), never an empty ``ok``.
    """
    agent_query_check(query)
    access = route_for_identity(identity=identity, route_key=route_key)
    run = _run_parse(run_id)
    _run_require(identity=identity, route_key=access.route_key, run_id=run)
    limit = SEARCH_MAX_RESULTS if limit is None else limit
    scope = workspace_knowledge_scope(access)
    with knowledge_policy_tally() as tally:
        result = knowledge_hints_search(scope=scope, query=query, limit=limit)
    binding = caller_binding(identity=identity, route_key=access.route_key, run_id=run)
    hints = knowledge_hints_build(scope=scope, result=result, limit=limit, binding=binding, now=now)
    envelope: dict[str, Any] = {"schema_version": SEARCH_SCHEMA, "route": access.route_key}
    if run is not None:
        envelope["run_id"] = str(run)
    envelope |= {"knowledge_scope_revision": scope.revision, "status": result.status, "trust": TRUST}
    picked = hint_hits(result, limit)
    upper = tally.summary_if(picked, HINT_FIELDS)
    if upper:
        # Additive (docs/protocol.md "Data policy"): inside the 4096-byte budget the hints are fitted
        # to. Fitted with the counts of every hint, then set to the counts of the hints kept: fewer
        # findings never take more bytes (an action can only weaken with a detector gone entirely).
        envelope["data_policy"] = upper
    response = fit_search_hints(envelope=envelope, hints=hints)
    _deliver_hints(tally, picked, response["hints"])
    if tally.summary:
        response["data_policy"] = tally.summary
    else:
        response.pop("data_policy", None)
    _audit_scope(
        identity=identity,
        access=access,
        action="knowledge.agent.search",
        scope=scope,
        data={
            "run_id": None if run is None else str(run),
            "status": result.status,
            "mode": result.mode,
            "degraded": result.degraded,
            "limit": limit,
            "hits": len(result.hits),
            "hints": len(response["hints"]),
            "truncated": response["truncated"],
            **tally.audit(),
        },
    )
    return response


# --------------------------------------------------------------------------------------------------
# Read
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ReadState:
    scope: KnowledgeScope
    document: dict[str, Any] | None  # kb_id (pk), source_key, title, content, revision, status


def _read_state(*, access: WorkspaceAccess, document_id: int) -> _ReadState:
    """The current scope and the referenced document, read in one bounded, always-rolled-back
    transaction (savepoint). Any database failure is 503 ``knowledge_unavailable``: the log names
    the error class only, never SQL or content."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
                [str(READ_LOCK_TIMEOUT_MS), str(READ_STATEMENT_TIMEOUT_MS)],
            )
            scope = workspace_knowledge_scope(access)
            document = (
                Document.objects.filter(pk=document_id)
                .values("kb_id", "source_key", "title", "content", "revision", "status")
                .first()
            )
            # Only reads happened: rolling back undoes the SET LOCALs instead of leaking them.
            transaction.set_rollback(True)
    except DatabaseError as exc:
        logger.warning("knowledge read failed (%s)", type(exc).__name__)
        raise KnowledgeUnavailable() from None
    return _ReadState(scope=scope, document=document)


def _current_revision(document: dict[str, Any] | None) -> str | None:
    """The revision a ready document really has (recomputed from its title and body), else None."""
    if document is None or document["status"] != Document.Status.READY:
        return None
    actual = document_revision(document["title"], document["content"])
    return actual if actual == document["revision"] else None


def agent_knowledge_read(
    *,
    identity: AgentIdentity,
    route_key: str,
    ref: str,
    run_id: str | None = None,
    cursor: str | None = None,
    max_bytes: int = READ_DEFAULT_BYTES,
    now: datetime | None = None,
) -> dict[str, Any]:
    """``bailing.agent-knowledge-read.v1``: one page of the document revision ``ref`` names.

    Order of checks: route gate → ``run_id`` syntax → reference (400/410) → identity binding with
    the current caller and this ``run_id`` (400) → the run is current (404) → scope revision and
    the document's knowledge base (409 ``knowledge_scope_changed``) → the document exists, is ready
    and has the referenced revision (409 ``knowledge_changed``) → cursor (400/410) → page.
    """
    access = route_for_identity(identity=identity, route_key=route_key)
    run = _run_parse(run_id)
    claims = reference_open(ref, now=now)
    binding = caller_binding(identity=identity, route_key=access.route_key, run_id=run)
    if not hmac.compare_digest(claims.binding.encode("ascii"), binding.encode("ascii")):
        raise KnowledgeReferenceInvalid()
    _run_require(identity=identity, route_key=access.route_key, run_id=run)

    state = _read_state(access=access, document_id=claims.document_id)
    reference_check_access(claims, binding=binding, scope_revision=state.scope.revision)
    document = state.document
    if document is not None and document["kb_id"] not in {kb.pk for kb in state.scope.bases}:
        raise KnowledgeScopeChanged()
    reference_check_revision(claims, revision=_current_revision(document))
    if document is None:  # already refused by reference_check_revision; narrows the type
        raise KnowledgeChanged()

    # Released whole, after the revision check and before paging: offsets count released text.
    with knowledge_policy_tally() as tally:
        content = knowledge_text_release(document["content"], scope=state.scope)
        title = knowledge_text_release(document["title"], scope=state.scope)
    offset, served = 0, 0
    if cursor is not None:
        position = cursor_open(cursor, ref=ref, now=now)
        offset, served = _cursor_position(content, position.offset, position.served)

    envelope: dict[str, Any] = {"schema_version": READ_SCHEMA, "route": access.route_key}
    if run is not None:
        envelope["run_id"] = str(run)
    envelope |= {
        "knowledge_scope_revision": state.scope.revision,
        "ref": ref,
        "revision": claims.revision,
        "title": cut_utf16(title, HINT_TITLE_MAX_CHARS)[0],
    }
    if tally.summary:
        # Additive (docs/protocol.md "Data policy"): counts of the whole document, on every page.
        envelope["data_policy"] = tally.summary
    total = len(content.encode("utf-8"))

    def build(page: str, next_cursor: str | None, truncated: bool, exhausted: bool) -> dict[str, Any]:
        return {
            **envelope,
            "content": page,
            "trust": TRUST,
            "next_cursor": next_cursor,
            "truncated": truncated,
            "budget_exhausted": exhausted,
            "total_content_bytes": total,
            "read_chain_max_bytes": READ_CHAIN_MAX_BYTES,
        }

    response = read_page(
        content=content,
        offset=offset,
        served=served,
        max_bytes=max_bytes,
        build=build,
        next_cursor_for=lambda new_offset, new_served: _cursor_token(ref, claims, new_offset, new_served),
    )
    _audit(
        identity=identity,
        route_key=access.route_key,
        action="knowledge.agent.read",
        target_type="knowledge_document",
        target_id=str(claims.document_id),
        data={
            "run_id": None if run is None else str(run),
            "kb_id": next(kb.kb_id for kb in state.scope.bases if kb.pk == document["kb_id"]),
            "source_key": document["source_key"],
            "revision": claims.revision,
            "offset": offset,
            "bytes": len(response["content"].encode("utf-8")),
            "truncated": response["truncated"],
            "budget_exhausted": response["budget_exhausted"],
            **tally.audit(),
        },
    )
    return response


def _cursor_token(ref: str, claims: RefClaims, offset: int, served: int) -> str:
    return cursor_issue(ref=ref, ref_claims=claims, offset=offset, served=served).token


def _cursor_position(content: str, offset: int, served: int) -> tuple[int, int]:
    """An authentic cursor's position, checked against the revision it was issued for.

    The reference pins the revision, so a genuine cursor always points at a character boundary of
    this content within the chain budget; anything else cannot come from this server (400).
    """
    data = content.encode("utf-8")
    if (
        offset > len(data)
        or (offset < len(data) and data[offset] & 0xC0 == 0x80)
        or served > READ_CHAIN_MAX_BYTES
    ):
        raise KnowledgeReferenceInvalid()
    return offset, served


# --------------------------------------------------------------------------------------------------
# Passages and answers (the MCP tools search_knowledge and ask_knowledge)
# --------------------------------------------------------------------------------------------------


class Fitted(Protocol):
    """What a surface's response budget kept of the passages it was given (best first)."""

    @property
    def results(self) -> list[dict[str, Any]]: ...

    @property
    def truncated(self) -> bool: ...


FittedT = TypeVar("FittedT", bound=Fitted)


def _source_id(hit: Hit) -> str:
    return f"{hit.kb_id}:{hit.source_key}"


def _passage(hit: Hit) -> dict[str, Any]:
    passage: dict[str, Any] = {
        "source_id": _source_id(hit),
        "document_id": _source_id(hit),
        "title": hit.title,
        "score": hit.score,
        "retrievers": list(hit.retrievers),
        "content": hit.content,
    }
    if hit.source is not None:
        passage["source"] = hit.source
    return passage


def knowledge_passages_search(
    *,
    identity: AgentIdentity,
    access: WorkspaceAccess,
    query: Any,
    limit: int,
    fit: Callable[[list[dict[str, Any]], dict[str, Any] | None], FittedT],
) -> FittedT:
    """Up to ``limit`` passages (one per retrieved chunk, best first) for ``query`` in the
    workspace, as ``fit`` — the surface's response budget — keeps them.

    A passage is ``{source_id, document_id, title, score, retrievers, content, source?}`` with the
    whole released chunk text; cutting it is the surface's, which also gets the data policy's
    ``data_policy`` summary of the passages it kept (None when untouched): ``fit`` is called once
    without it to learn which passages it keeps (its results, a prefix of the passages given), then
    again with it when there is one — so the summary must not change what ``fit`` keeps. Raises 400
    ``invalid_request`` for the query and 503 ``knowledge_unavailable`` when no source answered; a
    ``partial`` retrieval answers with what it found. Audited as ``mcp.knowledge.search`` with
    what ``fit`` kept.
    """
    action = "mcp.knowledge.search"
    with knowledge_policy_tally() as tally:
        scope, result = _retrieve_answering(
            identity=identity, access=access, query=query, limit=limit, action=action
        )
    passages = [_passage(hit) for hit in result.hits]
    fitted = fit(passages, None)
    tally.deliver(result.hits[: len(fitted.results)], PASSAGE_FIELDS)
    if tally.summary:
        fitted = fit(passages, tally.summary)
    _audit_scope(
        identity=identity,
        access=access,
        action=action,
        scope=scope,
        data={
            "status": result.status,
            "mode": result.mode,
            "degraded": result.degraded,
            "limit": limit,
            "hits": len(result.hits),
            "returned": len(fitted.results),
            "truncated": fitted.truncated,
            **tally.audit(),
        },
    )
    return fitted


@dataclass(frozen=True)
class KnowledgeAnswer:
    """:func:`knowledge_ask`'s answer: its text cites ``sources`` as ``[n]`` (1-based, in order)."""

    text: str
    sources: list[dict[str, Any]]  # {source_id, document_id, title, score, source?}
    data_policy: dict[str, Any] | None = None  # the data policy's summary of the released texts


def _answer_sources(hits: list[Hit]) -> tuple[list[AnswerSource], dict[str, list[Hit]]]:
    """One source per document, best first: its best chunks (in rank order) as the content; and
    the chunks each source was written from, best first."""
    chunks: dict[str, list[Hit]] = {}
    for hit in hits:
        chunks.setdefault(_source_id(hit), []).append(hit)
    sources = []
    best = {}
    for source_id, document_hits in chunks.items():
        top = document_hits[0]
        best[source_id] = document_hits[:ASK_CHUNKS_PER_SOURCE]
        content = "\n\n".join(hit.content for hit in best[source_id])
        sources.append(AnswerSource(source_id=source_id, title=top.title, content=content, score=top.score))
    return sources, best


def knowledge_ask(*, identity: AgentIdentity, access: WorkspaceAccess, query: Any) -> KnowledgeAnswer:
    """An answer to ``query`` citing only sources retrieved from the workspace, with those sources.

    Raises 400 ``invalid_request`` for the query, 503 ``knowledge_unavailable`` when no source
    answered and :class:`~knowledge.services.answers.AnswerUnavailable` when the answer model
    failed (never an answer of the hub's own). Audited as ``mcp.knowledge.ask``.
    """
    action = "mcp.knowledge.ask"
    with knowledge_policy_tally() as tally:
        return _ask(identity=identity, access=access, query=query, action=action, tally=tally)


def _ask(
    *, identity: AgentIdentity, access: WorkspaceAccess, query: Any, action: str, tally: PolicyTally
) -> KnowledgeAnswer:
    scope, result = _retrieve_answering(
        identity=identity, access=access, query=query, limit=ASK_RETRIEVE, action=action
    )
    audit = {"identity": identity, "access": access, "action": action, "scope": scope}
    candidates, best = _answer_sources(result.hits)
    try:
        answer = knowledge_answer(question=query, sources=candidates)
    except AnswerUnavailable:
        _audit_scope(**audit, data={"status": result.status, "answer": "failed", "hits": len(result.hits)})
        raise
    sources = []
    for source in answer.sources:
        item: dict[str, Any] = {
            "source_id": source.source_id,
            "document_id": source.source_id,
            "title": source.title,
            "score": source.score,
        }
        chunks = best[source.source_id]
        label = chunks[0].source
        if label:
            item["source"] = label
        sources.append(item)
        # A cited source reaches the agent: its title and label, and its chunks through the answer
        # (already released: redacted values there are placeholders, which a second pass cannot see).
        tally.deliver(chunks[:1], SOURCE_FIELDS)
        tally.deliver(chunks, CONTENT_FIELDS)
    text = knowledge_text_release(answer.text, scope=scope)
    _audit_scope(
        **audit,
        data={
            "status": result.status,
            "mode": result.mode,
            "answer": answer.mode,
            "hits": len(result.hits),
            "sources": len(sources),
            **tally.audit(),
        },
    )
    return KnowledgeAnswer(text=text, sources=sources, data_policy=tally.summary)


# --------------------------------------------------------------------------------------------------
# Legacy inline delivery in turns
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InlineKnowledge:
    """``context.knowledge`` and ``context.knowledge_refs`` of a legacy turn, and the retrieval
    status for the turn's audit event (a failure leaves both arrays empty, never the turn)."""

    status: str
    knowledge: list[dict[str, Any]]
    refs: list[dict[str, Any]]


def knowledge_inline_build(*, scope: KnowledgeScope, query: str) -> InlineKnowledge:
    """Inline knowledge for a turn without ``knowledge_delivery`` (docs/protocol.md "Knowledge in turns").

    ``chunk`` mode: the route's ``top_k`` hits, each ``{ref: "knowledge:N", title ≤ 300,
    content ≤ 3000}``. ``doc`` mode: ``max(top_k, 8)`` hits deduplicated to parent documents by best
    chunk, the first ``max_docs``, each the whole current document ≤ 6000 units. ``knowledge_refs``
    pairs each item with ``{ref, doc_id, title, score}``. Cuts are UTF-16 units, never splitting a
    surrogate pair. A document that changed after the search is left out rather than replaced.
    """
    config = scope.config
    doc_mode = config["inject"] == "doc"
    limit = max(config["top_k"], INLINE_DOC_MIN_CANDIDATES) if doc_mode else config["top_k"]
    result = knowledge_retrieve(scope=scope, query=query, limit=limit)
    if result.status in ("disabled", "unavailable"):
        return InlineKnowledge(status=result.status, knowledge=[], refs=[])

    if doc_mode:
        try:
            picked = _inline_documents(scope=scope, result=result)
        except DatabaseError as exc:
            logger.warning("inline knowledge: document load failed (%s)", type(exc).__name__)
            return InlineKnowledge(status="unavailable", knowledge=[], refs=[])
        fields = TITLE_FIELDS
    else:
        picked = [(hit, cut_utf16(hit.content, INLINE_CHUNK_MAX_CHARS)[0]) for hit in result.hits]
        fields = INLINE_CHUNK_FIELDS
    tally = _tally.get()
    if tally is not None:
        tally.deliver([hit for hit, _ in picked], fields)

    knowledge: list[dict[str, Any]] = []
    refs: list[dict[str, Any]] = []
    for number, (hit, content) in enumerate(picked, start=1):
        ref = f"knowledge:{number}"
        title = cut_utf16(hit.title, INLINE_TITLE_MAX_CHARS)[0]
        knowledge.append({"ref": ref, "title": title, "content": content})
        refs.append(
            {"ref": ref, "doc_id": hit.document_id, "title": title, "score": round(hit.score, SCORE_DECIMALS)}
        )
    return InlineKnowledge(status=result.status, knowledge=knowledge, refs=refs)


def _inline_documents(*, scope: KnowledgeScope, result: SearchResult) -> list[tuple[Hit, str]]:
    """``doc`` mode: the best chunk's document for each of the first ``max_docs`` parent documents,
    with its whole current body (cut), read in a savepoint; a document whose revision moved since
    the search is skipped."""
    best: list[Hit] = []
    seen: set[int] = set()
    for hit in result.hits:
        if hit.document_id not in seen:
            seen.add(hit.document_id)
            best.append(hit)
    best = best[: scope.config["max_docs"]]
    if not best:
        return []
    with transaction.atomic():
        rows = Document.objects.filter(
            pk__in=[hit.document_id for hit in best],
            status=Document.Status.READY,
            kb_id__in=[kb.pk for kb in scope.bases],
        ).values_list("pk", "revision", "content")
        current = {pk: (revision, content) for pk, revision, content in rows}
    picked = []
    for hit in best:
        revision, content = current.get(hit.document_id, (None, ""))
        if revision == hit.revision:
            released = knowledge_text_release(content, scope=scope)
            picked.append((hit, cut_utf16(released, INLINE_DOC_MAX_CHARS)[0]))
    return picked
