"""Agent Client Runtime turns and run completion (docs/protocol.md "Turn idempotency", "Run completion").

A turn freezes what the hub tells a local agent for one user message — instructions, memory,
governance, knowledge status and the active tool set — into a run; a completion records the agent's
visible answer on that run. Both are idempotent on client-chosen keys and race-safe in the database:

* Turn key = (session, route, conversation, client_turn_id), plus (session, route, user_message_id).
  Request hash = canonical SHA-256 of ``{schema, route, **input}`` (``knowledge_delivery`` included).
  The same key with the same ``user_message_id`` and hash replays the frozen context byte for byte,
  whatever changed on the route since; anything else under either key is 409 ``turn_conflict``.
* Completion fingerprint = canonical SHA-256 of ``{schema, assistant_message_id, status, content,
  model, runtime, usage}``; identical replay ⇒ 200 with ``idempotent_replay: true``, anything else
  ⇒ 409 ``run_completion_conflict``; an assistant message id already used by another run of the same
  session and route ⇒ 409 ``assistant_message_conflict``.

Concurrency: a turn writes in one transaction of three statements before its audit event, none in
a savepoint. The conversation is upserted with ``INSERT … ON CONFLICT DO NOTHING`` in the statement
that also reads its memory (none for a conversation this statement created); the run is inserted
with its final values, and the user message with it, by ``INSERT … ON CONFLICT DO NOTHING`` on the
run's unique keys. A concurrent first request blocks on the unique index until the winner commits,
then inserts nothing and re-reads the committed row, so N identical requests create one run and
return one body. Memory is read before the current user message is appended, in the same
transaction. Everything that needs no row of this turn — knowledge retrieval, the catalog (built
once), the profile and the active tools — is computed before the transaction opens. Completion locks
the run row (``select_for_update``), re-reads it and only then writes; the audit chain lock is taken
last (rows → audit chain).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.db.models.constants import OnConflict
from django.db.models.sql import InsertQuery
from django.utils import timezone

from agent_runtime import errors
from agent_runtime.budgets import PAGE_CONTEXT_MAX_BYTES, TURN_BODY_MAX_BYTES
from agent_runtime.identity import AgentIdentity
from agent_runtime.memory import memory_recent
from agent_runtime.models import AgentConversation, AgentRun, Route, VisibleMessage
from agent_runtime.ports import turn_knowledge
from agent_runtime.selectors import catalog as catalog_service
from agent_runtime.selectors.routes import route_for_identity
from agent_runtime.selectors.runs import run_get_for_session, run_id_parse
from agent_runtime.selectors.workspaces import workspace_profile
from bailing.api.hashing import canonical_sha256
from bailing.api.limits import compact_json_utf8_bytes, cut_utf16
from bailing.api.timefmt import utc_iso
from bailing.audit.ledger import audit_record

TURN_SCHEMA = "bailing.agent-turn-context.v1"
COMPLETION_SCHEMA = "bailing.agent-run-completion.v1"
TASK_CONTROL_CAPABILITIES_SCHEMA = "bailing.agent-task-control-capabilities.v1"

# Raw JSON body budget of ``turns`` and ``complete`` (spec: 512 KiB), and of page_context (16 KiB).
RUNTIME_BODY_MAX_BYTES = TURN_BODY_MAX_BYTES
# Each page hint is bounded before it prefixes the ranking query, as BailingHub does
# (docs/protocol.md "Page context").
_PAGE_HINT_KEYS = ("title", "page_name", "page_key", "url")
_PAGE_HINT_MAX_CHARS = 500
_HINT_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _body_bytes(body: dict[str, Any]) -> str:
    """The exact response text, serialised once; replays return these characters unchanged."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _hint(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    text, _ = cut_utf16(_HINT_CONTROL.sub(" ", value).strip(), _PAGE_HINT_MAX_CHARS)
    return text


def turn_query(data: dict[str, Any]) -> str:
    """The ranking query of a turn: page hints (title, page_name, page_key, url), then the input."""
    page = data.get("page_context") or {}
    hint = " ".join(text for text in (_hint(page.get(key)) for key in _PAGE_HINT_KEYS) if text)
    return f"{hint}\n{data['user_input']}" if hint else data["user_input"]


def _turn_knowledge_query(effective: dict[str, Any], data: dict[str, Any]) -> str:
    """What the turn's knowledge is searched for: the turn query (page hints first) when the route's
    ``page_boost`` is on, else the user input alone."""
    return turn_query(data) if effective["knowledge"]["page_boost"] else data["user_input"]


