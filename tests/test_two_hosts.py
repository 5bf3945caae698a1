"""Two complete hubs on one PostgreSQL behave as one hub.

Two hubs run as shipped (``python -m front``: the front before gunicorn), each on its own port with
its own process tree, temporary folder and metrics folder, and one ``knowledge_worker`` runs beside
them, all on this test session's database and with one ``SECRET_KEY`` (what a deployment on several
hosts sets). They start once for the module; every test alternates its steps between host A and
host B, over real HTTP, and checks that nothing a host keeps in its own memory changes the outcome:

* an Agent Auth sign-in made on A is refreshed on B, and replaying the rotated refresh token on A
  revokes the session on both;
* a client's rate limit is one bucket for both hosts, not one per host;
* a write waiting for approval, made on A and approved in B's console (a real sign-in and form posts
  with CSRF), is sent to the business system once when resumed on A;
* a knowledge reference minted by a search on A is read on B;
* a configuration applied once (``bailing_apply``) is what both hosts serve at once;
* audit events appended by both hosts under concurrent load form one chain that
  ``approvals_audit_verify`` accepts;
* a write whose outcome is unknown on A (the answer dropped, or A's gunicorn worker killed while the
  business system holds the request) is never sent again through B;
* an MCP client signed in on A (registration, authorization, consent in A's console, code exchange)
  lists and calls tools on B, and a refresh on B gives a token that works on A.

Business writes are counted on the business side (the Demo Shop, the chaos business server).
"""

from __future__ import annotations

import itertools
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import psutil
import pytest
from django.conf import global_settings, settings
from django.core.management import call_command
from django.urls import reverse

from agent_client import pkce_pair
from agent_runtime.config import validate_route_config
from agent_runtime.models import AgentSession, ToolApproval, ToolCallJournal, ToolInvocation
from agent_runtime.services.config_apply import route_upsert
from bailing.audit.actor import Actor
from bailing.audit.models import AuditEvent
from bailing.roles import roles_sync
from knowledge.models import Document
from tests.agent_runtime.services.test_rate_limits import wait_for_a_fresh_minute
from tests.factories import ClientFactory, KnowledgeBaseFactory, UserFactory
from tests.mcp_server.support import modern_headers, modern_message
from tests.support.chaos_business import running_chaos_business
from tests.support.console import PASSWORD
from tests.support.demo_business import running_demo_business
from tests.support.invocations import (
    INVOKE_URL,
    agent,
    console_decision,
    invoke_body,
    new_invocation_id,
    provider_for,
    receipt_url,
    resume_url,
    workspace,
)
from tests.support.live_hub import knowledge_worker_running, live_hub

pytestmark = pytest.mark.django_db(transaction=True)

AGENT_AUTH = "/agent-auth/v1"
REDIRECT = "http://127.0.0.1:53682/callback"
DEADLINE = 60.0


# --- the two hosts and the knowledge worker -------------------------------------------------------------


def _host_env(folder: Path) -> dict[str, str]:
    """One host's own surroundings: its temporary and metrics folders, small gunicorn, shared key."""
    (folder / "tmp").mkdir()
    return {
        "TMPDIR": str(folder / "tmp"),
        "PROMETHEUS_MULTIPROC_DIR": str(folder / "metrics"),
        "GUNICORN_WORKERS": "1",
        "GUNICORN_THREADS": "4",
        "SECRET_KEY": settings.SECRET_KEY,
    }


