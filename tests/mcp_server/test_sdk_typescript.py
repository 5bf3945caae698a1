"""The official MCP TypeScript SDK against the live hub, run with the machine's Node.js from the
lock file tests/mcp_server/ts_client/package-lock.json, in both of its generations:

- 1.x (npm ``@modelcontextprotocol/sdk``, ts_client/client.mjs) speaks the ``initialize`` handshake
  (2025-11-25), where the hub offers no tasks: a refund waiting for approval is followed with
  ``resume_invocation`` polls;
- 2.x (npm ``@modelcontextprotocol/client``) with the tasks extension's own client (npm
  ``@modelcontextprotocol/ext-tasks``, ts_client/tasks.mjs) speaks 2026-07-28: the refund is a task
  that the extension's session polls with ``tasks/get`` until it has completed.

Each knows only the endpoint URL and signs in by dynamic client registration (the SDK's OAuth
client), the consent approved by a hub user in headless Chromium; lists the tools, searches and asks
the handbook, asks for the refund; the approver approves it (the decision service, as the console
does), and the Demo Shop has recorded exactly one refund. The clients print one JSON line per step;
the assertions are on those, on the hub's records and on the Demo Shop's."""

from __future__ import annotations

import json
import re

import pytest

from agent_runtime.models import AgentSession, OAuthClient, ToolApproval, ToolInvocation
from bailing.audit.models import AuditEvent
from tests.factories import ClientFactory, UserFactory
from tests.mcp_server.conftest import ROUTE
from tests.support.console import PASSWORD
from tests.support.demo_business import running_demo_business
from tests.support.invocations import approve
from tests.support.ts_client import installed_client, node_version, running_client

STEP_TIMEOUT = 60
REFUND = {"order_id": "SO-1002", "amount": 650, "reason": "Jug arrived broken"}


@pytest.fixture
def demo_shop():
    """A Demo Shop of each test's own (the package's is per module): both tests refund the one
    delivered order of alice's that is large enough to need approval, which has room for one."""
    with running_demo_business() as shop:
        yield shop


@pytest.fixture(scope="module")
def ts_client():
    """The client's folder, installed from its lock file (once per lock file, see tests/support)."""
    return installed_client()


def _approve_consent(page, url: str, username: str) -> None:
    """What the person does in the browser the client would open: sign in, approve the client."""
    page.goto(url)
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.locator("section.consent").wait_for()
    page.get_by_role("button", name="Approve").click()
    # The hub redirects to the client's own loopback server, which answers this page.
    page.get_by_text("The TypeScript MCP client is signed in").wait_for()


def _sign_in_client():
    return ClientFactory(
        app_id="mcp-agent", name="MCP agent", hub_consent=True, mcp_sign_in=True, allowed_routes=[ROUTE]
    )


def _assert_signed_in_by_registration(run, hub, url: str) -> AgentSession:
    """Dynamic registration (never a Client ID Metadata Document, though the hub supports them), the
    hub's authorize endpoint with PKCE and this endpoint as the resource; the redirect names the hub
    as issuer (RFC 9207), as the hub's metadata says it does (the client checks it); the session is
    alice's, on this one endpoint, with the three scopes asked for."""
    assert run.step("start")["node"] == node_version()
    authorize = run.step("authorize")["url"]
    assert authorize.startswith(f"{hub.url}/oauth/authorize?")
    resource = url.replace(":", "%3A").replace("/", "%2F")
    assert re.search(r"[?&]resource=" + re.escape(resource) + "(&|$)", authorize)
    assert "code_challenge_method=S256" in authorize
    assert run.step("redirected") == {
        "step": "redirected",
        "has_code": True,
        "iss": hub.url,
        "iss_required": True,
    }
    token = run.step("token")
    assert token["token_type"].lower() == "bearer" and token["refresh"] is True
    assert token["scope"] == "knowledge:read tools:read tools:call"
    client_id = run.step("registered")["client_id"]
    assert not client_id.startswith("https://")
    session = AgentSession.objects.get(oauth_client=OAuthClient.objects.get(client_id=client_id))
    assert session.on_behalf_of == "alice" and session.allowed_routes == [ROUTE]
    assert session.scopes == ["knowledge:read", "tools:read", "tools:call"] and session.resource == url
    assert AuditEvent.objects.filter(action="agent_auth.oauth_client.registered").count() == 1
    return session


def _assert_knowledge(run) -> None:
    names = run.step("tools")["names"]
    assert names[:2] == ["search_knowledge", "ask_knowledge"]
    assert {"call_tool", "resume_invocation", "request_refund"} <= set(names)
    search = run.step("search_knowledge")
    assert search["is_error"] is False and search["count"] >= 1
    assert all(document_id.startswith("demo-handbook:") for document_id in search["document_ids"])
    ask = run.step("ask_knowledge")
    assert ask["is_error"] is False and ask["sources"] >= 1 and ask["cites"] is True


def _assert_one_refund(demo_shop, refunds_before: int, approval: ToolApproval) -> None:
    approval.refresh_from_db()
    assert approval.args == REFUND
    assert approval.status == "approved" and approval.consumed_at is not None
    refunds = demo_shop.records()["refunds"]
    assert len(refunds) == refunds_before + 1
    (refund,) = refunds[refunds_before:]
    assert refund["order_id"] == REFUND["order_id"] and refund["reason"] == REFUND["reason"]
    assert refund["requested_by"] == "alice"