def _turn_lookup(*, identity: AgentIdentity, route: Route, data: dict[str, Any]) -> list[AgentRun]:
    """Every visible run holding either idempotency key of this turn (at most two)."""
    return list(
        AgentRun.objects.filter(session_id=identity.session.pk, route_id=route.pk)
        .filter(
            Q(
                conversation__client_conversation_id=data["client_conversation_id"],
                client_turn_id=data["client_turn_id"],
            )
            | Q(user_message_id=data["user_message_id"])
        )
        .exclude(status=AgentRun.Status.PREPARING)
        .only("run_id", "client_id", "client_turn_id", "user_message_id", "request_hash", "context_body")[:2]
    )


def _turn_replay(runs: list[AgentRun], *, identity: AgentIdentity, data: dict[str, Any], request_hash: str):
    """The frozen body of the run these keys name, or 409 when the keys are bound elsewhere."""
    for run in runs:
        if (
            run.client_id == identity.client.pk
            and run.client_turn_id == data["client_turn_id"]
            and run.user_message_id == data["user_message_id"]
            and run.request_hash == request_hash
        ):
            return run.context_body
    raise errors.TurnConflict()


def _insert_ignoring_conflicts(obj) -> tuple[str, list[Any]]:
    """``INSERT … ON CONFLICT DO NOTHING`` of every concrete field of ``obj``, compiled by Django (so
    defaults, ``auto_now`` and the database preparation of each value are the ORM's own)."""
    query = InsertQuery(type(obj), on_conflict=OnConflict.IGNORE)
    query.insert_values(type(obj)._meta.concrete_fields, [obj])
    [(sql, params)] = query.get_compiler(connection=connection).as_sql()
    return sql, list(params)


# The conversation upsert and its memory in one statement. ``inserted`` holds the row when this
# statement created it (then there is no memory to read); otherwise the second branch finds the row
# that already existed when the statement started. A conversation committed by a concurrent first
# turn after that is in neither (the insert waited for it, then did nothing, and the snapshot is older):
# no row comes back and the statement is simply run again.
_CONVERSATION_SQL = """
WITH inserted AS ({insert} RETURNING id),
conversation AS (
    SELECT id, true AS created FROM inserted
    UNION ALL
    SELECT id, false FROM agent_runtime_agentconversation
    WHERE session_id = %s AND route_id = %s AND client_conversation_id = %s
)
SELECT c.id, c.created, m.direction, m.content, m.created_at
FROM conversation c
LEFT JOIN LATERAL (
    SELECT v.id, v.direction, v.content, v.created_at FROM agent_runtime_visiblemessage v
    WHERE v.conversation_id = c.id AND NOT c.created
    ORDER BY v.created_at DESC, v.id DESC
    LIMIT %s
) m ON true
ORDER BY m.created_at DESC, m.id DESC
"""


def _conversation_with_memory(
    *, identity: AgentIdentity, route: Route, key: str, memory_cfg: dict[str, Any]
) -> tuple[uuid.UUID, list[dict[str, Any]]]:
    """The conversation ``key`` of this session and route (created if new) and its memory."""
    conversation = AgentConversation(
        session_id=identity.session.pk,
        client_id=identity.client.pk,
        route_id=route.pk,
        client_conversation_id=key,
    )
    insert, params = _insert_ignoring_conflicts(conversation)
    sql = _CONVERSATION_SQL.format(insert=insert)
    params += [identity.session.pk, route.pk, key, memory_cfg["recent_messages"]]
    rows: list[tuple] = []
    with connection.cursor() as cursor:
        while not rows:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
    conversation_id = rows[0][0]
    # A conversation without (readable) messages comes back as one row without a message.
    messages = [(direction, content, at) for _, _, direction, content, at in rows if direction is not None]
    recent = memory_recent(
        messages,
        per_message_chars=memory_cfg["per_message_chars"],
        recent_budget_chars=memory_cfg["recent_budget_chars"],
    )
    return conversation_id, recent


# The run with its final values and the user message it freezes, in one statement: when either
# unique key of the turn is taken, nothing is inserted and nothing is returned.
_RUN_SQL = """
WITH run AS ({insert} RETURNING run_id)
INSERT INTO agent_runtime_visiblemessage
    (conversation_id, run_id, direction, external_message_id, content, created_at)
SELECT %s, run_id, %s, %s, %s, %s FROM run
RETURNING run_id
"""


def _run_insert(run: AgentRun, *, now) -> bool:
    """Insert ``run`` and its user message; False when a committed run holds either turn key."""
    insert, params = _insert_ignoring_conflicts(run)
    params += [run.conversation_id, VisibleMessage.Direction.IN, run.user_message_id, run.user_input, now]
    with connection.cursor() as cursor:
        cursor.execute(_RUN_SQL.format(insert=insert), params)
        return cursor.fetchone() is not None