class Hosts:
    """Host A and host B, each with its own HTTP client (its own connections and cookies)."""

    def __init__(self, a: str, b: str, worker: subprocess.Popen, logs: Path) -> None:
        self.urls = {"A": a, "B": b}
        self.worker = worker
        self.logs = logs
        self.a = httpx.Client(base_url=a, timeout=30, trust_env=False)
        self.b = httpx.Client(base_url=b, timeout=30, trust_env=False)

    def both(self) -> tuple[httpx.Client, httpx.Client]:
        return self.a, self.b

    def browser(self, host: str) -> httpx.Client:
        """A person's browser on ``host``: a client of its own, with its own cookies."""
        return httpx.Client(base_url=self.urls[host], timeout=30, trust_env=False)

    def wait_indexed(self, condition, what: str) -> None:
        """``wait_until`` for the knowledge worker's work, failing with its log if it exited."""

        def done() -> bool:
            if self.worker.poll() is not None:
                log = (self.logs / "knowledge-worker.log").read_text()[-3000:]
                raise AssertionError(f"the knowledge worker exited ({self.worker.returncode}):\n{log}")
            return condition()

        wait_until(done, what)

    def close(self) -> None:
        self.a.close()
        self.b.close()


@pytest.fixture(scope="module")
def hosts(django_db_setup, tmp_path_factory) -> Iterator[Hosts]:
    folder = tmp_path_factory.mktemp("two-hosts")
    (folder / "a").mkdir()
    (folder / "b").mkdir()
    with (
        live_hub(folder / "a", _host_env(folder / "a")) as a,
        live_hub(folder / "b", _host_env(folder / "b")) as b,
        knowledge_worker_running(
            folder / "knowledge-worker.log",
            args=("--batch", "3", "--idle-max", "0.2"),
            env={"SECRET_KEY": settings.SECRET_KEY},
        ) as worker,
    ):
        pair = Hosts(a, b, worker, folder)
        try:
            yield pair
        finally:
            pair.close()


# --- helpers --------------------------------------------------------------------------------------------


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wait_until(condition, what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def error_of(response: httpx.Response) -> str:
    return response.json()["error"]


# --- 1. Agent Auth across hosts -------------------------------------------------------------------------


def _agent_sign_in(host: httpx.Client, business_host: httpx.Client, business) -> dict:
    """Create the authorization on ``host``, approve it as the business on ``business_host``, exchange
    the code on ``host``: the token response."""
    verifier, challenge = pkce_pair()
    created = host.post(
        f"{AGENT_AUTH}/authorizations",
        json={
            "client_app_id": business.app_id,
            "redirect_uri": REDIRECT,
            "state": "state-two-hosts",
            "requested_routes": ["orders"],
            "device_label": "laptop",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        },
    )
    assert created.status_code == 201, created.text
    authorization_id = created.json()["authorization_id"]
    approved = business_host.post(
        f"{AGENT_AUTH}/authorizations/{authorization_id}/approve",
        json={
            "principal": {"id": "alice", "tenant": "t1", "roles": ["staff"]},
            "on_behalf_of": "t1:alice",
            "allowed_routes": ["orders"],
        },
        headers=bearer(business._token),
    )
    assert approved.status_code == 200, approved.text
    code = parse_qs(urlsplit(approved.json()["redirect_uri"]).query)["code"][0]
    tokens = host.post(
        f"{AGENT_AUTH}/token",
        json={
            "grant_type": "authorization_code",
            "client_app_id": business.app_id,
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
        },
    )
    assert tokens.status_code == 200, tokens.text
    return tokens.json()


def _refresh(host: httpx.Client, business, refresh_token: str) -> httpx.Response:
    return host.post(
        f"{AGENT_AUTH}/token",
        json={
            "grant_type": "refresh_token",
            "client_app_id": business.app_id,
            "refresh_token": refresh_token,
        },
    )


def test_a_session_signed_in_on_a_is_refreshed_on_b_and_a_replay_on_a_revokes_it_on_both(hosts):
    business = ClientFactory(
        app_id="shop-two-hosts",
        hub_consent=False,
        agent_authorize_url="https://business.example.com/agent/authorize",
        allowed_routes=["orders"],
    )
    first = _agent_sign_in(hosts.a, hosts.b, business)
    for host in hosts.both():
        assert host.get(f"{AGENT_AUTH}/session", headers=bearer(first["access_token"])).status_code == 200

    # Rotated on B: B hands out a new pair, and the first access token stops working on both hosts.
    rotated = _refresh(hosts.b, business, first["refresh_token"])
    assert rotated.status_code == 200, rotated.text
    second = rotated.json()
    assert second["session_id"] == first["session_id"]
    assert second["refresh_token"] != first["refresh_token"]
    for host in hosts.both():
        old = host.get(f"{AGENT_AUTH}/session", headers=bearer(first["access_token"]))
        assert (old.status_code, error_of(old)) == (401, "unauthorized")
        assert host.get(f"{AGENT_AUTH}/session", headers=bearer(second["access_token"])).status_code == 200

    # The first refresh token replayed on A: refused, and the whole session is revoked on both hosts.
    replay = _refresh(hosts.a, business, first["refresh_token"])
    assert (replay.status_code, error_of(replay)) == (400, "invalid_grant")
    for host in hosts.both():
        current = host.get(f"{AGENT_AUTH}/session", headers=bearer(second["access_token"]))
        assert (current.status_code, error_of(current)) == (401, "unauthorized")
    again = _refresh(hosts.b, business, second["refresh_token"])
    assert (again.status_code, error_of(again)) == (400, "invalid_grant")
    assert AgentSession.objects.get(pk=first["session_id"]).revoke_reason == "refresh_replay"


# --- 2. one rate limit bucket for both hosts ------------------------------------------------------------

LIMIT = 6


def test_a_clients_rate_limit_is_counted_across_both_hosts(hosts):

    writer = ClientFactory(rate_limit_per_min=LIMIT)
    kb = KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)
    kb.writers.add(writer)
    # The window is a fixed minute: every request below must fall in one.
    wait_for_a_fresh_minute()
    statuses = []
    for index in range(LIMIT):
        host = hosts.a if index % 2 == 0 else hosts.b
        statuses.append(host.get(f"/kb/{kb.kb_id}/docs", headers=bearer(writer._token)).status_code)
    assert statuses == [200] * LIMIT  # N in total, half on each host
    for host in (hosts.a, hosts.b):
        limited = host.get(f"/kb/{kb.kb_id}/docs", headers=bearer(writer._token))
        assert (limited.status_code, error_of(limited)) == (429, "rate_limited")
        assert 1 <= int(limited.headers["Retry-After"]) <= 60
    # Another client has its own bucket on both hosts.
    other = ClientFactory(rate_limit_per_min=LIMIT)
    kb.writers.add(other)
    for host in hosts.both():
        assert host.get(f"/kb/{kb.kb_id}/docs", headers=bearer(other._token)).status_code == 200


