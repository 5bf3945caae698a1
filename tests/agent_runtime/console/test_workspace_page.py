"""The workspace page says what a workspace is: the tools it offers, its knowledge bases (a section the
knowledge app contributes through the runtime's port), allowed clients, active sessions, recent
conversations and its memory and knowledge settings, with the raw configuration collapsed."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agent_runtime.models import Route
from agent_runtime.ports import workspace_section_register, workspace_sections
from tests.factories import AgentSessionFactory, ClientFactory, RouteFactory, UserFactory
from tests.support.console import signed_in
from tests.support.console_overview import seed_overview, turn

pytestmark = pytest.mark.django_db


def url(route_key: str) -> str:
    return reverse("console:workspace_detail", args=[route_key])


def cells(table) -> list[list[str]]:
    return [[cell.text for cell in row] for row in table.rows]


def test_the_page_lists_what_the_workspace_offers_and_who_uses_it(admin_http):
    seed_overview(failed_provider=False)

    response = admin_http.get(url("writer"))

    assert response.status_code == 200
    context = response.context
    tools = {row[0]: row for row in cells(context["tools_table"])}
    # writer: every shop tool it may read, plus the two listed writes, one forced to approval.
    assert tools["order_cancel"][1:] == ["shop", "write", "medium", "always (forced by this workspace)"]
    assert tools["refund_large"][2] == "write"
    assert tools["refund_large"][4] == "when amount > 500"
    assert "voucher_issue" not in tools  # a write the workspace does not list in write_tools
    assert all(
        row[2] == "read" for name, row in tools.items() if name not in {"order_cancel", "refund_large"}
    )
    assert context["tool_counts"]["write"] == 2
    assert context["tools_table"].rows[0][0].href == reverse(
        "console:provider_tool_detail", args=["shop", context["tools_table"].rows[0][0].text]
    )
    assert cells(context["sources_table"]) == [["shop", "enabled", "*", str(len(tools))]]

    kb = next(section for section in context["sections"] if section.title == "Knowledge bases")
    assert cells(kb.table) == [
        ["faq", "Shop FAQ", "enabled", "lexical only", "1", "1", "1"],
        ["gone", "no such knowledge base", "missing", "—", "—", "—", "—"],
    ]
    assert kb.table.rows[0][0].href == reverse("console:knowledge_detail", args=["faq"])

    assert [row[0] for row in cells(context["clients_table"])] == ["desk-agent", "wild-agent"]
    assert cells(context["clients_table"])[1][2] == "disabled"
    sessions = cells(context["sessions_table"])
    assert sorted(row[2] for row in sessions) == ["Ada's laptop", "Build server"]
    conversations = {row[0].sub: row for row in context["conversations_table"].rows}
    assert set(conversations) == {"refund-SO-1001", "cancel-SO-1002"}
    assert conversations["refund-SO-1001"][2].text == "2"
    assert conversations["refund-SO-1001"][4].text == "context_ready"

    assert dict(context["memory_facts"])["Summary"] == "on"
    knowledge = dict(context["knowledge_facts"])
    assert knowledge["Knowledge bases"] == "faq, gone"
    assert knowledge["Top k"] == "3"
    html = response.content.decode()
    assert '<details class="raw-config">' in html
    assert "&quot;kb_ids&quot;" in html or '"kb_ids"' in html
    assert f"{reverse('console:tool_list')}?route=writer" in html
    assert f"{reverse('console:session_list')}?route=writer&amp;state=active" in html


def test_empty_workspace_reads_well(admin_http):
    RouteFactory(route_key="bare", name="Bare")

    response = admin_http.get(url("bare"))

    assert response.status_code == 200
    html = response.content.decode()
    assert "Agent direct tools are off: agents of this workspace get no business tools." in html
    assert "This workspace names no knowledge base" in html
    assert "No client lists this workspace" in html
    assert "No active agent session is signed in to this workspace." in html
    assert "No conversations in this workspace yet." in html
    assert "No tool sources configured." in html


def test_a_workspace_naming_a_missing_provider_says_so(admin_http):
    RouteFactory(
        route_key="lost",
        tools={"sources": [{"provider": "nowhere", "allow": ["*"]}], "agent_direct": {"enabled": True}},
    )
    response = admin_http.get(url("lost"))
    assert cells(response.context["sources_table"]) == [["nowhere", "missing", "*", "0"]]
    assert response.context["sources_table"].rows[0][0].href is None
    assert "No tool is offered" in response.content.decode()


@pytest.mark.parametrize("role", ["administrator", "approver", "auditor"])
def test_every_role_sees_every_section(console_roles, role):
    seed_overview(failed_provider=False)
    response = signed_in(UserFactory(roles=[role])).get(url("writer"))
    assert response.status_code == 200
    for key in ("tools_table", "clients_table", "sessions_table", "conversations_table"):
        assert key in response.context
    assert [section.title for section in response.context["sections"]] == ["Knowledge bases"]


def test_sections_follow_their_own_permissions(console_roles):
    """A user who may read workspaces only gets the configuration, none of the other apps' rows."""
    seed_overview(failed_provider=False)
    user = UserFactory()
    user.user_permissions.add(
        Permission.objects.get(codename="view_route", content_type__app_label="agent_runtime")
    )

    response = signed_in(user).get(url("writer"))

    assert response.status_code == 200
    for key in ("tools_table", "clients_table", "sessions_table", "conversations_table"):
        assert key not in response.context
    assert response.context["sections"] == []
    html = response.content.decode()
    assert "desk-agent" not in html and "Shop FAQ" not in html and "refund-SO-1001" not in html
    assert "Memory" in html