def _active_tools(catalog: catalog_service.Catalog, query: str) -> list[dict[str, Any]]:
    """At most ``active_tool_limit`` tools of the authorized catalog, ranked for the turn.

    Same ordering as capability search (semantic when every source ranks semantically, else the
    deterministic lexical order), so a turn and a search by its run agree.
    """
    limit = catalog.active_limit
    ordered = catalog_service.catalog_rank(catalog=catalog, query=query, limit=limit)
    return [tool.public() for tool in ordered[:limit]]


def turn_prepare(*, identity: AgentIdentity, route_key: str, data: dict[str, Any]) -> str:
    """Prepare (or replay) the turn ``data`` of ``identity`` in workspace ``route_key``.

    ``data`` is the validated turn input (the view's serializer). Returns the exact JSON text of the
    ``bailing.agent-turn-context.v1`` body. Raises the route gate's errors, 413
    ``page_context_too_large`` and 409 ``turn_conflict``.
    """
    access = route_for_identity(identity=identity, route_key=route_key)
    route, effective = access.route, access.effective
    page_bytes = compact_json_utf8_bytes(data.get("page_context", {}))
    if page_bytes > PAGE_CONTEXT_MAX_BYTES:
        raise errors.PageContextTooLarge(max_bytes=PAGE_CONTEXT_MAX_BYTES, actual_bytes=page_bytes)
    request_hash = canonical_sha256({"schema": TURN_SCHEMA, "route": route.route_key, **data})

    existing = _turn_lookup(identity=identity, route=route, data=data)
    if existing:
        return _turn_replay(existing, identity=identity, data=data, request_hash=request_hash)

    # Before the transaction: retrieval may embed the query (network), and holds no row lock; the
    # catalog (built once, for the profile and the active tools) and the ranking need no row either.
    knowledge = turn_knowledge().prepare(
        access=access,
        query=_turn_knowledge_query(effective, data),
        delivery=data.get("knowledge_delivery"),
    )
    catalog = catalog_service.route_catalog(route=route, identity=identity, effective=effective)
    profile = workspace_profile(route, identity=identity, effective=effective, catalog=catalog)
    active_tools = _active_tools(catalog, turn_query(data))
    run_id = uuid.uuid4()
    delivered = knowledge.render(identity=identity, run_id=run_id)

    with transaction.atomic():
        # Memory first: the current user message is appended only after it has been read.
        conversation_id, recent = _conversation_with_memory(
            identity=identity, route=route, key=data["client_conversation_id"], memory_cfg=effective["memory"]
        )
        context: dict[str, Any] = {
            "instructions": profile["profile"]["instructions"],
            "page_context": data.get("page_context", {}),
            "renderers": data.get("renderers", []),
            "memory": {"summary": None, "recent": recent},
            "memory_refs": [
                {"thread_id": str(conversation_id), "summary_upto_id": 0, "prior_messages": len(recent)}
            ],
            "knowledge": delivered.knowledge,
            "knowledge_refs": delivered.knowledge_refs,
            "governance": profile["profile"]["governance"],
        }
        if delivered.delivery is not None:
            context["knowledge_delivery"] = delivered.delivery
        body = _body_bytes(
            {
                "schema_version": TURN_SCHEMA,
                "run_id": str(run_id),
                "profile_revision": profile["profile"]["revision"],
                "capability_revision": catalog.revision,
                "context": context,
                "active_tools": active_tools,
            }
        )
        now = timezone.now()
        run = AgentRun(
            run_id=run_id,
            session_id=identity.session.pk,
            client_id=identity.client.pk,
            route_id=route.pk,
            conversation_id=conversation_id,
            client_turn_id=data["client_turn_id"],
            user_message_id=data["user_message_id"],
            request_hash=request_hash,
            user_input=data["user_input"],
            knowledge_delivery=data.get("knowledge_delivery", ""),
            status=AgentRun.Status.CONTEXT_READY,
            context_body=body,
            profile_revision=profile["profile"]["revision"],
            capability_revision=catalog.revision,
            created_at=now,
            context_ready_at=now,
        )
        if not _run_insert(run, now=now):
            # The winner of a concurrent first request has committed: replay it or conflict.
            existing = _turn_lookup(identity=identity, route=route, data=data)
            return _turn_replay(existing, identity=identity, data=data, request_hash=request_hash)
        audit_record(
            action="agent_runtime.turn.context_ready",
            actor=identity.actor,
            route_key=route.route_key,
            target_type="agent_run",
            target_id=str(run_id),
            data={
                "run_id": str(run_id),
                "thread_id": str(conversation_id),
                "prior_messages": len(recent),
                "active_tools": len(active_tools),
                "authorized_tools": catalog.authorized_total,
                "knowledge_delivery": data.get("knowledge_delivery"),
                "knowledge": delivered.audit,
            },
        )
    return body