# --- 3. waits on A, approved in B's console, resumed on A: one write -----------------------------------

CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture
def shop():

    with running_demo_business() as business:
        yield business


def console_sign_in(host: httpx.Client, username: str, password: str) -> None:
    """As a person in a browser: the sign-in page (its CSRF cookie and form token), then the form post."""
    page = host.get("/console/login/")
    assert page.status_code == 200
    token = CSRF_INPUT.search(page.text).group(1)
    signed = host.post(
        "/console/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
        headers={"Referer": str(page.url)},
    )
    assert signed.status_code == 302, signed.text[-2000:]
    assert host.get("/console/").status_code == 200


def test_a_write_made_on_a_and_approved_in_bs_console_is_sent_once_when_resumed_on_a(hosts, shop, settings):

    # The approver's password is checked by host B, which hashes as shipped.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    roles_sync()
    UserFactory(username="april", roles=["approver"])
    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    workspace(
        route_key="shop",
        provider="demo-shop",
        write_tools=["request_refund"],
        force_approval=["request_refund"],
    )
    session = agent(route_key="shop", on_behalf_of="alice")
    body = invoke_body(
        session, "shop", "request_refund", {"order_id": "SO-1002", "amount": 650, "reason": "broken"}
    )

    waiting = hosts.a.post(INVOKE_URL, json=body, headers=bearer(session._access))
    assert waiting.status_code == 200, waiting.text
    assert waiting.json()["state"] == "awaiting_approval", waiting.json()
    approval = ToolApproval.objects.get(pk=waiting.json()["approval_id"])

    with hosts.browser("B") as browser:
        console_sign_in(browser, "april", PASSWORD)
        detail = browser.get(reverse("console:approval_detail", args=[approval.pk]))
        assert detail.status_code == 200
        decide = reverse("console:approval_decide", args=[approval.pk])
        confirm = browser.get(decide + "?decision=approved")
        assert confirm.status_code == 200
        token = CSRF_INPUT.search(confirm.text).group(1)
        form = {**console_decision(approval, "approved", comment="ok from B"), "csrfmiddlewaretoken": token}
        decided = browser.post(decide, data=form, headers={"Referer": str(confirm.url)})
    assert decided.status_code == 302, decided.text[-2000:]
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decision_source) == (
        "approved",
        "april",
        "console",
    )
    assert shop.records()["refunds"] == []  # deciding sends nothing

    resumed = hosts.a.post(resume_url(body["invocation_id"]), json={}, headers=bearer(session._access))
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["state"] == "executed", resumed.json()
    # Resumed again on either host, the call is replayed, never sent again.
    for host in (hosts.b, hosts.a):
        again = host.post(resume_url(body["invocation_id"]), json={}, headers=bearer(session._access))
        assert again.json()["state"] == "executed"
    refunds = [r for r in shop.records()["refunds"] if r["order_id"] == "SO-1002"]
    assert [(r["amount"], r["requested_by"]) for r in refunds] == [(650, "alice")]


