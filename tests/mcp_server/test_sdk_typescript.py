"""The official MCP TypeScript SDK (npm ``@modelcontextprotocol/sdk``, pinned by
tests/mcp_server/ts_client/package-lock.json) against the live hub, run with the machine's Node.js:
it knows only the endpoint URL and signs in by dynamic client registration (the SDK's OAuth client),
the consent approved by a hub user in headless Chromium; lists the tools, searches and asks the
handbook, and asks for a refund that waits for approval. The approver approves it (the decision
service, as the console does); the client's ``resume_invocation`` polls then see it ``executed``, and
the Demo Shop has recorded exactly one refund. SDK 1.x speaks the ``initialize`` handshake
(2025-11-25), where the hub offers no tasks, so ``resume_invocation`` is how it learns the outcome."""

from __future__ import annotations

import json
import re

import pytest

from agent_runtime.models import AgentSession, OAuthClient, ToolApproval, ToolInvocation
from bailing.audit.models import AuditEvent
from tests.factories import ClientFactory, UserFactory
from tests.mcp_server.conftest import ROUTE
from tests.support.console import PASSWORD
from tests.support.invocations import approve
from tests.support.ts_client import installed_client, node_version, running_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
STEP_TIMEOUT = 60
REFUND = {"order_id": "SO-1002", "amount": 650, "reason": "Jug arrived broken"}


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


def test_the_typescript_sdk_signs_in_by_registration_and_takes_a_refund_through_approval(
    hub, demo_shop, ts_client, browser_page, console_roles
):
    ClientFactory(
        app_id="mcp-agent", name="MCP agent", hub_consent=True, mcp_sign_in=True, allowed_routes=[ROUTE]
    )
    alice = UserFactory(username="alice", roles=["administrator"])
    url = f"{hub.url}/mcp/{ROUTE}"
    refunds_before = len(demo_shop.records()["refunds"])
    args = ["--url", url, "--refund", json.dumps(REFUND), "--timeout", str(STEP_TIMEOUT)]

    with running_client(ts_client, *args) as run:
        authorize = run.until("authorize", STEP_TIMEOUT)
        _approve_consent(browser_page, authorize["url"], alice.username)
        waiting = run.until("request_refund", STEP_TIMEOUT)
        # The client polls resume_invocation; at least one poll sees the approval still pending.
        run.until("resume_waiting", STEP_TIMEOUT)
        assert len(demo_shop.records()["refunds"]) == refunds_before
        approve(waiting["approval_id"])
        run.until("done", STEP_TIMEOUT)
        assert run.process.wait(timeout=10) == 0, "".join(run.stderr)

    start = run.step("start")
    assert start["node"] == node_version()
    # Sign-in: dynamic registration (no Client ID Metadata Document), the hub's authorize endpoint with
    # this endpoint as the resource; the redirect names the hub as issuer (RFC 9207) wherever the
    # hub's metadata says it does (the client refuses a redirect without it then).
    registered = run.step("registered")
    assert authorize["url"].startswith(f"{hub.url}/oauth/authorize?")
    resource = url.replace(":", "%3A").replace("/", "%2F")
    assert re.search(r"[?&]resource=" + re.escape(resource) + "(&|$)", authorize["url"])
    assert "code_challenge_method=S256" in authorize["url"]
    redirected = run.step("redirected")
    assert redirected["has_code"] is True
    assert redirected["iss"] == (hub.url if redirected["iss_required"] else None)
    token = run.step("token")
    assert token["token_type"].lower() == "bearer" and token["refresh"] is True
    assert token["scope"] == "knowledge:read tools:read tools:call"
    registration = OAuthClient.objects.get(client_id=registered["client_id"])
    assert not registered["client_id"].startswith("https://")
    session = AgentSession.objects.get(oauth_client=registration)
    assert session.on_behalf_of == "alice" and session.allowed_routes == [ROUTE]
    assert session.scopes == ["knowledge:read", "tools:read", "tools:call"] and session.resource == url
    assert AuditEvent.objects.filter(action="agent_auth.oauth_client.registered").count() == 1

    # The SDK 1.x handshake era; the tools as the hub lists them.
    assert run.step("connected")["protocol_version"] == "2025-11-25"
    names = run.step("tools")["names"]
    assert names[:2] == ["search_knowledge", "ask_knowledge"]
    assert {"call_tool", "resume_invocation", "request_refund"} <= set(names)

    search = run.step("search_knowledge")
    assert search["is_error"] is False and search["count"] >= 1
    assert all(document_id.startswith("demo-handbook:") for document_id in search["document_ids"])
    ask = run.step("ask_knowledge")
    assert ask["is_error"] is False and ask["sources"] >= 1 and ask["cites"] is True

    # The refund: waited for approval, then executed by a resume poll, exactly once.
    assert waiting["is_error"] is False and waiting["state"] == "awaiting_approval"
    approval = ToolApproval.objects.get(pk=waiting["approval_id"])
    invocation = ToolInvocation.objects.get(pk=approval.invocation_id)
    assert approval.args == REFUND and invocation.session_id == session.pk
    done = run.step("resume_invocation")
    assert done["is_error"] is False and done["state"] == "executed" and done["polls"] >= 2
    assert done["structured"]["business_status"] == 201 and done["structured"]["tool"] == "request_refund"
    assert done["structured"]["invocation_id"] == waiting["invocation_id"]
    again = run.step("resume_again")
    assert again["is_error"] is False and again["structured"] == done["structured"]
    approval.refresh_from_db()
    assert approval.status == "approved" and approval.consumed_at is not None
    refunds = demo_shop.records()["refunds"]
    assert len(refunds) == refunds_before + 1
    (refund,) = [r for r in refunds[refunds_before:] if r["order_id"] == REFUND["order_id"]]
    assert refund["reason"] == REFUND["reason"] and refund["requested_by"] == "alice"
    assert [event["step"] for event in run.seen][-1] == "done"
