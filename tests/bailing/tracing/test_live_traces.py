"""Traces through the shipped hub (the front before gunicorn) into a real OTLP/HTTP receiver.

The agent sends a W3C ``traceparent``; the hub's server span continues it, its own spans (auth, route
gate, catalog, rules, approval, journal, dispatch, audit) hang below it, and the Demo Shop receives a
``traceparent`` of the same trace whose parent is the hub's outbound client span. The same holds for an
MCP request carrying the trace context in ``params._meta``. No span carries the call's arguments, the
business answer, the agent's tokens or the provider's secret; query strings are never recorded. The
audit events and the JSON log lines of the call carry its trace id.
"""

from __future__ import annotations

import json
import secrets

import httpx
import pytest

from bailing.audit.models import AuditEvent
from tests.mcp_server.support import modern_headers, modern_message
from tests.support.demo_business import running_demo_business
from tests.support.invocations import INVOKE_URL, agent, invoke_body, provider_for, workspace
from tests.support.live_hub import live_hub
from tests.support.otlp import otlp_receiver

pytestmark = pytest.mark.django_db(transaction=True)

SERVER, CLIENT = 2, 3  # OTLP SpanKind values
HUB_SPANS = {"auth.bearer", "route.gate", "catalog", "rules", "approval.gate", "journal.commit", "dispatch"}
HUB_SPANS |= {"audit.append", "journal.outcome", "db.commit"}


@pytest.fixture(scope="module")
def receiver():
    with otlp_receiver() as running:
        yield running


@pytest.fixture(scope="module")
def shop():
    with running_demo_business() as running:
        yield running


@pytest.fixture(scope="module")
def hub(django_db_setup, tmp_path_factory, receiver):
    log_dir = tmp_path_factory.mktemp("tracing")
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": "hub-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "BAILING_LOG_FORMAT": "json",
        "GUNICORN_WORKERS": "1",
        "GUNICORN_THREADS": "2",
    }
    with live_hub(log_dir, env) as url:
        yield url, log_dir


def _ids() -> tuple[str, str]:
    return secrets.token_hex(16), secrets.token_hex(8)


def _children(spans, parent_id: str):
    return [span for span in spans if span.parent_id == parent_id]


def _descendants(spans, root_id: str) -> set[str]:
    found, frontier = set(), [root_id]
    while frontier:
        current = frontier.pop()
        for span in _children(spans, current):
            if span.span_id not in found:
                found.add(span.span_id)
                frontier.append(span.span_id)
    return found


def _one(spans, name: str):
    matching = [span for span in spans if span.name == name]
    assert len(matching) == 1, (name, [span.name for span in spans])
    return matching[0]


def _assert_nothing_leaks(spans, values: list[str]) -> None:
    for span in spans:
        for text in span.texts():
            for value in values:
                assert value not in text, (span.name, value)