# --- 4. a knowledge reference minted on A is read on B -------------------------------------------------

REFUNDS = "Refunds for damaged parcels are paid back to the original card within fourteen days."


def knowledge_url(route: str, action: str) -> str:
    return f"/agent-api/v1/workspaces/{route}/knowledge/{action}"


def test_a_knowledge_reference_minted_by_a_search_on_a_is_read_on_b(hosts):

    writer = ClientFactory(rate_limit_per_min=0)
    kb = KnowledgeBaseFactory(
        kb_id="handbook", embedding_provider="none", embedding_model="", embedding_dim=0
    )
    kb.writers.add(writer)

    data = validate_route_config(
        {
            "route_key": "docs",
            "name": "Docs",
            "permission": "readonly",
            "knowledge": {"kb_ids": ["handbook"]},
            "agent_client": {"enabled": True},
        },
        path="route",
    )
    route_upsert(data=data, actor=Actor.system("tests"))
    session = agent(route_key="docs")

    # Pushed through B, indexed by the knowledge worker, searched on A, read on B.
    pushed = hosts.b.put(
        "/kb/handbook/docs/refunds",
        json={"title": "Refund policy", "content": f"# Refunds\n\n{REFUNDS}"},
        headers=bearer(writer._token),
    )
    assert pushed.status_code == 200, pushed.text
    hosts.wait_indexed(
        lambda: Document.objects.filter(kb=kb, status=Document.Status.READY).exists(),
        "the knowledge worker to index the pushed document",
    )
    found = hosts.a.post(
        knowledge_url("docs", "search"),
        json={"query": "refund damaged parcels"},
        headers=bearer(session._access),
    )
    assert found.status_code == 200, found.text
    [hint] = found.json()["hints"]
    read = hosts.b.post(
        knowledge_url("docs", "read"), json={"ref": hint["ref"]}, headers=bearer(session._access)
    )
    assert read.status_code == 200, read.text
    document = read.json()
    assert (document["ref"], document["revision"], document["title"]) == (
        hint["ref"],
        hint["revision"],
        "Refund policy",
    )
    assert REFUNDS in document["content"]
    assert document["knowledge_scope_revision"] == found.json()["knowledge_scope_revision"]
    # The same reference on A reads the same bytes; a forged one is refused by both.
    assert (
        hosts.a.post(
            knowledge_url("docs", "read"), json={"ref": hint["ref"]}, headers=bearer(session._access)
        ).json()["content"]
        == document["content"]
    )
    forged = hint["ref"][:-2] + ("AA" if not hint["ref"].endswith("AA") else "BB")
    for host in hosts.both():
        refused = host.post(
            knowledge_url("docs", "read"), json={"ref": forged}, headers=bearer(session._access)
        )
        assert (refused.status_code, error_of(refused)) == (400, "knowledge_reference_invalid")


