"""The conversation pages in real headless Chromium: an auditor signs in, finds a conversation from
the list (via its agent session), reads its turns (context summary, completions of every status,
a collapsed long input that opens without JavaScript, a ``<script>`` input that stays text) and
follows the link to the session's audit history. Screenshots go to var/screenshots/ for a look."""

from __future__ import annotations

import json
import uuid

import pytest
from django.urls import reverse

from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentRun
from agent_runtime.services.runs import run_complete, turn_prepare
from tests.factories import AgentSessionFactory, ClientFactory, RouteFactory, ToolProviderFactory
from tests.support.console import PASSWORD
from tests.support.providers_seed import load_spec
from tests.support.runtime import completion_body, turn_body

USAGE = {"input_tokens": 1840, "cached_input_tokens": 1200, "output_tokens": 312, "total_tokens": 2152}
LONG_INPUT = "Please reconcile these order lines against the invoice:\n" + "\n".join(
    f"line {n}: order #{1000 + n}, 2 × widget, 19.90 EUR, shipped {n % 28 + 1:02d}.03." for n in range(1, 60)
)


def turn(session, n, *, route="shop", conversation="support-chat", **overrides) -> str:
    body = turn_body(n, client_conversation_id=conversation, **overrides)
    frozen = turn_prepare(identity=AgentIdentity(session, session.client), route_key=route, data=body)
    return json.loads(frozen)["run_id"]


def complete(session, run_id, n, **overrides) -> None:
    run_complete(
        identity=AgentIdentity(session, session.client), run_id=run_id, data=completion_body(n, **overrides)
    )


def seed():
    ToolProviderFactory(name="shop", spec=load_spec("catalog_shop"))
    RouteFactory(
        route_key="shop",
        name="Shop desk",
        tools={"sources": [{"provider": "shop", "allow": ["*"]}], "agent_direct": {"enabled": True}},
        memory={"per_message_chars": 200},
    )
    session = AgentSessionFactory(
        client=ClientFactory(app_id="desktop-agent", name="Desktop Agent"),
        allowed_routes=["shop"],
        device_label="Ada's workstation",
        principal={"id": "emp-42", "tenant": "acme", "roles": ["support"]},
        on_behalf_of="user:emp-42",
    )
    first = turn(session, 1, user_input="Which orders of customer 42 are still open?")
    complete(
        session,
        first,
        1,
        content="Two orders are open:\n\n- #1042 (paid, not shipped)\n- #1047 (awaiting payment)",
        model="gpt-4.1-mini",
        runtime="bailing-desktop 0.9",
        usage=USAGE,
    )
    second = turn(session, 2, user_input=LONG_INPUT, knowledge_delivery="on_demand")
    complete(
        session, second, 2, status="failed", content="The invoice service timed out.", model="gpt-4.1-mini"
    )
    third = turn(session, 3, user_input="<script>alert('x')</script> cancel that")
    complete(session, third, 3, status="cancelled", content="Cancelled by the user.")
    turn(session, 4, user_input="And the shipping address of #1042?")
    other = turn(session, 5, conversation="quick-question", user_input="What is our refund window?")
    complete(session, other, 5, content="30 days from delivery.")
    return session, AgentRun.objects.get(pk=first).conversation


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_auditor_reads_a_conversation(hub_server, auditor, browser_page, screenshot):
    session, conversation = seed()
    page = browser_page
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    base = hub_server.url

    page.goto(base + reverse("console:conversation_list"))
    page.get_by_label("Username").fill(auditor.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:conversation_list"))
    assert page.locator(".nav a[aria-current=page]").inner_text() == "Conversations"
    rows = page.locator("table.data tbody tr")
    assert rows.count() == 2
    assert "support-chat" in rows.nth(1).inner_text()
    assert "context_ready" in rows.nth(1).inner_text()
    screenshot(page, "conversations-01-list")

    # From the agent session to its conversations, filtered.
    page.goto(base + reverse("console:session_detail", args=[session.id]))
    page.get_by_role("link", name="Conversations of this session").click()
    page.wait_for_url(f"{base}{reverse('console:conversation_list')}?session={session.id}")
    page.get_by_label("Has a run that is").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    assert page.locator("table.data tbody tr").count() == 1
    screenshot(page, "conversations-02-filtered")
    page.locator("table.data tbody tr a", has_text=str(conversation.id)[:8]).click()
    page.wait_for_url(base + reverse("console:conversation_detail", args=[conversation.id]))

    turns = page.locator("article.turn")
    assert turns.count() == 4
    assert [turns.nth(i).locator(".turn-head .badge").inner_text() for i in range(4)] == [
        "completed",
        "failed",
        "cancelled",
        "context_ready",
    ]
    first = turns.nth(0)
    assert "gpt-4.1-mini" in first.inner_text()
    assert "2152" in first.locator(".completion-facts").inner_text()
    assert first.locator(".tool-name").count() >= 1
    revision = first.locator(".revision").first
    assert len(revision.get_attribute("title")) == 64
    assert "on_demand" in turns.nth(1).locator(".turn-context").inner_text()
    # Turn 4 remembers the long input of turn 2, cut to the workspace's 200 characters.
    assert "6 messages · 1 cut" in turns.nth(3).locator(".turn-context").inner_text()
    # The <script> input is shown as text and never ran.
    assert "<script>alert('x')</script> cancel that" in turns.nth(2).locator("pre.message-user").inner_text()
    assert dialogs == []
    assert "No completion recorded" in turns.nth(3).inner_text()
    screenshot(page, "conversations-03-detail")

    # The long input is collapsed behind its preview and opens without JavaScript.
    long_text = turns.nth(1).locator("details.message-long")
    assert not long_text.locator("pre.message").is_visible()
    assert long_text.locator("summary").inner_text().startswith("Please reconcile")
    long_text.locator("summary").click()
    assert long_text.locator("pre.message").is_visible()
    assert long_text.locator("summary").inner_text().startswith("Collapse 3586 characters")
    assert "line 59: order #1059" in long_text.locator("pre.message").inner_text()
    turns.nth(1).scroll_into_view_if_needed()
    screenshot(page, "conversations-04-detail-expanded")

    page.get_by_role("link", name="Audit history of this session").click()
    page.wait_for_url(lambda url: "/audit" in url)
    actions = page.locator("table.data tbody").inner_text()
    assert actions.count("agent_runtime.turn.context_ready") == 5
    assert actions.count("agent_runtime.run.completed") == 4
    screenshot(page, "conversations-05-audit")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_empty_conversation_list_says_how_one_appears(hub_server, auditor, browser_page, screenshot):
    page = browser_page
    base = hub_server.url
    page.goto(base + reverse("console:conversation_list"))
    page.get_by_label("Username").fill(auditor.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:conversation_list"))

    hint = page.get_by_role("region", name="No conversations yet")
    assert "POST /agent-api/v1/workspaces/<workspace>/turns" in hint.inner_text()
    assert 'python -m agent_client turn --tokens FILE --workspace <workspace> "the user\'s message"' in (
        hint.inner_text()
    )
    assert page.locator("table.data").count() == 0
    screenshot(page, "conversations-empty")

    # A filter that finds nothing is not "none yet": the table says nothing matches.
    seed()
    page.goto(base + reverse("console:conversation_list") + f"?session={uuid.uuid4()}")
    assert page.get_by_role("region", name="No conversations yet").count() == 0
    assert page.locator("table.data td.empty").inner_text() == "No conversations match."