def test_a_governed_call_is_one_trace_from_the_agent_to_the_business_system(hub, receiver, shop):
    url, log_dir = hub
    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    workspace(route_key="traced", provider="demo-shop", write_tools=["create_ticket"])
    session = agent(route_key="traced")
    secret_argument = "argvalue-" + secrets.token_hex(12)
    body = invoke_body(
        session, "traced", "create_ticket", {"subject": "Trace me", "message": secret_argument}
    )
    trace_id, agent_span = _ids()
    with httpx.Client(base_url=url, timeout=30) as client:
        response = client.post(
            INVOKE_URL + "?probe=querysecret-" + secret_argument[-6:],
            json=body,
            headers={
                "Authorization": f"Bearer {session._access}",
                "traceparent": f"00-{trace_id}-{agent_span}-01",
                "X-Request-Id": "req-traced-1",
            },
        )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["state"] == "executed", result
    answer = json.dumps(result, ensure_ascii=False)
    assert secret_argument in answer  # the shop echoes the ticket: the answer holds the value too

    spans = receiver.wait_for(
        lambda got: (
            {span.name for span in got if span.trace_id == trace_id} >= HUB_SPANS
            and {CLIENT, SERVER} <= {span.kind for span in got if span.trace_id == trace_id}
        )
    )
    traced = [span for span in spans if span.trace_id == trace_id]
    server = [span for span in traced if span.kind == SERVER]
    assert len(server) == 1
    server = server[0]
    assert server.parent_id == agent_span  # the agent's span is the parent
    assert server.resource["service.name"] == "hub-under-test"
    below = _descendants(traced, server.span_id)
    assert {span.span_id for span in traced} - {server.span_id} <= below  # one connected tree
    for name in HUB_SPANS:
        assert any(span.name == name for span in traced), name
    dispatch = _one(traced, "dispatch")
    assert dispatch.attributes["bailing.tool"] == "create_ticket"
    assert dispatch.attributes["bailing.outcome"] == "answered"
    outbound = [span for span in _children(traced, dispatch.span_id) if span.kind == CLIENT]
    assert len(outbound) == 1
    outbound = outbound[0]
    # Commits are spans of their own. The seal is not part of the request: the process's sealer
    # thread runs it after the outcome's commit, a trace of its own.
    assert not [span for span in traced if span.name == "audit.seal"]
    seals = receiver.wait_for(lambda got: any(span.name == "audit.seal" for span in got))
    assert all(not span.parent_id for span in seals if span.name == "audit.seal")  # a root span
    commits = [span for span in traced if span.name == "db.commit"]
    assert len(commits) >= 2  # the journal before the business call, the outcome after it
    # The database spans are there, with SQL and no parameter values.
    assert any(span.attributes.get("db.system") == "postgresql" for span in traced)

    # The Demo Shop received the trace: same trace id, parent = the hub's outbound span.
    traces = shop.client.get(shop.url("/_demo/records"), headers=_signed(shop)).json()["traces"]
    received = [entry for entry in traces if entry["traceparent"].split("-")[1] == trace_id]
    assert len(received) == 1, traces
    assert received[0]["traceparent"].split("-")[2] == outbound.span_id
    assert received[0]["path"] == "/tickets"

    # Nothing of the call's data, the agent's tokens or the provider's secret is in any span.
    _assert_nothing_leaks(
        spans, [secret_argument, session._access, session._client_token, shop.secret, "querysecret"]
    )
    assert all("?" not in str(value) for span in traced for value in span.attributes.values())

    # The audit events of the call carry the trace id (outside their hashed content) and request id.
    events = AuditEvent.objects.filter(request_id="req-traced-1")
    assert events.exists()
    assert {event.trace_id for event in events} == {trace_id}
    # The JSON access line links the request id to the trace.
    lines = [
        json.loads(line) for line in (log_dir / "hub.log").read_text().splitlines() if line.startswith("{")
    ]
    access = [
        line
        for line in lines
        if line.get("logger") == "bailing.access" and line.get("request_id") == "req-traced-1"
    ]
    assert len(access) == 1 and access[0]["trace_id"] == trace_id


def _signed(shop) -> dict[str, str]:
    from bailing import signing

    return signing.sign_tool_request(
        secret=shop.secret, method="GET", path_with_query="/_demo/records", body=b""
    )


