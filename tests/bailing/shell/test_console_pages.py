"""What each console page shows and what each console action does (through the same services as the
API): dashboard figures, lists with filters and pagination, client create / enable / token rotation,
session revoke, workspace config without secrets, audit filters and chain check, and hub consent."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.db import transaction
from django.test import Client as HttpClient
from django.urls import reverse
from django.utils import timezone

from agent_runtime.models import AgentAuthorization, AgentSession, Client
from agent_runtime.selectors.workspaces import workspace_profile
from agent_runtime.services.agent_auth.tokens import token_exchange_code
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record, audit_seal
from bailing.audit.models import AuditEvent
from bailing.db.features import server_version, vector_available
from knowledge.models import Document
from tests.factories import (
    AgentSessionFactory,
    ClientFactory,
    KnowledgeBaseFactory,
    RouteFactory,
    UserFactory,
)
from tests.support.audit import audit_tampering
from tests.support.console import signed_in


def _record(action: str, **fields) -> AuditEvent:
    with transaction.atomic():
        actor = Actor(fields.pop("actor_type", "system"), fields.pop("actor", "pytest"))
        return audit_record(action=action, actor=actor, **fields)


def _cards(response) -> dict[str, int]:
    return {card.label: card.value for card in response.context["cards"]}


# --- dashboard ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_dashboard_counts_and_database_facts(admin_http):
    now = timezone.now()
    first, second = ClientFactory(), ClientFactory(enabled=False)
    AgentSessionFactory(client=first)
    AgentSessionFactory(client=first, revoked_at=now)
    AgentSessionFactory(client=second, refresh_expires_at=now - timedelta(seconds=1))
    RouteFactory()
    RouteFactory(agent_client={"enabled": False})
    kb = KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)
    for key, status in (("ready", "ready"), ("waiting", "embedding")):
        Document.objects.create(
            kb=kb, source_key=key, title=key, content="Text.", revision="0" * 64, status=status
        )
    _record("tests.recent", actor="pytest")
    old = _record("tests.old", actor="pytest")
    with audit_tampering():
        AuditEvent.objects.filter(pk=old.pk).update(created_at=now - timedelta(hours=25))

    response = admin_http.get(reverse("console:dashboard"))

    assert response.status_code == 200
    assert _cards(response) == {
        "Clients": 2,
        "Active agent sessions": 1,
        "Workspaces": 2,
        "Knowledge documents ready": 1,
        "Approvals pending": 0,
        "Unknown outcomes": 0,
        "Audit events, last 24 h": 1,
    }
    assert "1 waiting, 0 failed, in 1 knowledge bases" in response.content.decode()
    database = response.context["database"]
    assert database["embedded"] is settings.BAILING_EMBEDDED_DB
    assert database["server_version"] == server_version()
    assert database["vector"] is vector_available()
    assert server_version() in response.content.decode()


@pytest.mark.django_db
def test_dashboard_of_a_user_without_role_shows_no_figures(no_role_user):
    ClientFactory()
    response = signed_in(no_role_user).get(reverse("console:dashboard"))
    assert response.status_code == 200
    assert response.context["cards"] == []
    assert "database" not in response.context
    assert response.context["console_nav"] == [{"label": "Dashboard", "url_name": "console:dashboard"}]


@pytest.mark.django_db
def test_dashboard_shows_approver_only_what_the_role_reads(approver):
    response = signed_in(approver).get(reverse("console:dashboard"))
    assert set(_cards(response)) == {
        "Clients",
        "Active agent sessions",
        "Workspaces",
        "Knowledge documents ready",
        "Approvals pending",
        "Unknown outcomes",
    }


# --- clients --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_client_list_shows_consent_kind_routes_and_token_prefix(admin_http):
    hub = ClientFactory(app_id="hub-agent", allowed_routes=["orders", "billing"])
    ClientFactory(
        app_id="biz-agent", hub_consent=False, agent_authorize_url="https://biz.example.com/consent"
    )
    ClientFactory(app_id="plain-caller", hub_consent=False, enabled=False, allowed_routes=[])

    response = admin_http.get(reverse("console:client_list"))

    rows = {row[0].text: [cell.text for cell in row] for row in response.context["table"].rows}
    assert rows["hub-agent"][2:6] == ["enabled", "hub", "orders, billing", hub.token_prefix + "…"]
    assert rows["biz-agent"][3] == "business page"
    assert rows["plain-caller"][2:5] == ["disabled", "none", "none"]
    assert hub._token not in response.content.decode()


@pytest.mark.django_db
def test_client_detail_lists_its_sessions(admin_http):
    client = ClientFactory()
    mine = AgentSessionFactory(client=client, device_label="build box")
    other = AgentSessionFactory(device_label="someone else")

    response = admin_http.get(reverse("console:client_detail", args=[client.app_id]))

    content = response.content.decode()
    assert response.context["sessions_total"] == 1
    assert reverse("console:session_detail", args=[mine.id]) in content
    assert reverse("console:session_detail", args=[other.id]) not in content
    assert admin_http.get(reverse("console:client_detail", args=["missing"])).status_code == 404


@pytest.mark.django_db
def test_client_create_builds_config_and_records_audit(admin_http, administrator):
    response = admin_http.post(
        reverse("console:client_create"),
        {
            "app_id": "desk-agent",
            "name": "Desk agent",
            "description": "Ops desktops",
            "allowed_routes": "orders, billing  support",
            "agent_authorize_url": "https://biz.example.com/agent-consent",
            "hub_consent": "on",
            "rate_limit_per_min": "0",
        },
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("console:client_detail", args=["desk-agent"])
    client = Client.objects.get(app_id="desk-agent")
    assert client.allowed_routes == ["orders", "billing", "support"]
    assert client.agent_authorize_url == "https://biz.example.com/agent-consent"
    assert client.hub_consent is True
    assert client.rate_limit_per_min == 0
    assert client.enabled is True
    assert client.token_hash is None
    event = AuditEvent.objects.filter(target_id="desk-agent").latest("id")
    assert event.action == "agent_runtime.client.created"
    assert event.actor == administrator.username


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("agent_authorize_url", "http://biz.example.com/consent"),
        ("allowed_routes", "orders orders"),
        ("app_id", "Bad App"),
        ("name", "Desk \u202eexe.txt"),
        ("description", "Ops \u2067desktops\u2069"),
    ],
)
def test_client_create_shows_config_errors_on_the_field(admin_http, field, value):
    data = {"app_id": "desk-agent", "name": "Desk", "allowed_routes": "orders", "rate_limit_per_min": "60"}
    data[field] = value
    response = admin_http.post(reverse("console:client_create"), data)
    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert not Client.objects.filter(app_id=data["app_id"]).exists()


@pytest.mark.django_db
def test_client_create_refuses_an_existing_app_id(admin_http):
    existing = ClientFactory(app_id="taken", name="Original")
    response = admin_http.post(
        reverse("console:client_create"),
        {"app_id": "taken", "name": "Replacement", "rate_limit_per_min": "60"},
    )
    assert response.status_code == 200
    assert response.context["form"].errors["app_id"]
    existing.refresh_from_db()
    assert existing.name == "Original"


@pytest.mark.django_db
def test_client_disable_and_enable(admin_http, administrator):
    client = ClientFactory()
    url = reverse("console:client_set_enabled", args=[client.app_id])

    assert admin_http.post(url, {"enabled": "false"}).status_code == 400  # not confirmed
    client.refresh_from_db()
    assert client.enabled is True
    response = admin_http.post(url, {"enabled": "false", "confirm": "yes"})
    assert response.status_code == 302
    client.refresh_from_db()
    assert client.enabled is False
    page = admin_http.get(response["Location"])
    assert [m.level_tag for m in page.context["messages"]] == ["success"]
    assert (
        AuditEvent.objects.filter(
            action="agent_runtime.client.disabled", actor=administrator.username
        ).count()
        == 1
    )

    admin_http.post(url, {"enabled": "true"})
    client.refresh_from_db()
    assert client.enabled is True
    assert AuditEvent.objects.filter(action="agent_runtime.client.enabled").count() == 1

    assert admin_http.post(url, {"enabled": "maybe"}).status_code == 400


@pytest.mark.django_db
def test_rotate_token_shows_it_once_and_the_old_token_stops_working(admin_http, api_client):
    client = ClientFactory()
    old_token = client._token
    probe = "/agent-auth/v1/authorizations/00000000-0000-0000-0000-000000000000"
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {old_token}")
    assert api_client.get(probe).json()["error"] == "not_found"  # authenticated, unknown id

    response = admin_http.post(
        reverse("console:client_token_rotate", args=[client.app_id]), {"confirm": "yes"}
    )

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    new_token = response.context["token"]
    assert new_token.startswith("bct_")
    assert response.content.decode().count(new_token) == 1
    old = api_client.get(probe)
    assert old.status_code == 401
    assert old.json()["error"] == "unauthorized"
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {new_token}")
    assert api_client.get(probe).status_code == 404
    # Never again: not on the client page, not in a flash message, not in the session.
    detail = admin_http.get(reverse("console:client_detail", args=[client.app_id]))
    assert new_token not in detail.content.decode()
    assert new_token[:10] in detail.content.decode()
    assert new_token not in str(dict(admin_http.session))
    event = AuditEvent.objects.get(action="agent_runtime.client.token_rotated")
    assert new_token not in str(event.data)


# --- agent sessions -------------------------------------------------------------------------------------


@pytest.fixture
def three_states(db):
    now = timezone.now()
    alpha, beta = ClientFactory(app_id="alpha"), ClientFactory(app_id="beta")
    return {
        "active": AgentSessionFactory(client=alpha, device_label="active box"),
        "revoked": AgentSessionFactory(client=alpha, device_label="revoked box", revoked_at=now),
        "expired": AgentSessionFactory(
            client=beta, device_label="expired box", refresh_expires_at=now - timedelta(minutes=1)
        ),
    }


def _listed(response) -> set:
    return {session.id for session in response.context["object_list"]}


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["active", "expired", "revoked"])
def test_session_list_filters_by_state(admin_http, three_states, state):
    response = admin_http.get(reverse("console:session_list"), {"state": state})
    assert _listed(response) == {three_states[state].id}
    assert [row[-1].text for row in response.context["table"].rows] == [state]


@pytest.mark.django_db
def test_session_list_filters_by_client_and_state_together(admin_http, three_states):
    url = reverse("console:session_list")
    assert _listed(admin_http.get(url, {"client": "alpha"})) == {
        three_states["active"].id,
        three_states["revoked"].id,
    }
    assert _listed(admin_http.get(url, {"client": "alpha", "state": "expired"})) == set()
    assert len(_listed(admin_http.get(url))) == 3


@pytest.mark.django_db
def test_session_list_reports_a_bad_filter(admin_http, three_states):
    response = admin_http.get(reverse("console:session_list"), {"state": "dormant"})
    assert response.status_code == 200
    assert response.context["filter_form"].errors["state"]
    assert len(_listed(response)) == 3


@pytest.mark.django_db
def test_session_list_paginates_and_keeps_filters(admin_http):
    client = ClientFactory(app_id="bulk")
    for _ in range(51):
        AgentSessionFactory(client=client)
    AgentSessionFactory(revoked_at=timezone.now())
    url = reverse("console:session_list")

    first = admin_http.get(url, {"state": "active", "client": "bulk"})
    assert len(first.context["object_list"]) == 50
    assert first.context["paginator"].count == 51
    assert "?state=active&amp;client=bulk&amp;page=2" in first.content.decode()
    second = admin_http.get(url, {"state": "active", "client": "bulk", "page": 2})
    assert len(second.context["object_list"]) == 1
    assert _listed(first).isdisjoint(_listed(second))


@pytest.mark.django_db
def test_session_detail_shows_identity_and_revocation(admin_http):
    session = AgentSessionFactory(
        device_label="Ops laptop",
        principal={"id": "alice", "tenant": "acme", "roles": ["ops"]},
        on_behalf_of="alice@acme",
        allowed_routes=["orders"],
        revoked_at=timezone.now(),
        revoked_by="admin:ada",
        revoke_reason="admin",
    )
    response = admin_http.get(reverse("console:session_detail", args=[session.id]))
    content = response.content.decode()
    for expected in ["Ops laptop", "alice@acme", "acme", "ops", "orders", "admin:ada", session.client.app_id]:
        assert expected in content
    assert reverse("console:session_revoke", args=[session.id]) not in content
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", content)


@pytest.mark.django_db
def test_session_revoke_revokes_audits_and_kills_the_token(admin_http, administrator, api_client):
    session = AgentSessionFactory()
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {session._access}")
    assert api_client.get("/agent-auth/v1/session").status_code == 200
    url = reverse("console:session_revoke", args=[session.id])
    detail = admin_http.get(reverse("console:session_detail", args=[session.id])).content.decode()
    assert f'href="{url}"' in detail and 'method="post"' not in detail.split("<main")[1]

    confirm = admin_http.get(url)
    assert confirm.status_code == 200
    assert f"The agent on {session.device_label} loses access at once" in confirm.content.decode()
    assert "refresh token stops working" in confirm.content.decode()
    assert api_client.get("/agent-auth/v1/session").status_code == 200

    response = admin_http.post(url, {"confirm": "yes"})

    assert response.status_code == 302
    assert response["Location"] == reverse("console:session_detail", args=[session.id])
    session.refresh_from_db()
    assert session.state == "revoked"
    assert session.revoke_reason == "admin"
    event = AuditEvent.objects.get(action="agent_auth.session.revoked")
    assert event.session_id == session.id
    assert event.actor_type == "user"
    assert event.actor == administrator.username
    denied = api_client.get("/agent-auth/v1/session")
    assert denied.status_code == 401
    assert denied.json()["error"] == "unauthorized"
    page = admin_http.get(response["Location"])
    assert "console:session_revoke" not in page.content.decode()

    already = admin_http.get(url, follow=True)
    assert already.redirect_chain == [(reverse("console:session_detail", args=[session.id]), 302)]
    assert [m.level_tag for m in already.context["messages"]] == ["info"]
    again = admin_http.post(url, {"confirm": "yes"}, follow=True)
    assert [m.level_tag for m in again.context["messages"]] == ["info"]
    assert AuditEvent.objects.filter(action="agent_auth.session.revoked").count() == 1


# --- workspaces -----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_workspace_list_shows_agent_flags(admin_http):
    RouteFactory(
        route_key="orders",
        permission="readwrite",
        tools={"agent_direct": {"enabled": True, "write_tools": []}},
    )
    RouteFactory(route_key="archive", enabled=False, agent_client={"enabled": False})

    response = admin_http.get(reverse("console:workspace_list"))

    rows = {row[0].text: [cell.text for cell in row] for row in response.context["table"].rows}
    assert rows["orders"][2:] == ["enabled", "on", "readwrite", "on"]
    assert rows["archive"][2:] == ["disabled", "off", "full (default)", "off"]


@pytest.mark.django_db
def test_workspace_detail_shows_effective_config_and_revisions_without_secrets(admin_http):
    route = RouteFactory(
        route_key="orders",
        target_config={
            "system_prompt": "You help with orders.",
            "api_key": "sk-live-SECRET-VALUE",
            "base_url": "https://llm.internal/v1",
        },
    )

    response = admin_http.get(reverse("console:workspace_detail", args=["orders"]))

    content = response.content.decode()
    assert "sk-live-SECRET-VALUE" not in content
    assert "llm.internal" not in content
    assert response.context["hidden_target_keys"] == ["api_key", "base_url"]
    assert "You help with orders." in content
    assert response.context["effective"]["route_key"] == "orders"
    profile = workspace_profile(route)
    assert response.context["profile_revision"] == profile["profile"]["revision"]
    assert response.context["capability_revision"] == profile["capabilities"]["revision"]
    assert profile["profile"]["revision"] in content


# --- audit ----------------------------------------------------------------------------------------------


@pytest.fixture
def ledger(db):
    session = AgentSessionFactory()
    events = {
        "login": _record(
            "agent_auth.token.issued", actor="agent-1", client_app_id="alpha", session_id=session.id
        ),
        "revoke": _record(
            "agent_auth.session.revoked",
            actor="ada",
            actor_type="user",
            client_app_id="alpha",
            session_id=session.id,
        ),
        "route": _record("agent_runtime.route.updated", actor="ada", actor_type="user", route_key="orders"),
        "client": _record(
            "agent_runtime.client.created", actor="bob", actor_type="user", client_app_id="beta"
        ),
    }
    return session, events


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, ["client", "route", "revoke", "login"]),
        ({"actor": "ada"}, ["route", "revoke"]),
        ({"action": "agent_auth."}, ["revoke", "login"]),
        ({"action": "agent_auth.session"}, ["revoke"]),
        ({"client": "alpha"}, ["revoke", "login"]),
        ({"route": "orders"}, ["route"]),
        ({"actor": "ada", "client": "alpha"}, ["revoke"]),
    ],
)
def test_audit_list_filters_newest_first(admin_http, ledger, query, expected):
    _, events = ledger
    response = admin_http.get(reverse("console:audit_list"), query)
    assert [event.id for event in response.context["object_list"]] == [events[name].id for name in expected]


@pytest.mark.django_db
def test_audit_list_filters_by_session_and_time(admin_http, ledger):
    session, events = ledger
    url = reverse("console:audit_list")
    by_session = admin_http.get(url, {"session": str(session.id)})
    assert [e.id for e in by_session.context["object_list"]] == [events["revoke"].id, events["login"].id]

    base = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
    for offset, name in enumerate(["login", "revoke", "route", "client"]):
        with audit_tampering():
            AuditEvent.objects.filter(pk=events[name].pk).update(created_at=base + timedelta(hours=offset))
    window = admin_http.get(url, {"since": "2026-01-10T13:00", "until": "2026-01-10T14:00:00"})
    assert [e.id for e in window.context["object_list"]] == [events["route"].id, events["revoke"].id]


@pytest.mark.django_db
def test_audit_list_reports_bad_filters(admin_http, ledger):
    url = reverse("console:audit_list")
    response = admin_http.get(url, {"session": "not-a-uuid"})
    assert response.status_code == 200
    assert response.context["filter_form"].errors["session"]
    backwards = admin_http.get(url, {"since": "2026-01-11T00:00", "until": "2026-01-10T00:00"})
    assert backwards.context["filter_form"].errors["until"]


@pytest.mark.django_db
def test_audit_list_paginates_50_per_page_and_keeps_filters(admin_http):
    for n in range(51):
        _record("tests.bulk", actor=f"actor-{n}")
    _record("other.thing", actor="x")
    url = reverse("console:audit_list")

    first = admin_http.get(url, {"action": "tests."})
    assert len(first.context["object_list"]) == 50
    assert first.context["paginator"].count == 51
    assert "?action=tests.&amp;page=2" in first.content.decode()
    second = admin_http.get(url, {"action": "tests.", "page": "2"})
    assert [e.actor for e in second.context["object_list"]] == ["actor-0"]


@pytest.mark.django_db
def test_audit_detail_shows_data_and_hashes(admin_http):
    event = _record("tests.detail", actor="pytest", data={"allowed_routes": ["orders"]})
    url = reverse("console:audit_detail", args=[event.id])
    unsealed = admin_http.get(url).content.decode()
    assert event.content_hash in unsealed
    assert "unsealed" in unsealed
    assert "allowed_routes" in unsealed

    audit_seal()
    event.refresh_from_db()
    sealed = admin_http.get(url).content.decode()
    assert event.chain_hash in sealed
    assert event.prev_hash in sealed
    assert "unsealed" not in sealed


@pytest.mark.django_db
def test_audit_list_marks_the_events_not_sealed_yet(admin_http):
    first = _record("tests.first", actor="pytest")
    audit_seal()
    second = _record("tests.second", actor="pytest")
    table = admin_http.get(reverse("console:audit_list")).context["table"]
    marks = {int(row[0].text): row[0].sub for row in table.rows}
    assert marks == {second.id: "unsealed", first.id: ""}


@pytest.mark.django_db
def test_audit_verify_reports_intact_then_broken_chain(admin_http, ledger):
    _, events = ledger
    url = reverse("console:audit_verify")
    unsealed = admin_http.get(url)  # a visit seals nothing: the four events are the unsealed tail
    assert unsealed.context["report"].ok
    assert (unsealed.context["report"].checked, unsealed.context["report"].unsealed) == (0, 4)
    assert AuditEvent.objects.filter(chain_seq__isnull=True).count() == 4

    audit_seal()
    intact = admin_http.get(url)
    assert intact.context["report"].ok
    assert (intact.context["report"].checked, intact.context["report"].unsealed) == (4, 0)
    assert intact.context["total"] == 4

    with audit_tampering():
        AuditEvent.objects.filter(pk=events["route"].pk).update(actor="mallory")
    broken = admin_http.get(url)
    assert not broken.context["report"].ok
    assert broken.context["report"].first_broken_id == events["route"].id
    assert reverse("console:audit_detail", args=[events["route"].id]) in broken.content.decode()


# --- hub consent ----------------------------------------------------------------------------------------


def _consent_url(login) -> str:
    return reverse("console:consent") + f"?authorization_id={login.authorization.id}"


def _query(location: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(location).query)


@pytest.mark.django_db
def test_consent_page_shows_request_and_offers_requested_allowed_workspaces(administrator, start_hub_login):
    RouteFactory(route_key="orders")
    RouteFactory(route_key="billing")
    client = ClientFactory(app_id="desktop-agent", name="Desktop Agent", allowed_routes=["orders", "billing"])
    login = start_hub_login(client=client, routes=("orders", "billing"), device_label="Ada's laptop")
    client.allowed_routes = ["orders"]  # narrowed after the request was made
    client.save()

    response = signed_in(administrator).get(_consent_url(login))

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    content = response.content.decode()
    assert "Desktop Agent" in content
    assert "Ada&#x27;s laptop" in content
    assert response.context["principal_id"] == administrator.username
    assert [choice[0] for choice in response.context["form"].fields["routes"].choices] == ["orders"]
    assert re.search(r'<input type="checkbox" name="routes" value="orders"[^>]*checked', content)
    assert 'value="billing"' not in content


@pytest.mark.django_db
def test_consent_approve_redirects_to_loopback_with_code_and_state(administrator, start_hub_login):
    login = start_hub_login()

    response = signed_in(administrator).post(
        reverse("console:consent"),
        {"authorization_id": str(login.authorization.id), "decision": "approve", "routes": ["orders"]},
    )

    assert response.status_code == 302
    location = response["Location"]
    assert location.startswith(login.redirect_uri + "?")
    query = _query(location)
    assert query["state"] == [login.state]
    code = query["code"][0]
    authorization = AgentAuthorization.objects.get(pk=login.authorization.pk)
    assert authorization.status == "approved"
    assert authorization.principal == {"id": administrator.username, "roles": ["administrator"]}
    assert authorization.on_behalf_of == administrator.username
    assert authorization.approved_by == administrator
    tokens = token_exchange_code(
        client_app_id="desktop-agent",
        code=code,
        redirect_uri=login.redirect_uri,
        code_verifier=login.code_verifier,
    )
    session = AgentSession.objects.get(pk=tokens["session_id"])
    assert session.allowed_routes == ["orders"]
    assert session.on_behalf_of == administrator.username


@pytest.mark.django_db
def test_consent_deny_redirects_with_access_denied(approver, start_hub_login):
    login = start_hub_login()

    response = signed_in(approver).post(
        reverse("console:consent"), {"authorization_id": str(login.authorization.id), "decision": "deny"}
    )

    assert response.status_code == 302
    assert response["Location"].startswith(login.redirect_uri + "?")
    query = _query(response["Location"])
    assert query == {"error": ["access_denied"], "state": [login.state]}
    assert AgentAuthorization.objects.get(pk=login.authorization.pk).status == "denied"


@pytest.mark.django_db
@pytest.mark.parametrize("username", ["jos\u00e9", "渠道用户"])
def test_consent_refuses_a_user_name_that_cannot_be_the_on_behalf_of_subject(
    start_hub_login, console_roles, username
):
    approver = UserFactory(username=username, roles=["administrator"])
    login = start_hub_login()

    response = signed_in(approver).post(
        reverse("console:consent"),
        {"authorization_id": str(login.authorization.id), "decision": "approve", "routes": ["orders"]},
    )

    assert response.status_code == 400
    assert (response.context["code"], response.context["field"]) == ("invalid_request", "on_behalf_of")
    assert "X-Bailing-On-Behalf-Of" in response.content.decode()
    authorization = AgentAuthorization.objects.get(pk=login.authorization.pk)
    assert (authorization.status, authorization.on_behalf_of, authorization.code_hash) == (
        "pending",
        "",
        None,
    )
    assert not AgentSession.objects.exists()


@pytest.mark.django_db
def test_consent_approve_needs_a_workspace(administrator, start_hub_login):
    login = start_hub_login()
    response = signed_in(administrator).post(
        reverse("console:consent"), {"authorization_id": str(login.authorization.id), "decision": "approve"}
    )
    assert response.status_code == 400
    assert response.context["form"].errors["routes"]
    assert AgentAuthorization.objects.get(pk=login.authorization.pk).status == "pending"


@pytest.mark.django_db
def test_consent_refuses_a_workspace_that_was_not_offered(administrator, start_hub_login):
    login = start_hub_login()
    response = signed_in(administrator).post(
        reverse("console:consent"),
        {
            "authorization_id": str(login.authorization.id),
            "decision": "approve",
            "routes": ["orders", "admin"],
        },
    )
    assert response.status_code == 400
    assert AgentAuthorization.objects.get(pk=login.authorization.pk).status == "pending"


@pytest.mark.django_db
@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_consent_after_expiry_is_410(administrator, start_hub_login, decision):
    login = start_hub_login()
    AgentAuthorization.objects.filter(pk=login.authorization.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    browser = signed_in(administrator)

    page = browser.get(_consent_url(login))
    assert page.status_code == 410
    assert page.context["code"] == "expired"
    response = browser.post(
        reverse("console:consent"),
        {"authorization_id": str(login.authorization.id), "decision": decision, "routes": ["orders"]},
    )
    assert response.status_code == 410
    assert AgentAuthorization.objects.get(pk=login.authorization.pk).status == "expired"
    assert browser.get(_consent_url(login)).status_code == 410


@pytest.mark.django_db
def test_consent_on_a_decided_request_is_409(administrator, start_hub_login):
    login = start_hub_login()
    browser = signed_in(administrator)
    data = {"authorization_id": str(login.authorization.id), "decision": "deny"}
    assert browser.post(reverse("console:consent"), data).status_code == 302

    assert browser.get(_consent_url(login)).status_code == 409
    again = browser.post(reverse("console:consent"), {**data, "decision": "approve", "routes": ["orders"]})
    assert again.status_code == 409
    assert again.context["code"] == "invalid_state"


@pytest.mark.django_db
@pytest.mark.parametrize("authorization_id", ["", "not-a-uuid", "8a0a4a62-2d6c-4b0e-9f7e-0c6a4d9f3b11"])
def test_consent_for_unknown_request_is_404(administrator, authorization_id):
    response = signed_in(administrator).get(
        reverse("console:consent"), {"authorization_id": authorization_id}
    )
    assert response.status_code == 404
    assert response.context["code"] == "not_found"


@pytest.mark.django_db
def test_consent_for_a_business_consent_client_is_404(administrator, start_hub_login):
    RouteFactory(route_key="orders")
    client = ClientFactory(
        hub_consent=False, agent_authorize_url="https://biz.example.com/consent", allowed_routes=["orders"]
    )
    login = start_hub_login(client=client)
    browser = signed_in(administrator)
    assert browser.get(_consent_url(login)).status_code == 404
    response = browser.post(
        reverse("console:consent"),
        {"authorization_id": str(login.authorization.id), "decision": "approve", "routes": ["orders"]},
    )
    assert response.status_code == 404
    assert AgentAuthorization.objects.get(pk=login.authorization.pk).status == "pending"


@pytest.mark.django_db
def test_consent_login_round_trip_keeps_the_authorization(start_hub_login, console_roles):
    UserFactory(username="carol", roles=["approver"])
    login = start_hub_login()
    browser = HttpClient()
    first = browser.get(_consent_url(login))
    assert first.status_code == 302
    login_page = first["Location"]
    next_url = parse_qs(urlsplit(login_page).query)["next"][0]
    assert next_url == _consent_url(login)
    response = browser.post(
        reverse("console:login"), {"username": "carol", "password": "correct-horse-battery", "next": next_url}
    )
    assert response.status_code == 302
    assert response["Location"] == _consent_url(login)
    assert browser.get(response["Location"]).status_code == 200


@pytest.mark.django_db
def test_consent_with_a_bad_form_on_an_expired_request_is_410(administrator, start_hub_login):
    login = start_hub_login()
    AgentAuthorization.objects.filter(pk=login.authorization.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    response = signed_in(administrator).post(
        reverse("console:consent"), {"authorization_id": str(login.authorization.id), "decision": "approve"}
    )
    assert response.status_code == 410


# --- query counts: list pages stay flat however many rows they show ------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("url_name", ["console:session_list", "console:client_list", "console:audit_list"])
def test_list_pages_do_not_query_per_row(admin_http, django_assert_max_num_queries, url_name):
    for n in range(30):
        session = AgentSessionFactory(client=ClientFactory())
        _record("tests.row", actor=f"a{n}", session_id=session.id, client_app_id=session.client.app_id)
    admin_http.get(reverse(url_name))  # warm the session and permission caches of this client
    with django_assert_max_num_queries(13):  # + the navigation's pending-approvals count
        response = admin_http.get(reverse(url_name))
    assert len(response.context["table"].rows) == 30


def test_consent_refuses_a_username_longer_than_a_principal_id(client, console_roles):
    from agent_client import pkce_pair
    from agent_runtime.models import AgentAuthorization
    from agent_runtime.services.agent_auth.authorizations import authorization_create
    from tests.factories import ClientFactory, RouteFactory, UserFactory

    ClientFactory(app_id="long-agent", allowed_routes=["orders"])
    RouteFactory(route_key="orders")
    _, challenge = pkce_pair()
    authorization, _ = authorization_create(
        client_app_id="long-agent",
        redirect_uri="http://127.0.0.1:53682/callback",
        state="state-123456",
        requested_routes=["orders"],
        device_label="laptop",
        code_challenge=challenge,
        ip="127.0.0.1",
    )
    user = UserFactory(username="u" * 129, roles=["auditor"])
    client.force_login(user)
    response = client.post(
        "/console/consent/",
        {"authorization_id": str(authorization.id), "decision": "approve", "routes": ["orders"]},
    )
    assert response.status_code == 400
    assert AgentAuthorization.objects.get(pk=authorization.id).status == "pending"
