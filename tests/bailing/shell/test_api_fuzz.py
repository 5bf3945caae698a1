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
from tests.factories import (
    AgentSessionFactory,
    ClientFactory,
    KnowledgeBaseFactory,
    RouteFactory,
    ToolProviderFactory,
)

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


def _run(schema, operations, headers, *, pinned: dict[str, str], body_pins: dict[str, object]):
    """Valid and invalid cases for every operation; returns (cases, failures, statuses)."""
    state = {"cases": 0}
    failures: list[str] = []
    statuses: dict[tuple[str, int], int] = {}

    def run_operation(operation, mode, examples):
        names = {p.name for p in operation.path_parameters}
        path_pins = {name: value for name, value in pinned.items() if name in names} or None
        strategy = operation.as_strategy(
            generation_mode=mode, path_parameters=path_pins if mode is GenerationMode.POSITIVE else None
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
            state["cases"] += 1
            response = None
            try:
                if mode is GenerationMode.POSITIVE and state["cases"] % 2:
                    # Every other valid case names real objects, to get past the first checks.
                    for name, value in body_pins.items():
                        if isinstance(case.body, dict) and name in case.body:
                            case.body[name] = value
                        if case.query and name in case.query:
                            case.query[name] = value
                response = case.call(headers=headers)
                key = (f"{operation.method.upper()} {operation.path}", response.status_code)
                statuses[key] = statuses.get(key, 0) + 1
                case.validate_response(response, checks=CHECKS, headers=headers)
            except (Exception, BaseExceptionGroup) as exc:  # collected: every operation still runs
                failures.append(
                    f"{operation.method.upper()} {case.formatted_path} [{mode}] -> "
                    f"{getattr(response, 'status_code', None)} "
                    f"{getattr(response, 'content', b'')[:200]!r}: {type(exc).__name__}: "
                    f"{str(exc)[:300]}"
                )

        run()

    for operation in operations:
        run_operation(operation, GenerationMode.POSITIVE, POSITIVE_EXAMPLES)
        run_operation(operation, GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES)
    return state["cases"], failures, statuses


def _report(name: str, cases: int, failures: list[str], statuses: dict) -> None:
    print(
        f"schemathesis ({name}): {cases} cases, {len(failures)} failures, statuses {sorted(statuses.items())}"
    )


def test_agent_api_conforms_to_its_document(bearer, wsgi_in_test_transaction):
    schema = schemathesis.openapi.from_wsgi("/api/schema/", wsgi_in_test_transaction)
    operations = list(_agent_operations(schema))
    assert len(operations) >= 15
    cases, failures, statuses = _run(
        schema,
        operations,
        {"Authorization": f"Bearer {bearer}"},
        pinned={"route": "orders"},
        body_pins={"route": "orders"},
    )
    print(
        f"schemathesis (agent): {cases} cases, {len(failures)} failures, statuses {sorted(statuses.items())}"
    )
    assert cases >= MIN_CASES
    assert not failures, f"{len(failures)} of {cases} cases failed:\n" + "\n".join(failures[:40])


def test_business_apis_conform_to_their_document(wsgi_in_test_transaction):
    """The Client Token surfaces (Agent Auth's business endpoints, the push API, the approval
    decision) and the two unauthenticated sign-in steps, with a real writer client."""
    client = ClientFactory(app_id="shop-backend", rate_limit_per_min=1_000_000)
    kb = KnowledgeBaseFactory(kb_id="handbook", embedding_provider="none")
    kb.writers.add(client)
    schema = schemathesis.openapi.from_wsgi("/api/schema/", wsgi_in_test_transaction)
    operations = [
        op
        for op in (result.ok() for result in schema.get_all_operations())
        if op.path.startswith(("/agent-auth/v1/", "/kb/", "/approvals/"))
        and (op.method.upper(), op.path) not in EXTRA_OPERATIONS
        and op.path != "/agent-auth/v1/revoke"
    ]
    assert len(operations) >= 12
    cases, failures, statuses = _run(
        schema,
        operations,
        {"Authorization": f"Bearer {client._token}"},
        pinned={"kb_id": "handbook"},
        body_pins={"client_app_id": "shop-backend", "redirect_uri": "http://127.0.0.1:8765/callback"},
    )
    _report("business", cases, failures, statuses)
    assert cases >= 12 * (POSITIVE_EXAMPLES + NEGATIVE_EXAMPLES)
    assert not failures, f"{len(failures)} of {cases} cases failed:\n" + "\n".join(failures[:40])