def test_an_mcp_request_continues_the_trace_in_its_meta(hub, receiver, shop):
    url, _ = hub
    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    workspace(route_key="traced-mcp", provider="demo-shop", write_tools=["create_ticket"])
    session = agent(route_key="traced-mcp")
    trace_id, agent_span = _ids()
    header_trace, header_span = _ids()
    secret_argument = "mcparg-" + secrets.token_hex(12)
    message = modern_message(
        "tools/call",
        {"name": "create_ticket", "arguments": {"subject": "Over MCP", "message": secret_argument}},
        traceparent=f"00-{trace_id}-{agent_span}-01",
        tracestate="agent=1",
    )
    with httpx.Client(base_url=url, timeout=30) as client:
        response = client.post(
            "/mcp/traced-mcp",
            content=json.dumps(message),
            headers={
                **modern_headers(message),
                "Authorization": f"Bearer {session._access}",
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                # _meta wins over a header: the JSON-RPC request is the unit of the agent's work
                "traceparent": f"00-{header_trace}-{header_span}-01",
            },
        )
    assert response.status_code == 200, response.text
    assert secret_argument in response.text
    spans = receiver.wait_for(
        lambda got: (
            {"auth.bearer", "dispatch"} <= {s.name for s in got if s.trace_id == trace_id}
            and any(s.kind == SERVER and s.trace_id == trace_id for s in got)
        )
    )
    traced = [span for span in spans if span.trace_id == trace_id]
    server = [span for span in traced if span.kind == SERVER]
    assert len(server) == 1 and server[0].parent_id == agent_span
    assert not [span for span in spans if span.trace_id == header_trace]
    traces = shop.client.get(shop.url("/_demo/records"), headers=_signed(shop)).json()["traces"]
    received = [entry for entry in traces if entry["traceparent"].split("-")[1] == trace_id]
    assert len(received) == 1 and received[0]["tracestate"] == "agent=1"
    _assert_nothing_leaks(traced, [secret_argument, session._access, shop.secret])


def test_a_knowledge_search_traces_the_query_embedding_and_each_lane(hub, receiver):
    from tests.factories import AgentSessionFactory, KnowledgeBaseFactory, RouteFactory, knowledge_document

    url, _ = hub
    kb = KnowledgeBaseFactory(kb_id="traced-handbook")
    RouteFactory(route_key="traced-docs", knowledge={"kb_ids": [kb.kb_id]})
    knowledge_document(kb, "refunds", "Refund policy", "Refunds are paid back within fourteen days.")
    session = AgentSessionFactory(allowed_routes=["traced-docs"])
    marker = "querymarker" + secrets.token_hex(6)
    trace_id, agent_span = _ids()
    with httpx.Client(base_url=url, timeout=60) as client:
        response = client.post(
            "/agent-api/v1/workspaces/traced-docs/knowledge/search",
            json={"query": f"refund {marker}"},
            headers={
                "Authorization": f"Bearer {session._access}",
                "traceparent": f"00-{trace_id}-{agent_span}-01",
            },
        )
    assert response.status_code == 200, response.text
    assert response.json()["hints"]
    wanted = {"auth.bearer", "knowledge.search", "knowledge.query_embedding", "knowledge.embed"}
    wanted |= {"knowledge.lanes", "knowledge.lane.lexical", "knowledge.lane.vector"}
    spans = receiver.wait_for(
        lambda got: (
            wanted <= {s.name for s in got if s.trace_id == trace_id}
            and any(s.kind == SERVER and s.trace_id == trace_id for s in got)
        )
    )
    traced = [span for span in spans if span.trace_id == trace_id]
    server = _one(
        [span for span in traced if span.kind == SERVER], next(s.name for s in traced if s.kind == SERVER)
    )
    assert server.parent_id == agent_span
    assert {span.span_id for span in traced} - {server.span_id} <= _descendants(traced, server.span_id)
    search = _one(traced, "knowledge.search")
    embedding = _one(traced, "knowledge.query_embedding")
    lanes = _one(traced, "knowledge.lanes")
    assert embedding.parent_id == search.span_id and lanes.parent_id == search.span_id
    assert _one(traced, "knowledge.embed").parent_id == embedding.span_id
    assert _one(traced, "knowledge.embed").attributes["bailing.provider"] == "local"
    for lane in ("knowledge.lane.lexical", "knowledge.lane.vector"):
        recorded = _one(traced, lane)
        assert recorded.parent_id == lanes.span_id
        assert recorded.attributes["bailing.kb"] == "traced-handbook"
        assert recorded.attributes["bailing.candidates"] >= 1
    assert search.attributes["bailing.mode"] == "hybrid"
    # The lanes' statement is under the lanes span, its query text a parameter, never in the span.
    assert any(span.attributes.get("db.system") == "postgresql" for span in _children(traced, lanes.span_id))
    _assert_nothing_leaks(traced, [marker, session._access])