# --- 5. one config apply, served by both hosts at once -------------------------------------------------

DESK = """
routes:
  - route_key: desk
    name: Order desk
    permission: readwrite
    tools:
      sources:
        - provider: demo-shop
          allow: ["*"]
      agent_direct:
        enabled: true
        write_tools: {write_tools}
    knowledge:
      kb_ids: [{kb}]
    agent_client:
      enabled: true
"""


def test_a_config_applied_once_is_served_by_both_hosts_at_once(hosts, shop, tmp_path):

    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    for kb_id in ("kb-one", "kb-two"):
        KnowledgeBaseFactory(kb_id=kb_id, embedding_provider="none", embedding_model="", embedding_dim=0)

    def apply(write_tools: str, kb: str) -> None:
        path = tmp_path / "hub.yaml"
        path.write_text(DESK.format(write_tools=write_tools, kb=kb))
        call_command("bailing_apply", str(path), stdout=StringIO(), stderr=StringIO())

    def served(host: httpx.Client) -> tuple[str, set[str], str]:
        catalog = host.get("/agent-api/v1/tools", params={"route": "desk"}, headers=bearer(session._access))
        assert catalog.status_code == 200, catalog.text
        scope = host.get(knowledge_url("desk", "capabilities"), headers=bearer(session._access))
        assert scope.status_code == 200, scope.text
        body = catalog.json()
        return (
            body["capability_revision"],
            {tool["name"] for tool in body["tools"]},
            scope.json()["knowledge_scope_revision"],
        )

    apply("[request_refund, cancel_order]", "kb-one")
    session = agent(route_key="desk")
    # Both hosts build (and cache) the first catalog and scope.
    before = [served(host) for host in hosts.both()]
    assert before[0] == before[1]
    assert {"request_refund", "cancel_order"} <= before[0][1]

    apply("[request_refund]", "kb-two")
    after = [served(host) for host in (hosts.b, hosts.a)]
    assert after[0] == after[1], "the hosts serve different catalogs or scopes after one apply"
    revision, tools, scope = after[0]
    assert "cancel_order" not in tools and "request_refund" in tools
    assert revision != before[0][0] and scope != before[0][2]
    # A call under the old revision is refused by both hosts (409 capability_changed), and under the
    # new one the withdrawn write is not in the authorized set on either (404 tool_not_found).
    for host, capability_revision, answer in (
        (hosts.a, before[0][0], (409, "capability_changed")),
        (hosts.b, before[0][0], (409, "capability_changed")),
        (hosts.b, revision, (404, "tool_not_found")),
        (hosts.a, revision, (404, "tool_not_found")),
    ):
        stale = {
            "invocation_id": new_invocation_id(),
            "route": "desk",
            "tool": "cancel_order",
            "arguments": {"order_id": "SO-1004", "reason": "changed mind"},
            "capability_revision": capability_revision,
        }
        result = host.post(INVOKE_URL, json=stale, headers=bearer(session._access))
        assert (result.status_code, error_of(result)) == answer, result.text
    assert next(o for o in shop.records()["orders"] if o["order_id"] == "SO-1004")["status"] != "cancelled"


# --- 6. audit events appended by both hosts under load: one chain --------------------------------------

PUSHERS_PER_HOST = 2
PUSHES_EACH = 8


