"""Schemathesis over the agent API (and the agent's own Agent Auth read) with a real agent bearer.

In-process against the WSGI app: every operation under ``/agent-api/v1/`` gets schema-conforming
requests (the workspace pinned to a real one, so the calls pass the route gate) and requests that
break the schema, deterministic (``derandomize``), at least ``MIN_CASES`` in all. Every answer must
be no 5xx, a documented status, JSON where JSON is declared, and match the document's schema for its
status — the error envelope with a code the document lists for it included.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from bailing.wsgi import application
from tests.factories import AgentSessionFactory, RouteFactory, ToolProviderFactory

pytestmark = pytest.mark.django_db(transaction=False)

SPECS = Path(__file__).resolve().parents[2] / "agent_runtime" / "fixtures" / "specs"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
POSITIVE_EXAMPLES = 50
NEGATIVE_EXAMPLES = 25
MIN_CASES = 1000
# The agent's own session read; /agent-auth/v1/revoke would end the session the run uses.
EXTRA_OPERATIONS = {("GET", "/agent-auth/v1/session")}


@pytest.fixture
def wsgi_in_test_transaction():
    """The WSGI app called directly, as Django's test client does it: the request signals must not
    close the connection that holds the test's transaction."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield application
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def bearer():
    spec = json.loads((SPECS / "catalog_shop.json").read_text(encoding="utf-8"))
    ToolProviderFactory(name="shop", spec=spec)
    RouteFactory(
        route_key="orders",
        permission="readwrite",
        tools={"sources": [{"provider": "shop", "allow": ["*"]}], "agent_direct": {"enabled": True}},
        agent_client={"enabled": True},
    )
    return AgentSessionFactory(allowed_routes=["orders"])._access


def _agent_operations(schema):
    for result in schema.get_all_operations():
        operation = result.ok()
        key = (operation.method.upper(), operation.path)
        if operation.path.startswith("/agent-api/v1/") or key in EXTRA_OPERATIONS:
            yield operation


def test_agent_api_conforms_to_its_document(bearer, wsgi_in_test_transaction):
    schema = schemathesis.openapi.from_wsgi("/api/schema/", wsgi_in_test_transaction)
    headers = {"Authorization": f"Bearer {bearer}"}
    cases = 0
    failures: list[str] = []
    statuses: dict[tuple[str, int], int] = {}
    operations = list(_agent_operations(schema))
    assert len(operations) >= 15

    for operation in operations:
        pinned = {"route": "orders"} if any(p.name == "route" for p in operation.path_parameters) else None
        for mode, examples in (
            (GenerationMode.POSITIVE, POSITIVE_EXAMPLES),
            (GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES),
        ):
            strategy = operation.as_strategy(
                generation_mode=mode, path_parameters=pinned if mode is GenerationMode.POSITIVE else None
            )

            @settings(
                max_examples=examples,
                derandomize=True,
                database=None,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=strategy)
            def run(case):
                nonlocal cases
                cases += 1
                response = None
                try:
                    if mode is GenerationMode.POSITIVE and cases % 2:
                        # Every other valid case names the real workspace, to pass the route gate.
                        if isinstance(case.body, dict) and "route" in case.body:
                            case.body["route"] = "orders"
                        if case.query and "route" in case.query:
                            case.query["route"] = "orders"
                    response = case.call(headers=headers)
                    statuses[(operation.path, response.status_code)] = (
                        statuses.get((operation.path, response.status_code), 0) + 1
                    )
                    case.validate_response(response, checks=CHECKS, headers=headers)
                except (Exception, BaseExceptionGroup) as exc:  # collected: every operation still runs
                    failures.append(
                        f"{operation.method.upper()} {case.formatted_path} [{mode}] -> "
                        f"{getattr(response, 'status_code', None)} "
                        f"{getattr(response, 'content', b'')[:200]!r}: {type(exc).__name__}: "
                        f"{str(exc)[:300]}"
                    )

            run()

    print(f"schemathesis: {cases} cases, {len(failures)} failures, statuses {sorted(statuses.items())}")
    assert cases >= MIN_CASES
    assert not failures, f"{len(failures)} of {cases} cases failed:\n" + "\n".join(failures[:40])
