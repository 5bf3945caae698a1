"""The whole hub-consent sign-in, driven through real headless Chromium against the live server.

An administrator signs in to the console; the reference agent starts a login for a hub-consent
client; the browser opens the authorization URL the hub returned, approves, and lands on the
agent's loopback listener; the agent exchanges the code. The administrator then finds the session,
revokes it, sees the agent's access token rejected, and reads the three milestones in the audit
history. Every console page visited is saved under var/screenshots/ for a human look.
"""

from __future__ import annotations

import re

import pytest
from django.db import transaction
from django.urls import reverse

from agent_client import AgentAuthError, ReferenceAgentClient
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from tests.factories import ClientFactory, RouteFactory
from tests.support.console import PASSWORD

LOOPBACK = re.compile(r"^http://127\.0\.0\.1:\d+/callback\?")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_hub_consent_sign_in_then_admin_revoke(
    hub_server, administrator, no_role_user, browser_page, screenshot
):
    RouteFactory(
        route_key="orders",
        name="Order desk",
        target_config={"system_prompt": "You help with orders.", "api_key": "sk-never-shown"},
    )
    ClientFactory(
        app_id="desktop-agent",
        name="Desktop Agent",
        description="Agents on operator desktops",
        allowed_routes=["orders"],
    )
    for n in range(55):  # older history, so the audit list has a second page
        with transaction.atomic():
            audit_record(action="tests.console.seeded", actor=Actor.system(f"seed-{n}"))
    page = browser_page
    base = hub_server.url

    # An administrator signs in (anonymous visitors land on the login page).
    page.goto(base + reverse("console:dashboard"))
    assert page.url.startswith(base + reverse("console:login"))
    screenshot(page, "01-login")
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:dashboard"))
    assert page.get_by_role("heading", name="Dashboard").is_visible()
    assert page.locator(".stat", has_text="Clients").locator(".stat-value").inner_text() == "1"
    screenshot(page, "02-dashboard")

    agent = ReferenceAgentClient(base, "desktop-agent", ["orders"], device_label="Ada's workstation")
    try:
        # The agent starts its login; the hub points it at its own consent page.
        authorization_url = agent.start_login()
        assert authorization_url.startswith(base + reverse("console:consent") + "?authorization_id=")

        page.goto(authorization_url)
        consent = page.locator("section.consent")
        assert "Desktop Agent" in consent.inner_text()
        assert "Ada's workstation" in consent.inner_text()
        assert page.locator('input[name="routes"][value="orders"]').is_checked()
        assert administrator.username in consent.inner_text()
        screenshot(page, "03-consent")

        page.get_by_role("button", name="Approve").click()
        page.wait_for_url(LOOPBACK)
        params = agent.wait_for_redirect()
        assert set(params) == {"code", "state"}
        tokens = agent.exchange()
        assert agent.session_info()["session_id"] == tokens["session_id"]

        # The consent page cannot be used twice.
        page.goto(authorization_url)
        assert page.locator(".problem .status").inner_text().startswith("409")
        screenshot(page, "04-consent-already-decided")

        # The administrator finds the new session and revokes it.
        page.goto(base + reverse("console:session_list") + "?state=active")
        row = page.locator("table.data tbody tr", has_text="Ada's workstation")
        assert row.count() == 1
        assert "active" in row.inner_text()
        screenshot(page, "05-sessions")
        row.locator("a").first.click()
        page.wait_for_url(base + reverse("console:session_detail", args=[tokens["session_id"]]))
        assert administrator.username in page.locator("dl.facts").inner_text()
        screenshot(page, "06-session-detail")
        page.get_by_role("link", name="Revoke session…").click()
        page.wait_for_url(base + reverse("console:session_revoke", args=[tokens["session_id"]]))
        assert "loses access at once" in page.locator("main").inner_text()
        page.get_by_role("button", name="Revoke session").click()
        page.wait_for_url(base + reverse("console:session_detail", args=[tokens["session_id"]]))
        assert page.locator(".page-head .badge").inner_text() == "revoked"
        screenshot(page, "07-session-revoked")

        # The hub's own answer to the bearer, without the client's refresh-and-retry.
        with pytest.raises(AgentAuthError) as denied:
            agent.session_info(agent.access_token)
        assert (denied.value.status, denied.value.code) == (401, "unauthorized")
    finally:
        agent.close()

    # The audit history shows the three milestones (and the administrator's sign-in).
    page.goto(base + reverse("console:audit_list"))
    actions = page.locator("table.data tbody").inner_text()
    for action in [
        "agent_auth.authorization.approved",
        "agent_auth.token.issued",
        "agent_auth.session.revoked",
    ]:
        assert action in actions
    assert page.locator(".pagination").inner_text().startswith("60 total")
    screenshot(page, "08-audit")
    page.goto(base + reverse("console:audit_list") + "?action=agent_auth.session")
    assert page.locator("table.data tbody tr").count() == 1
    page.locator("table.data tbody tr a").first.click()
    assert "agent_auth.session.revoked" in page.locator("dl.facts").inner_text()
    screenshot(page, "09-audit-detail")
    page.goto(base + reverse("console:audit_verify"))
    assert page.locator(".verdict .badge").inner_text() == "intact"
    screenshot(page, "10-audit-verify")

    # The rest of the console, for a look (no secrets on the workspace page).
    page.goto(base + reverse("console:client_list"))
    screenshot(page, "11-clients")
    page.get_by_role("link", name="desktop-agent").click()
    screenshot(page, "12-client-detail")
    page.get_by_role("link", name="Rotate token…").click()
    page.get_by_role("button", name="Rotate token").click()
    token = page.get_by_label("Client Token").input_value()
    assert token.startswith("bct_")
    screenshot(page, "13-client-token")
    page.goto(base + reverse("console:client_create"))
    page.get_by_label("App ID").fill("Not Valid")
    page.get_by_label("Name").fill("Broken")
    page.get_by_role("button", name="Create client").click()
    assert page.locator(".has-error").count() >= 1
    screenshot(page, "14-client-create-error")
    page.goto(base + reverse("console:workspace_list"))
    screenshot(page, "15-workspaces")
    page.goto(base + reverse("console:workspace_detail", args=["orders"]))
    assert "sk-never-shown" not in page.content()
    page.locator("details.raw-config summary").click()  # the raw configuration starts collapsed
    assert "You help with orders." in page.locator("pre.json").inner_text()
    screenshot(page, "16-workspace-detail")

    # Sign out by POST; the console is closed again.
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(re.escape(base + reverse("console:login"))))
    page.goto(base + reverse("console:session_list"))
    assert page.url.startswith(base + reverse("console:login"))

    # A signed-in user without a role sees no figures and gets 403 pages.
    page.get_by_label("Username").fill(no_role_user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:session_list"))
    assert page.locator(".problem .status").inner_text() == "403"
    screenshot(page, "17-forbidden")
    page.goto(base + reverse("console:dashboard"))
    assert page.locator(".stat").count() == 0
    screenshot(page, "18-dashboard-no-role")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_browser_enforces_the_content_security_policy(hub_server, chromium):
    """Chromium applies the console's policy: the stylesheet loads, an injected inline script does not
    run, and the refusal is reported (which is what makes every other browser test fail on a page
    that needs more than the policy allows)."""
    from tests.support.console import csp_violations

    context = chromium.new_context()
    try:
        page = context.new_page()
        violations = csp_violations(page)
        page.goto(hub_server.url + reverse("console:login"))
        assert page.evaluate("getComputedStyle(document.body).fontFamily").startswith("system-ui")
        assert violations == []
        page.evaluate(
            "() => { const s = document.createElement('script'); s.textContent = 'window.injected = 1';"
            " document.body.appendChild(s); }"
        )
        page.wait_for_timeout(200)
        assert page.evaluate("window.injected") is None
        assert any("script-src" in text for text in violations), violations
    finally:
        context.close()
