"""The knowledge scope's per-process cache: reused while the route and its bases are unchanged,
rebuilt on the next request after any change (through the ORM or raw SQL), with the revision an
uncached build gives. Observed through ``scope_cache.builds``, never timing."""

from __future__ import annotations

import pytest
from django.db import connection

from agent_runtime.identity import AgentIdentity, identity_load
from agent_runtime.models import Route
from agent_runtime.selectors.routes import route_for_identity
from agent_runtime.tokens import secret_hash
from knowledge.models import KnowledgeBase
from knowledge.selectors.scope import knowledge_scope, scope_cache
from tests.factories import AgentSessionFactory, KnowledgeBaseFactory, RouteFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def session():
    KnowledgeBaseFactory(kb_id="handbook", embedding_provider="none", embedding_model="", embedding_dim=0)
    RouteFactory(route_key="docs", knowledge={"kb_ids": ["handbook", "absent"]})
    return AgentSessionFactory(allowed_routes=["docs"])


def gated_scope(session):
    session_row, client, prefetch = identity_load(secret_hash(session._access), route_key="docs")
    identity = AgentIdentity(session=session_row, client=client, prefetch=prefetch)
    access = route_for_identity(identity=identity, route_key="docs")
    return knowledge_scope(route=access.route, effective=access.effective)


def uncached_revision() -> str:
    scope_cache.clear()
    return knowledge_scope(route=Route.objects.get(route_key="docs")).revision


def raw(sql: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql)


def set_knowledge(value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agent_runtime_route SET knowledge = %s::jsonb WHERE route_key = 'docs'", [value]
        )


def test_unchanged_scope_is_reused_without_a_query(session, django_assert_num_queries):
    first = gated_scope(session)
    builds = scope_cache.builds
    _, _, prefetch = identity_load(secret_hash(session._access), route_key="docs")
    route = prefetch.routes["docs"]
    with django_assert_num_queries(0):
        again = knowledge_scope(route=route)
    assert again is first
    assert scope_cache.builds == builds
    assert (first.missing, [kb.kb_id for kb in first.bases]) == (["absent"], ["handbook"])


def test_changes_by_orm_and_raw_sql_reach_the_next_request(session):
    revisions = [gated_scope(session).revision]
    KnowledgeBase.objects.filter(kb_id="handbook").update(enabled=False)
    scope = gated_scope(session)
    assert scope.disabled == ["handbook"]
    revisions.append(scope.revision)
    assert scope.revision == uncached_revision()

    raw("UPDATE knowledge_knowledgebase SET enabled = true WHERE kb_id = 'handbook'")
    scope = gated_scope(session)
    assert [kb.kb_id for kb in scope.bases] == ["handbook"]
    assert scope.revision == revisions[0] == uncached_revision()

    set_knowledge('{"kb_ids": ["handbook"], "top_k": 7}')
    scope = gated_scope(session)
    assert scope.missing == [] and scope.config["top_k"] == 7
    revisions.append(scope.revision)
    assert scope.revision == uncached_revision()

    # The missing base appears: the versions read with the route now name it.
    set_knowledge('{"kb_ids": ["handbook", "absent"]}')
    assert gated_scope(session).missing == ["absent"]
    KnowledgeBaseFactory(kb_id="absent", embedding_provider="none", embedding_model="", embedding_dim=0)
    scope = gated_scope(session)
    assert scope.missing == [] and [kb.kb_id for kb in scope.bases] == ["handbook", "absent"]
    revisions.append(scope.revision)
    assert scope.revision == uncached_revision()
    assert len(set(revisions)) == 4
