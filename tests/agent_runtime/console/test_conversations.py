"""What the conversation pages show: the list (columns, newest activity first, filters, pagination,
flat query count) and one conversation's turns (order, frozen context summary, completion, escaping,
collapsed long texts, failed and cancelled completions), plus the links to and from the agent
session and the audit history. Every row comes from ``turn_prepare`` / ``run_complete``."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from agent_runtime.console.conversations import LONG_TEXT_CHARS
from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentConversation, AgentRun
from agent_runtime.services.runs import run_complete, turn_prepare
from tests.factories import (
    AgentSessionFactory,
    ClientFactory,
    RouteFactory,
    ToolInvocationFactory,
    ToolProviderFactory,
)
from tests.support.console import signed_in
from tests.support.providers_seed import load_spec
from tests.support.runtime import completion_body, turn_body

pytestmark = pytest.mark.django_db

USAGE = {
    "total_tokens": 150,
    "input_tokens": 120,
    "tool_calls": 1,
    "output_tokens": 30,
    "cached_input_tokens": 80,
}


def turn(session, n, *, route="orders", conversation="conversation-1", **overrides) -> str:
    """Prepare turn ``n`` through the service; returns its run id."""
    body = turn_body(n, client_conversation_id=conversation, **overrides)
    frozen = turn_prepare(identity=AgentIdentity(session, session.client), route_key=route, data=body)
    return json.loads(frozen)["run_id"]


def complete(session, run_id, n, **overrides) -> None:
    run_complete(
        identity=AgentIdentity(session, session.client), run_id=run_id, data=completion_body(n, **overrides)
    )


def conversation_of(run_id: str) -> AgentConversation:
    return AgentRun.objects.get(pk=run_id).conversation


def list_url(**query) -> str:
    return reverse("console:conversation_list") + ("?" + urlencode(query) if query else "")


def detail_url(conversation: AgentConversation) -> str:
    return reverse("console:conversation_detail", args=[conversation.id])


def listed(response) -> list[str]:
    return [conversation.client_conversation_id for conversation in response.context["object_list"]]


@pytest.fixture
def session():
    RouteFactory(route_key="orders", name="Order desk")
    return AgentSessionFactory(
        client=ClientFactory(app_id="desk-agent"), allowed_routes=["orders"], device_label="Ada's laptop"
    )


# --- list -----------------------------------------------------------------------------------------------


def test_list_columns_and_newest_activity_first(admin_http, session):
    first = turn(session, 1, conversation="first")
    complete(session, first, 1)
    second = turn(session, 2, conversation="first")
    turn(session, 3, conversation="second")

    response = admin_http.get(list_url())
    assert listed(response) == ["second", "first"]
    rows = {row[0].sub: row for row in response.context["table"].rows}
    conversation = conversation_of(first)
    head = rows["first"]
    assert head[0].href == detail_url(conversation)
    assert head[0].title == str(conversation.id)
    assert head[0].text == str(conversation.id)[:8] + "…"
    assert [cell.text for cell in head[1:5]] == ["desk-agent", str(session.id)[:8] + "…", "orders", "2"]
    assert head[2].href == reverse("console:session_detail", args=[session.id])
    assert head[5].text == AgentRun.objects.get(pk=second).created_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (head[6].text, head[6].tone) == ("context_ready", "warn")

    # A completion is activity too: the conversation whose agent just answered rises to the top.
    complete(session, second, 2, status="failed")
    response = admin_http.get(list_url())
    assert listed(response) == ["first", "second"]
    row = response.context["table"].rows[0]
    assert (row[4].text, row[6].text, row[6].tone) == ("2", "failed", "bad")


@pytest.fixture
def two_clients():
    """alpha: ``a1`` (orders, completed) and ``a2`` (billing, failed); beta: ``b1`` (orders,
    cancelled then context_ready)."""
    RouteFactory(route_key="orders")
    RouteFactory(route_key="billing")
    alpha = AgentSessionFactory(client=ClientFactory(app_id="alpha"), allowed_routes=["orders", "billing"])
    beta = AgentSessionFactory(client=ClientFactory(app_id="beta"), allowed_routes=["orders"])
    complete(alpha, turn(alpha, 1, conversation="a1"), 1)
    complete(alpha, turn(alpha, 2, route="billing", conversation="a2"), 2, status="failed")
    complete(beta, turn(beta, 3, conversation="b1"), 3, status="cancelled")
    turn(beta, 4, conversation="b1")
    return {"alpha": alpha, "beta": beta}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, {"a1", "a2", "b1"}),
        ({"client": "alpha"}, {"a1", "a2"}),
        ({"route": "billing"}, {"a2"}),
        ({"route": "orders"}, {"a1", "b1"}),
        ({"status": "completed"}, {"a1"}),
        ({"status": "failed"}, {"a2"}),
        # Any run of the conversation counts, not only the last one.
        ({"status": "cancelled"}, {"b1"}),
        ({"status": "context_ready"}, {"b1"}),
        ({"client": "alpha", "route": "orders"}, {"a1"}),
        ({"client": "beta", "status": "failed"}, set()),
    ],
)
def test_list_filters(admin_http, two_clients, query, expected):
    response = admin_http.get(list_url(**query))
    assert response.status_code == 200
    assert not response.context["filter_form"].errors
    assert set(listed(response)) == expected


def test_list_filters_by_session(admin_http, two_clients):
    beta = two_clients["beta"]
    response = admin_http.get(list_url(session=str(beta.id)))
    assert listed(response) == ["b1"]
    # The status filter narrows conversations without multiplying or dropping their turns.
    filtered = admin_http.get(list_url(session=str(beta.id), status="cancelled"))
    assert [row[4].text for row in filtered.context["table"].rows] == ["2"]


@pytest.mark.parametrize(
    ("field", "value"), [("session", "not-a-uuid"), ("status", "preparing"), ("route", "nope")]
)
def test_list_reports_a_bad_filter_and_ignores_it(admin_http, two_clients, field, value):
    response = admin_http.get(list_url(**{field: value}))
    assert response.status_code == 200
    assert response.context["filter_form"].errors[field]
    assert set(listed(response)) == {"a1", "a2", "b1"}


def test_list_paginates_50_and_keeps_filters(admin_http, session):
    for n in range(51):
        turn(session, n, conversation=f"bulk-{n}")
    RouteFactory(route_key="other")
    stranger = AgentSessionFactory(allowed_routes=["other"])
    turn(stranger, 1, route="other")

    first = admin_http.get(list_url(client="desk-agent"))
    assert len(first.context["object_list"]) == 50
    assert first.context["paginator"].count == 51
    assert "?client=desk-agent&amp;page=2" in first.content.decode()
    second = admin_http.get(list_url(client="desk-agent", page=2))
    assert len(second.context["object_list"]) == 1
    assert set(listed(first)).isdisjoint(listed(second))
    # Newest activity first across pages: the first conversation started is the last one shown.
    assert listed(second) == ["bulk-0"]


def test_list_query_count_does_not_grow_with_rows(admin_http, django_assert_max_num_queries):
    RouteFactory(route_key="orders")
    for n in range(30):
        session = AgentSessionFactory(allowed_routes=["orders"])
        complete(session, turn(session, n), n)
        turn(session, n + 100)
    admin_http.get(list_url())  # warm the session and permission caches of this client
    with django_assert_max_num_queries(10):  # + the navigation's pending-approvals count
        response = admin_http.get(list_url(status="completed"))
    assert len(response.context["table"].rows) == 30
    assert {row[4].text for row in response.context["table"].rows} == {"2"}


# --- detail ---------------------------------------------------------------------------------------------


@pytest.fixture
def shop_session():
    """A workspace with direct tools (so turns carry active tools) and a 50-character memory cut."""
    ToolProviderFactory(name="shop", spec=load_spec("catalog_shop"))
    RouteFactory(
        route_key="shop",
        name="Shop desk",
        target_config={"system_prompt": "Instructions only the agent reads."},
        tools={"sources": [{"provider": "shop", "allow": ["*"]}], "agent_direct": {"enabled": True}},
        memory={"per_message_chars": 50},
    )
    return AgentSessionFactory(
        client=ClientFactory(app_id="desk-agent"),
        allowed_routes=["shop"],
        principal={"id": "emp-42", "tenant": "acme", "roles": []},
        on_behalf_of="user:emp-42",
    )


def test_detail_shows_turns_in_order_with_context_and_completion(admin_http, shop_session):
    long_question = "Which orders of customer 42 are still open, and which ones shipped last week?"
    first = turn(shop_session, 1, route="shop", user_input=long_question, page_context={"title": "Orders"})
    complete(shop_session, first, 1, content="Two are open.", model="gpt-x", runtime="codex", usage=USAGE)
    second = turn(shop_session, 2, route="shop", knowledge_delivery="on_demand")
    conversation = conversation_of(first)

    response = admin_http.get(detail_url(conversation))
    assert response.status_code == 200
    turns = response.context["turns"]
    assert [t.number for t in turns] == [1, 2]
    assert [(t.client_turn_id, t.user_message_id) for t in turns] == [
        ("turn-1", "message-1"),
        ("turn-2", "message-2"),
    ]
    assert [t.status for t in turns] == ["completed", "context_ready"]

    runs = {str(run.run_id): run for run in AgentRun.objects.all()}
    for view, run_id in zip(turns, [first, second], strict=True):
        frozen = json.loads(runs[run_id].context_body)
        assert view.context.run_id == run_id
        assert view.context.profile_revision.full == frozen["profile_revision"]
        assert view.context.capability_revision.full == frozen["capability_revision"]
        assert view.context.active_tools == [tool["name"] for tool in frozen["active_tools"]]
        assert view.context.active_tools
    one, two = (t.context for t in turns)
    assert (one.memory_messages, one.memory_cut) == (0, 0)
    # Turn 2 remembers turn 1: the 78-character question was cut to 50, the answer was not.
    assert (two.memory_messages, two.memory_cut) == (2, 1)
    assert (one.knowledge_delivery, one.knowledge_status) == ("inline", "")
    assert (two.knowledge_delivery, two.knowledge_status) == ("on_demand", "disabled")

    answer = turns[0].completion
    assert (answer.status, answer.assistant_message_id, answer.content.text) == (
        "completed",
        "assistant-1",
        "Two are open.",
    )
    assert (answer.model, answer.runtime) == ("gpt-x", "codex")
    assert answer.usage == [
        ("input_tokens", 120),
        ("cached_input_tokens", 80),
        ("output_tokens", 30),
        ("total_tokens", 150),
        ("tool_calls", 1),
    ]
    assert turns[1].completion is None
    assert turns[1].completed_at is None

    html = response.content.decode()
    assert html.index(long_question) < html.index("Two are open.") < html.index("message-2")
    revision = one.profile_revision.full
    assert f'title="{revision}">{revision[:12]}…</span>' in html
    assert "user:emp-42" in html and "emp-42" in html and "acme" in html
    assert reverse("console:session_detail", args=[shop_session.id]) in html
    assert reverse("console:workspace_detail", args=["shop"]) in html
    for tool in one.active_tools:
        assert f'<span class="mono tool-name">{tool}</span>' in html


def test_detail_never_renders_what_is_not_in_the_frozen_context_or_completion(admin_http, shop_session):
    run_id = turn(shop_session, 1, route="shop", page_context={"title": "Hidden page hint"})
    complete(shop_session, run_id, 1)
    run = AgentRun.objects.get(pk=run_id)

    html = admin_http.get(detail_url(run.conversation)).content.decode()
    assert run.request_hash not in html
    assert run.completion_hash not in html
    assert "Instructions only the agent reads." not in html
    assert "Hidden page hint" not in html
    assert shop_session.access_token_hash not in html


def test_detail_escapes_user_and_agent_text(admin_http, session):
    run_id = turn(session, 1, user_input="<script>alert('in')</script>")
    complete(session, run_id, 1, content="<script>alert('out')</script><b>bold</b>", model="<i>model</i>")
    long_id = turn(session, 2, user_input="<script>alert('long')</script>\n" + "x" * LONG_TEXT_CHARS)

    html = admin_http.get(detail_url(conversation_of(run_id))).content.decode()
    assert "<script>" not in html
    assert "<b>bold" not in html and "<i>model" not in html
    assert "&lt;script&gt;alert(&#x27;in&#x27;)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(&#x27;out&#x27;)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;" in html
    assert "&lt;i&gt;model&lt;/i&gt;" in html
    # The long input is escaped in its preview and in its full text.
    assert html.count("&lt;script&gt;alert(&#x27;long&#x27;)&lt;/script&gt;") == 2
    assert AgentRun.objects.filter(pk=long_id).exists()


def test_detail_shows_hidden_characters_as_escapes(admin_http, session):
    """A right-to-left override, a zero-width space, an isolate and a tag character in what the user
    asked and the agent answered reach the page only as visible ``U+…`` tokens (bailing/ui/visible.py)."""
    from bailing.ui.visible import HIDDEN_CHARS

    run_id = turn(session, 1, user_input="pay \u202eDE00 1234\u202c now\u200b")
    complete(session, run_id, 1, content="done \u2067\U000e0041\u2069 <b>x</b>")

    html = admin_http.get(detail_url(conversation_of(run_id))).content.decode()
    assert not HIDDEN_CHARS.search(html)
    for point in ("U+202E", "U+202C", "U+200B", "U+2067", "U+E0041", "U+2069"):
        assert f">{point}</span>" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    # Stored exactly as sent: only the page shows the escapes.
    assert AgentRun.objects.get(pk=run_id).user_input == "pay \u202eDE00 1234\u202c now\u200b"


def test_detail_collapses_long_texts_only(admin_http, session):
    short_id = turn(session, 1, user_input="Short question")
    complete(session, short_id, 1, content="line\n" * 40)
    turn(session, 2, user_input="q" * (LONG_TEXT_CHARS + 1))

    response = admin_http.get(detail_url(conversation_of(short_id)))
    turns = response.context["turns"]
    assert turns[0].user_input.collapsed is False
    assert turns[0].completion.content.collapsed is True  # 41 lines
    assert turns[1].user_input.collapsed is True
    assert turns[1].user_input.chars == LONG_TEXT_CHARS + 1
    html = response.content.decode()
    assert html.count('<details class="message-long">') == 2
    assert f'Show all</span><span class="when-open">Collapse</span> {LONG_TEXT_CHARS + 1} characters' in html


def test_detail_of_failed_and_cancelled_completions(admin_http, session):
    for n, status in enumerate(["completed", "failed", "cancelled"], start=1):
        complete(session, turn(session, n), n, status=status, content=f"Answer {n} ({status}).")
    conversation = AgentConversation.objects.get()

    response = admin_http.get(detail_url(conversation))
    turns = response.context["turns"]
    assert [(t.status, t.completion.status, t.completion.tone) for t in turns] == [
        ("completed", "completed", "ok"),
        ("failed", "failed", "bad"),
        ("cancelled", "cancelled", "off"),
    ]
    html = response.content.decode()
    assert '<span class="badge badge-bad">failed</span>' in html
    assert '<span class="badge badge-off">cancelled</span>' in html
    assert "Answer 2 (failed)." in html and "Answer 3 (cancelled)." in html
    # The list shows the last turn's status.
    row = admin_http.get(list_url()).context["table"].rows[0]
    assert (row[4].text, row[6].text) == ("3", "cancelled")


def test_detail_paginates_turns_and_stays_flat_in_queries(admin_http, session, django_assert_max_num_queries):
    for n in range(1, 52):
        complete(session, turn(session, n), n)
    conversation = AgentConversation.objects.get()
    url = detail_url(conversation)
    admin_http.get(url)

    with django_assert_max_num_queries(10):  # + the pending-approvals badge and the tool-call counts
        first = admin_http.get(url)
    assert [t.number for t in first.context["turns"]] == list(range(1, 51))
    assert [t.client_turn_id for t in first.context["turns"]][:2] == ["turn-1", "turn-2"]
    assert "?page=2" in first.content.decode()
    second = admin_http.get(url, {"page": 2})
    assert [(t.number, t.client_turn_id) for t in second.context["turns"]] == [(51, "turn-51")]


def test_each_turn_counts_its_tool_calls_and_links_to_their_traces(admin_http, session):
    first = turn(session, 1)
    second = turn(session, 2)
    run = AgentRun.objects.get(pk=first)
    for _ in range(2):
        ToolInvocationFactory(session=session, route=run.route, run=run)
    ToolInvocationFactory(session=session, route=run.route, run=None)  # outside any turn
    url = detail_url(conversation_of(first))

    turns = {t.run_id: t for t in admin_http.get(url).context["turns"]}
    assert (turns[first].tool_calls, turns[second].tool_calls) == (2, 0)
    traces = reverse("console:invocation_list") + "?run=" + first
    assert f'href="{traces}"' in admin_http.get(url).content.decode()
    listed_calls = admin_http.get(traces).context["object_list"]
    assert {call.run_id for call in listed_calls} == {run.run_id}
    assert len(listed_calls) == 2


def test_detail_of_an_empty_page_number_falls_back(admin_http, session):
    run_id = turn(session, 1)
    response = admin_http.get(detail_url(conversation_of(run_id)), {"page": "zzz"})
    assert response.status_code == 200
    assert [t.number for t in response.context["turns"]] == [1]


# --- links: session ↔ conversations, audit history ----------------------------------------------------


def test_session_detail_links_to_its_conversations(admin_http, session):
    turn(session, 1, conversation="mine")
    RouteFactory(route_key="other")
    stranger = AgentSessionFactory(allowed_routes=["other"])
    turn(stranger, 1, route="other", conversation="theirs")

    html = admin_http.get(reverse("console:session_detail", args=[session.id])).content.decode()
    link = f"{reverse('console:conversation_list')}?session={session.id}"
    assert f'href="{link}"' in html
    assert listed(admin_http.get(link)) == ["mine"]


def test_session_detail_links_to_its_tool_calls(admin_http, session):
    run = AgentRun.objects.get(pk=turn(session, 1))
    mine = ToolInvocationFactory(session=session, route=run.route)
    ToolInvocationFactory()  # another session's call

    html = admin_http.get(reverse("console:session_detail", args=[session.id])).content.decode()
    link = f"{reverse('console:invocation_list')}?session={session.id}"
    assert f'href="{link}"' in html
    assert [call.pk for call in admin_http.get(link).context["object_list"]] == [mine.pk]


def test_turn_and_completion_events_in_the_audit_history_of_the_session(auditor, approver, session):
    run_id = turn(session, 1)
    complete(session, run_id, 1, status="failed")
    conversation = conversation_of(run_id)
    audit_url = reverse("console:audit_list") + "?" + urlencode({"session": session.id})

    page = signed_in(auditor).get(detail_url(conversation))
    assert f'href="{audit_url.replace("&", "&amp;")}"' in page.content.decode()
    history = signed_in(auditor).get(audit_url)
    events = [(e.action, e.target_id) for e in history.context["object_list"]]
    assert events == [("agent_runtime.run.completed", run_id), ("agent_runtime.turn.context_ready", run_id)]
    actions = [row[2].text for row in history.context["table"].rows]
    assert actions == ["agent_runtime.run.completed", "agent_runtime.turn.context_ready"]
    assert history.context["object_list"][0].data["status"] == "failed"
    html = history.content.decode()
    assert "agent_runtime.run.completed" in html and "agent_runtime.turn.context_ready" in html
    # Approvers read conversations but not the audit history: no dead link for them.
    assert audit_url not in signed_in(approver).get(detail_url(conversation)).content.decode()
