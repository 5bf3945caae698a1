"""The audit list shows the client of every event that has one, and its client filter finds the
same rows: the recorded ``client_app_id``, else the client an event targets, else the client of
the agent session it names."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from tests.factories import AgentSessionFactory, ClientFactory


def _record(**kwargs):
    with transaction.atomic():
        return audit_record(actor=Actor.system("tests"), **kwargs)


@pytest.fixture
def events(db):
    shop = ClientFactory(app_id="shop")
    session = AgentSessionFactory(client=shop)
    return {
        "recorded": _record(action="agent_auth.token.issued", client_app_id="shop"),
        "targeted": _record(
            action="agent_runtime.client.token_rotated", target_type="client", target_id="shop"
        ),
        "by_session": _record(action="agent_auth.session.revoked", session_id=session.id),
        "other": _record(action="agent_runtime.route.updated", route_key="orders"),
        "elsewhere": _record(action="agent_auth.token.issued", client_app_id="crm"),
    }


def _client_column(response) -> dict[int, str]:
    table = response.context["table"]
    column = table.columns.index("Client")
    ids = [event.id for event in response.context["object_list"]]
    return {event_id: row[column].text for event_id, row in zip(ids, table.rows, strict=True)}


@pytest.mark.django_db
def test_every_event_with_a_client_shows_it(admin_http, events):
    response = admin_http.get(reverse("console:audit_list"))
    shown = _client_column(response)
    assert shown[events["recorded"].id] == "shop"
    assert shown[events["targeted"].id] == "shop"
    assert shown[events["by_session"].id] == "shop"
    assert shown[events["elsewhere"].id] == "crm"
    assert shown[events["other"].id] == "—"
    assert 'href="/console/audit/?client=shop"' in response.content.decode()


@pytest.mark.django_db
def test_client_filter_finds_the_rows_that_show_the_client(admin_http, events):
    response = admin_http.get(reverse("console:audit_list"), {"client": "shop"})
    found = [event.id for event in response.context["object_list"]]
    assert found == [events["by_session"].id, events["targeted"].id, events["recorded"].id]


@pytest.mark.django_db
def test_one_query_for_the_sessions_of_a_page(admin_http, events):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin_http.get(reverse("console:audit_list")).status_code == 200
        return len(captured)

    before = queries()
    for _ in range(5):
        _record(action="agent_auth.session.revoked", session_id=AgentSessionFactory().id)
    assert queries() == before