@pytest.mark.django_db(transaction=True)
@pytest.mark.browser
def test_the_typescript_sdk_1_signs_in_by_registration_and_resumes_a_refund_after_approval(
    hub, demo_shop, ts_client, browser_page, console_roles
):
    _sign_in_client()
    alice = UserFactory(username="alice", roles=["administrator"])
    url = f"{hub.url}/mcp/{ROUTE}"
    refunds_before = len(demo_shop.records()["refunds"])
    args = ["--url", url, "--refund", json.dumps(REFUND), "--timeout", str(STEP_TIMEOUT)]

    with running_client(ts_client, "client.mjs", *args) as run:
        authorize = run.until("authorize", STEP_TIMEOUT)
        _approve_consent(browser_page, authorize["url"], alice.username)
        waiting = run.until("request_refund", STEP_TIMEOUT)
        # The client polls resume_invocation; at least one poll sees the approval still pending.
        run.until("resume_waiting", STEP_TIMEOUT)
        assert len(demo_shop.records()["refunds"]) == refunds_before
        approve(waiting["approval_id"])
        run.until("done", STEP_TIMEOUT)
        assert run.process.wait(timeout=10) == 0, "".join(run.stderr)

    session = _assert_signed_in_by_registration(run, hub, url)
    assert run.step("connected")["protocol_version"] == "2025-11-25"
    _assert_knowledge(run)
    # The refund: waited for approval, then executed by a resume poll, exactly once.
    assert waiting["is_error"] is False and waiting["state"] == "awaiting_approval"
    approval = ToolApproval.objects.get(pk=waiting["approval_id"])
    assert ToolInvocation.objects.get(pk=approval.invocation_id).session_id == session.pk
    done = run.step("resume_invocation")
    assert done["is_error"] is False and done["state"] == "executed" and done["polls"] >= 2
    assert done["structured"]["business_status"] == 201 and done["structured"]["tool"] == "request_refund"
    assert done["structured"]["invocation_id"] == waiting["invocation_id"]
    # Asking again answers the recorded outcome.
    again = run.step("resume_again")
    assert again["is_error"] is False and again["structured"] == done["structured"]
    _assert_one_refund(demo_shop, refunds_before, approval)
    assert run.seen[-1]["step"] == "done"


@pytest.mark.django_db(transaction=True)
@pytest.mark.browser
def test_the_typescript_sdk_2_with_ext_tasks_takes_a_refund_through_approval_as_a_task(
    hub, demo_shop, ts_client, browser_page, console_roles
):
    _sign_in_client()
    alice = UserFactory(username="alice", roles=["administrator"])
    url = f"{hub.url}/mcp/{ROUTE}"
    refunds_before = len(demo_shop.records()["refunds"])
    args = ["--url", url, "--refund", json.dumps(REFUND), "--timeout", str(STEP_TIMEOUT)]

    with running_client(ts_client, "tasks.mjs", *args) as run:
        authorize = run.until("authorize", STEP_TIMEOUT)
        _approve_consent(browser_page, authorize["url"], alice.username)
        created = run.until("request_refund", STEP_TIMEOUT)
        # The first status the session reports is the created task's: working, naming the approval.
        working = run.until("task", STEP_TIMEOUT)
        assert working["status"] == "working", working
        approval_id = int(re.search(r"#(\d+)", working["status_message"]).group(1))
        assert len(demo_shop.records()["refunds"]) == refunds_before
        approve(approval_id)
        run.until("done", STEP_TIMEOUT)
        assert run.process.wait(timeout=10) == 0, "".join(run.stderr)

    session = _assert_signed_in_by_registration(run, hub, url)
    connected = run.step("connected")
    assert connected == {
        "step": "connected",
        "protocol_version": "2026-07-28",
        "era": "modern",
        "tasks_extension": {},
    }
    _assert_knowledge(run)
    # tools/call answered with a task (the extension declared in that request's _meta), then the
    # extension's own polling of tasks/get at the hinted interval until the task completed.
    assert created["kind"] == "task"
    approval = ToolApproval.objects.get(pk=approval_id)
    invocation = ToolInvocation.objects.get(pk=approval.invocation_id)
    assert str(invocation.job_id) == created["task_id"] and invocation.session_id == session.pk
    assert working["task_id"] == created["task_id"] and working["poll_interval_ms"] == 5000
    dispatched = [
        (d["method"], d["http_status"], d["result_type"], d["status"])
        for d in run.seen
        if d["step"] == "dispatch"
    ]
    assert dispatched[0] == ("tools/call", 200, "task", "working")
    assert dispatched[-1] == ("tasks/get", 200, "complete", "completed")
    assert {entry[0] for entry in dispatched} == {"tools/call", "tasks/get"}
    statuses = [event["status"] for event in run.seen if event["step"] == "task"]
    assert statuses[0] == "working" and statuses[-1] == "completed"
    outcome = run.step("task_outcome")
    assert outcome["status"] == "completed" and outcome["is_error"] is False
    assert outcome["structured"]["state"] == "executed" and outcome["structured"]["business_status"] == 201
    _assert_one_refund(demo_shop, refunds_before, approval)
    assert run.seen[-1]["step"] == "done"


def test_without_npm_the_typescript_sdk_test_fails_with_the_command_to_run(monkeypatch, tmp_path):
    """Node.js and npm missing is a failure naming scripts/ensure-node, never a skip."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match=r"node is not on PATH.*scripts/ensure-node"):
        installed_client()