def test_audit_events_appended_by_both_hosts_under_load_form_one_chain(hosts):
    writer = ClientFactory(rate_limit_per_min=0)
    kb = KnowledgeBaseFactory(kb_id="load", embedding_provider="none", embedding_model="", embedding_dim=0)
    kb.writers.add(writer)
    barrier = threading.Barrier(2 * PUSHERS_PER_HOST)
    statuses: list[int] = []
    lock = threading.Lock()

    def push(host: str, pusher: int) -> None:
        with httpx.Client(base_url=hosts.urls[host], timeout=60, trust_env=False) as client:
            barrier.wait(timeout=30)
            for n in range(PUSHES_EACH):
                name = f"{host.lower()}-{pusher}-{n}"
                response = client.put(
                    f"/kb/load/docs/{name}",
                    json={
                        "title": f"Note {name}",
                        "content": f"# Note {name}\n\nReturns are checked on arrival.",
                    },
                    headers={**bearer(writer._token), "X-Request-Id": f"two-hosts-{name}"},
                )
                with lock:
                    statuses.append(response.status_code)

    threads = [
        threading.Thread(target=push, args=(host, pusher))
        for pusher in range(PUSHERS_PER_HOST)
        for host in ("A", "B")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DEADLINE)
    assert not any(thread.is_alive() for thread in threads), "a pusher did not finish"
    total = 2 * PUSHERS_PER_HOST * PUSHES_EACH
    assert statuses == [200] * total
    # The knowledge worker indexes them meanwhile (and audits that too): wait until it is done.
    hosts.wait_indexed(
        lambda: Document.objects.filter(kb=kb, status=Document.Status.READY).count() == total,
        "the knowledge worker to index every pushed document",
    )

    # Each host appended its own share, each event once.
    created = AuditEvent.objects.filter(
        action="knowledge.document.created", request_id__startswith="two-hosts-"
    )
    by_host = sorted(request_id.split("-")[2] for request_id in created.values_list("request_id", flat=True))
    assert by_host == ["a"] * (total // 2) + ["b"] * (total // 2)

    out, err = StringIO(), StringIO()
    call_command("approvals_audit_verify", stdout=out, stderr=err)
    assert out.getvalue().startswith("audit chain ok: "), out.getvalue()
    assert err.getvalue() == ""
    # No fork: one dense sequence, every link's predecessor is the event before it.
    chain = list(AuditEvent.objects.order_by("chain_seq").values_list("chain_seq", "prev_hash", "chain_hash"))
    sealed = [link for link in chain if link[0] is not None]
    seqs = [seq for seq, _, _ in sealed]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "the chain has gaps"
    for (_, _, previous), (_, prev_hash, _) in itertools.pairwise(sealed):
        assert prev_hash == previous, "two events claim the same predecessor"
    assert len(sealed) >= total


# --- 7. an outcome unknown on A is never sent again through B -------------------------------------------

CHAOS_WRITES = ["chaos_ok", "chaos_drop_after_write", "chaos_slow_ok"]


@pytest.fixture
def chaos():
    with running_chaos_business() as business:
        provider_for(name="chaos", base_url=business.base_url, secret=business.secret)
        workspace(route_key="chaos", provider="chaos", write_tools=CHAOS_WRITES)
        yield business


def _never_sent_again_through_b(hosts: Hosts, session, body: dict, reason: str) -> None:
    """On B (and then A again): the same invocation, its resume and its receipt all say the outcome is
    unknown; nothing is dispatched."""
    for host in (hosts.b, hosts.b, hosts.a, hosts.b):
        again = host.post(INVOKE_URL, json=body, headers=bearer(session._access))
        assert again.json()["state"] == "reconciliation_required", again.text
        resumed = host.post(resume_url(body["invocation_id"]), json={}, headers=bearer(session._access))
        assert resumed.json()["state"] == "reconciliation_required", resumed.text
    receipt = hosts.b.get(receipt_url(body["invocation_id"]), headers=bearer(session._access)).json()
    assert (receipt["dispatch_state"], receipt["journal_state"]) == ("attempted", "uncertain")
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.reason_code == reason
    assert invocation.journal.state == ToolCallJournal.State.UNCERTAIN


def test_a_write_whose_answer_was_lost_on_a_is_never_sent_again_through_b(hosts, chaos):
    session = agent(route_key="chaos")
    body = invoke_body(session, "chaos", "chaos_drop_after_write", {"note": "lost on A"})
    first = hosts.a.post(INVOKE_URL, json=body, headers=bearer(session._access))
    assert first.status_code == 200, first.text
    result = first.json()
    assert (result["state"], result["ok"], result["auto_retry_allowed"]) == (
        "reconciliation_required",
        False,
        False,
    )
    _never_sent_again_through_b(hosts, session, body, "connection_lost")
    assert (chaos.calls("chaos_drop_after_write"), chaos.writes("chaos_drop_after_write")) == (1, 1)


def _gunicorn_worker_of(url: str) -> psutil.Process:
    """The one gunicorn worker behind the host at ``url`` (front → gunicorn master → worker)."""
    port = url.rsplit(":", 1)[1]
    [front] = [
        process
        for process in psutil.Process().children(recursive=True)
        if process.cmdline()[1:3] == ["-m", "front"]
        and process.environ().get("BAILING_BIND", "").endswith(port)
    ]
    [master] = front.children()
    [worker] = master.children()
    return worker


def test_a_write_in_flight_when_as_worker_is_killed_is_never_sent_again_through_b(hosts, chaos):
    session = agent(route_key="chaos")
    # Held by the business until released (at most this long): the dispatch is in flight meanwhile.
    body = invoke_body(session, "chaos", "chaos_slow_ok", {"delay_ms": 30_000, "note": "killed on A"})
    outcome: dict = {}

    def call() -> None:
        try:
            with httpx.Client(base_url=hosts.urls["A"], timeout=60, trust_env=False) as client:
                outcome["response"] = client.post(INVOKE_URL, json=body, headers=bearer(session._access))
        except httpx.HTTPError as exc:
            outcome["error"] = type(exc).__name__

    def resume_on_b() -> dict:
        return hosts.b.post(
            resume_url(body["invocation_id"]), json={}, headers=bearer(session._access)
        ).json()

    worker = _gunicorn_worker_of(hosts.urls["A"])
    chaos.hold_slow_calls()
    caller = threading.Thread(target=call)
    caller.start()
    try:
        wait_until(lambda: chaos.calls("chaos_slow_ok") == 1, "the business request to arrive from A")
        assert ToolInvocation.objects.get(invocation_id=body["invocation_id"]).status == "dispatching"
        # While A's worker is alive and waiting on the business, B neither sends it nor calls it lost.
        busy = resume_on_b()
        assert (busy["state"], busy["auto_retry_allowed"]) == ("in_progress", True), busy
        worker.send_signal(signal.SIGKILL)
        caller.join(timeout=DEADLINE)
        assert not caller.is_alive()
    finally:
        chaos.release_slow_calls()  # the business performs the write; host A never learns it
    assert "response" not in outcome or outcome["response"].status_code >= 500, outcome
    wait_until(lambda: chaos.writes("chaos_slow_ok") == 1, "the business to finish the write")

    # Once PostgreSQL has ended the dead worker's connection (and its lock), B finds the attempt
    # abandoned: an unknown outcome, never a new dispatch.
    answers: list[str] = []
    wait_until(
        lambda: answers.append(resume_on_b()["state"]) or answers[-1] != "in_progress",
        "B to find the dead worker's attempt abandoned",
    )
    assert (
        set(answers) <= {"in_progress", "reconciliation_required"}
        and answers[-1] == "reconciliation_required"
    )
    # A, with its new worker, says the same.
    wait_until(lambda: hosts.a.get("/health").status_code == 200, "host A's new worker")
    _never_sent_again_through_b(hosts, session, body, "worker_lost")
    assert (chaos.calls("chaos_slow_ok"), chaos.writes("chaos_slow_ok")) == (1, 1)


# --- 8. an MCP sign-in on A, MCP tool calls on B --------------------------------------------------------

MCP_REDIRECT = "http://127.0.0.1:33418/callback"


def mcp_call(host: httpx.Client, route: str, token: str, method: str, params: dict | None = None):
    message = modern_message(method, params)
    return host.post(
        f"/mcp/{route}",
        json=message,
        headers={**modern_headers(message), **bearer(token), "Accept": "application/json, text/event-stream"},
    )


def test_an_mcp_client_signed_in_on_a_calls_tools_on_b(hosts, shop, settings):
    # alice, a customer of the Demo Shop, signs in on host A, which checks passwords with the shipped hashers.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    roles_sync()
    UserFactory(username="alice", roles=["administrator"])
    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    workspace(route_key="mcp-desk", provider="demo-shop", write_tools=["create_ticket"])
    ClientFactory(app_id="mcp-agent", hub_consent=True, mcp_sign_in=True, allowed_routes=["mcp-desk"])
    # Both hosts answer under one public URL (what a load balancer in front of them is).
    public = settings.BAILING_PUBLIC_URL
    resource = f"{public}/mcp/mcp-desk"

    # The sign-in, all on A: registration, authorization, consent in the console, code exchange.
    registered = hosts.a.post(
        "/oauth/register", json={"redirect_uris": [MCP_REDIRECT], "client_name": "Claude"}
    )
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    verifier, challenge = pkce_pair()
    with hosts.browser("A") as browser:
        authorize = browser.get(
            "/oauth/authorize",
            params={
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": MCP_REDIRECT,
                "state": "state-0123456789",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "resource": resource,
                "scope": "knowledge:read tools:call",
            },
        )
        assert authorize.status_code == 302, authorize.text
        consent_url = urlsplit(authorize.headers["Location"])
        assert (
            f"{consent_url.scheme}://{consent_url.netloc}{consent_url.path}" == f"{public}/console/consent/"
        )
        console_sign_in(browser, "alice", PASSWORD)
        consent = browser.get(f"{consent_url.path}?{consent_url.query}")
        assert consent.status_code == 200, consent.text[-2000:]
        authorization_id = parse_qs(consent_url.query)["authorization_id"][0]
        approved = browser.post(
            consent_url.path,
            data={
                "csrfmiddlewaretoken": CSRF_INPUT.search(consent.text).group(1),
                "authorization_id": authorization_id,
                "routes": "mcp-desk",
                "decision": "approve",
            },
            headers={"Referer": str(consent.url)},
        )
    assert approved.status_code == 302, approved.text[-2000:]
    callback = urlsplit(approved.headers["Location"])
    assert f"{callback.scheme}://{callback.netloc}{callback.path}" == MCP_REDIRECT
    code = parse_qs(callback.query)["code"][0]
    exchanged = hosts.a.post(
        "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": MCP_REDIRECT,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": resource,
        },
    )
    assert exchanged.status_code == 200, exchanged.text
    tokens = exchanged.json()

    # The tools, on B: the list the scopes cover, then a business write through call_tool, once.
    listed = mcp_call(hosts.b, "mcp-desk", tokens["access_token"], "tools/list")
    assert listed.status_code == 200, listed.text
    names = {tool["name"] for tool in listed.json()["result"]["tools"]}
    assert {"search_knowledge", "find_tools", "call_tool", "create_ticket"} <= names
    invocation_id = new_invocation_id()
    arguments = {
        "name": "create_ticket",
        "arguments": {"subject": "From B", "message": "signed in on A"},
        "invocation_id": invocation_id,
    }
    for host in (hosts.b, hosts.a):  # the retry on A is a replay of B's call
        called = mcp_call(
            host,
            "mcp-desk",
            tokens["access_token"],
            "tools/call",
            {"name": "call_tool", "arguments": arguments},
        )
        assert called.status_code == 200, called.text
        result = called.json()["result"]
        assert result["structuredContent"]["invocation_id"] == invocation_id
        assert result["structuredContent"]["state"] == "executed", result
    assert [t["subject"] for t in shop.records()["tickets"]] == ["From B"]

    # Refreshed on B, the new token works on A and the old one on neither.
    refreshed = hosts.b.post(
        "/oauth/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": client_id,
            "resource": resource,
        },
    )
    assert refreshed.status_code == 200, refreshed.text
    new = refreshed.json()
    assert mcp_call(hosts.a, "mcp-desk", new["access_token"], "tools/list").status_code == 200
    for host in hosts.both():
        assert mcp_call(host, "mcp-desk", tokens["access_token"], "tools/list").status_code == 401