def test_the_page_costs_the_same_with_many_rows(admin_http):
    """No query per tool, client, session, conversation or knowledge base."""
    overview = seed_overview(failed_provider=False)

    def page_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert admin_http.get(url("writer")).status_code == 200
        return len(queries)

    before = page_queries()
    desk = overview.sessions[0].client
    for n in range(6):
        ClientFactory(allowed_routes=["writer"])
        session = AgentSessionFactory(client=desk, allowed_routes=["writer"])
        turn(session, 100 + n, route="writer", conversation=f"extra-{n}")
    Route.objects.filter(route_key="writer").update(knowledge={"kb_ids": ["faq", "gone", "more-1", "more-2"]})

    assert page_queries() == before
    assert before <= 25


def test_lists_are_capped_with_their_total(admin_http):
    overview = seed_overview(failed_provider=False)
    desk = overview.sessions[0].client
    for n in range(12):
        turn(
            AgentSessionFactory(client=desk, allowed_routes=["writer"]),
            200 + n,
            route="writer",
            conversation=f"c{n}",
        )

    response = admin_http.get(url("writer"))

    assert len(response.context["sessions_table"].rows) == 10
    assert response.context["sessions_more"] == "10 of 14 active sessions"
    assert len(response.context["conversations_table"].rows) == 10
    assert response.context["conversations_more"] == "10 of 14 conversations"


def test_the_session_list_filters_by_workspace(admin_http):
    seed_overview(failed_provider=False)
    response = admin_http.get(reverse("console:session_list") + "?route=ro-desk")
    assert [s.device_label for s in response.context["object_list"]] == ["Build server"]
    response = admin_http.get(reverse("console:session_list") + "?route=writer&state=active")
    assert sorted(s.device_label for s in response.context["object_list"]) == ["Ada's laptop", "Build server"]


def test_an_app_above_contributes_a_section_through_the_port():
    """The port orders sections and drops a builder's None; names are unique."""
    with pytest.raises(ValueError):
        workspace_section_register("knowledge_bases", lambda **kwargs: None)
    route = RouteFactory(route_key="plain")
    sections = workspace_sections(route=route, effective={"knowledge": {"kb_ids": []}}, user=UserFactory())
    assert sections == []
