"""The permission matrix of the conversation pages: anonymous → login, no role → 403, every role
reads; both pages are read-only (no write handlers for anyone) and never cached."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.test import Client as HttpClient
from django.urls import reverse

from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentConversation, AgentRun
from agent_runtime.services.runs import turn_prepare
from tests.factories import AgentSessionFactory, RouteFactory, UserFactory
from tests.support.console import signed_in
from tests.support.runtime import turn_body

pytestmark = pytest.mark.django_db

ROLES = {"nobody": [], "approver": ["approver"], "auditor": ["auditor"], "administrator": ["administrator"]}
VIEWERS = {"approver", "auditor", "administrator"}
PAGES = ["conversation_list", "conversation_detail"]


@pytest.fixture
def conversation(console_roles) -> AgentConversation:
    RouteFactory(route_key="orders")
    session = AgentSessionFactory(allowed_routes=["orders"])
    body = turn_prepare(
        identity=AgentIdentity(session, session.client), route_key="orders", data=turn_body(1)
    )
    return AgentRun.objects.get(pk=json.loads(body)["run_id"]).conversation


def url_of(page: str, conversation: AgentConversation) -> str:
    if page == "conversation_detail":
        return reverse("console:conversation_detail", args=[conversation.id])
    return reverse("console:conversation_list")


@pytest.mark.parametrize("role", sorted(VIEWERS))
def test_every_role_group_holds_both_view_permissions(console_roles, role):
    granted = set(Group.objects.get(name=role).permissions.values_list("codename", flat=True))
    assert {"view_agentconversation", "view_agentrun"} <= granted


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_get_redirects_to_login(conversation, page):
    response = HttpClient().get(url_of(page, conversation))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login") + "?next=")


@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("page", PAGES)
def test_get_matrix(conversation, page, role):
    response = signed_in(UserFactory(roles=ROLES[role])).get(url_of(page, conversation))
    if role in VIEWERS:
        assert response.status_code == 200
        assert "no-store" in response["Cache-Control"]
    else:
        assert response.status_code == 403
        assert "console/forbidden.html" in [t.name for t in response.templates]


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_post_redirects_to_login(conversation, page):
    response = HttpClient().post(url_of(page, conversation))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login") + "?next=")


@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("page", PAGES)
def test_post_matrix(conversation, page, role):
    response = signed_in(UserFactory(roles=ROLES[role])).post(url_of(page, conversation))
    assert response.status_code == (405 if role in VIEWERS else 403)


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
@pytest.mark.parametrize("page", PAGES)
def test_no_write_handlers(conversation, administrator, page, method):
    before = list(AgentRun.objects.values_list("run_id", "status", "updated_at"))
    response = getattr(signed_in(administrator), method)(url_of(page, conversation))
    assert response.status_code == 405
    assert list(AgentRun.objects.values_list("run_id", "status", "updated_at")) == before
    assert AgentConversation.objects.filter(pk=conversation.pk).exists()


def test_unknown_conversation_is_404(conversation, auditor):
    missing = reverse("console:conversation_detail", args=["00000000-0000-4000-8000-000000000000"])
    assert signed_in(auditor).get(missing).status_code == 404


@pytest.mark.parametrize("role", sorted(ROLES))
def test_nav_shows_conversations_after_agent_sessions_to_viewers_only(conversation, role):
    response = signed_in(UserFactory(roles=ROLES[role])).get(reverse("console:dashboard"))
    names = [item["url_name"] for item in response.context["console_nav"]]
    if role in VIEWERS:
        assert names[names.index("console:session_list") + 1] == "console:conversation_list"
    else:
        assert "console:conversation_list" not in names