# --- completion -----------------------------------------------------------------------------------------
def _completion_hash(data: dict[str, Any]) -> str:
    return canonical_sha256(
        {
            "schema": COMPLETION_SCHEMA,
            "assistant_message_id": data["assistant_message_id"],
            "status": data["status"],
            "content": data["content"],
            "model": data.get("model"),
            "runtime": data.get("runtime"),
            "usage": data.get("usage"),
        }
    )


def _completion_body(run: AgentRun, *, replay: bool) -> dict[str, Any]:
    """Rebuilt from the immutable completion columns, so a replay equals the first answer except
    for ``idempotent_replay``."""
    return {
        "schema_version": COMPLETION_SCHEMA,
        "run_id": str(run.run_id),
        "assistant_message_id": run.assistant_message_id,
        "status": run.status,
        "idempotent_replay": replay,
        "completed_at": utc_iso(run.completed_at),
    }


def _completion_replay(run: AgentRun, completion_hash: str) -> dict[str, Any]:
    if run.completion_hash != completion_hash:
        raise errors.RunCompletionConflict()
    return _completion_body(run, replay=True)


def run_complete(*, identity: AgentIdentity, run_id: str, data: dict[str, Any]) -> dict[str, Any]:
    """Record the agent's final visible answer on run ``run_id`` (``bailing.agent-run-completion.v1``).

    ``data`` is the validated completion input. The run must belong to the caller's session and
    client (else 404 ``run_not_found``) and have a frozen context. The route gate is not rerun (nor
    is it in BailingHub): completing only records what the agent already showed its user, in the
    session's own conversation, and a disabled route must not leave a run unfinishable
    (docs/protocol.md "Run completion").
    """
    parsed_id = run_id_parse(run_id)
    completion_hash = _completion_hash(data)
    run = run_get_for_session(identity=identity, run_id=parsed_id)
    if run is None:
        raise errors.RunNotFound()
    if run.completion_hash:
        return _completion_replay(run, completion_hash)

    with transaction.atomic():
        run = AgentRun.objects.select_for_update(of=("self",)).select_related("route").get(pk=run.pk)
        if run.completion_hash:
            # A concurrent completion committed while this request waited for the lock.
            return _completion_replay(run, completion_hash)
        taken = (
            AgentRun.objects.filter(
                session_id=run.session_id,
                route_id=run.route_id,
                assistant_message_id=data["assistant_message_id"],
            )
            .exclude(pk=run.pk)
            .exists()
        )
        if taken:
            raise errors.AssistantMessageConflict()
        now = timezone.now()
        run.assistant_message_id = data["assistant_message_id"]
        run.completion_hash = completion_hash
        run.status = data["status"]
        run.final_content = data["content"]
        run.model = data.get("model")
        run.runtime = data.get("runtime")
        run.usage = data.get("usage")
        run.completed_at = now
        try:
            with transaction.atomic():
                run.save(
                    update_fields=[
                        "assistant_message_id",
                        "completion_hash",
                        "status",
                        "final_content",
                        "model",
                        "runtime",
                        "usage",
                        "completed_at",
                        "updated_at",
                    ]
                )
        except IntegrityError:
            # Another run of this session and route took the id between the check and the write.
            raise errors.AssistantMessageConflict() from None
        VisibleMessage.objects.create(
            conversation_id=run.conversation_id,
            run=run,
            direction=VisibleMessage.Direction.OUT,
            external_message_id=run.assistant_message_id,
            content=run.final_content,
            created_at=now,
        )
        usage = data.get("usage") or {}
        audit_record(
            action="agent_runtime.run.completed",
            actor=identity.actor,
            route_key=run.route.route_key,
            target_type="agent_run",
            target_id=str(run.run_id),
            data={
                "run_id": str(run.run_id),
                "status": run.status,
                "assistant_message_id": run.assistant_message_id,
                "model": run.model,
                "runtime": run.runtime,
                "usage": {key: usage[key] for key in sorted(usage)},
            },
        )
    return _completion_body(run, replay=False)


def task_control_capabilities() -> dict[str, Any]:
    """``bailing.agent-task-control-capabilities.v1`` of a hub without task control.

    BailingHub's full shape with ``supported: false``; turns refuse ``task_binding`` with 400
    ``task_control_unsupported`` instead of ignoring it (docs/protocol.md "Task control").
    """
    return {
        "schema_version": TASK_CONTROL_CAPABILITIES_SCHEMA,
        "supported": False,
        "mode": "optional",
        "task_schema": "bailing.agent-task.v1",
        "metering": "write_invocation",
        "same_hub_only": True,
        "controls": ["pause", "resume", "cancel"],
        "inspect_invocation": False,
    }
