"""The global tools list: every compiled tool of every provider, filtered by provider, risk, kind,
approval and the workspace that offers it, each row linking to the tool's page."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agent_runtime.models import ProviderTool
from tests.factories import RouteFactory, ToolProviderFactory, UserFactory
from tests.support.console import signed_in
from tests.support.providers_seed import load_spec, seed_console_providers

pytestmark = pytest.mark.django_db


def tools_url(**query) -> str:
    return reverse("console:tool_list") + ("?" + urlencode(query) if query else "")


def listed(response) -> list[tuple[str, str]]:
    return [(tool.provider.name, tool.name) for tool in response.context["object_list"]]


def rows(response) -> dict[tuple[str, str], list[str]]:
    return {(row[1].text, row[0].text): [cell.text for cell in row] for row in response.context["table"].rows}


@pytest.fixture
def seeded():
    return seed_console_providers()


def test_every_tool_of_every_provider_with_its_links(admin_http, seeded):
    response = admin_http.get(tools_url())

    assert response.status_code == 200
    assert len(listed(response)) == ProviderTool.objects.count()
    assert {provider for provider, _ in listed(response)} == {"crm", "shop"}
    table = rows(response)
    cancel = table[("shop", "order_cancel")]
    assert cancel[2:6] == ["order.write", "medium", "never", "write"]
    # writer lists order_cancel as a write; locked lists it too but is readonly, so only writer offers it.
    assert cancel[6] == "writer"
    refund = table[("shop", "refund_large")]
    assert refund[4] == "when amount > 500"
    assert table[("shop", "voucher_issue")][4] == "always (declared)"
    assert table[("shop", "voucher_issue")][6] == "no workspace"
    first = response.context["table"].rows[0]
    assert first[0].href == reverse("console:provider_tool_detail", args=[first[1].text, first[0].text])
    assert first[1].href == reverse("console:provider_detail", args=[first[1].text])


def test_filter_by_provider(admin_http, seeded):
    response = admin_http.get(tools_url(provider="crm"))
    assert listed(response)
    assert {provider for provider, _ in listed(response)} == {"crm"}
    assert len(listed(response)) == ProviderTool.objects.filter(provider__name="crm").count()


def test_filter_by_risk(admin_http, seeded):
    for risk in ("low", "medium", "high"):
        response = admin_http.get(tools_url(risk=risk))
        expected = set(ProviderTool.objects.filter(risk=risk).values_list("provider__name", "name"))
        assert set(listed(response)) == expected
    assert (
        ProviderTool.objects.filter(risk="high").exists()
        or ProviderTool.objects.filter(risk="medium").exists()
    )


def test_filter_by_kind(admin_http, seeded):
    writes = set(listed(admin_http.get(tools_url(kind="write"))))
    reads = set(listed(admin_http.get(tools_url(kind="read"))))
    assert {name for _, name in writes} == {
        "crm_note_add",
        "good_write",
        "order_cancel",
        "order_note_add",
        "refund_create",
        "refund_large",
        "voucher_issue",
    }
    assert writes and reads and not writes & reads
    assert len(writes | reads) == ProviderTool.objects.count()


def test_filter_by_approval(admin_http, seeded):
    always = set(listed(admin_http.get(tools_url(approval="always"))))
    conditional = set(listed(admin_http.get(tools_url(approval="conditional"))))
    never = set(listed(admin_http.get(tools_url(approval="never"))))
    assert always == {("shop", "refund_create"), ("shop", "voucher_issue")}
    assert conditional == {("shop", "order_note_add"), ("shop", "refund_large")}
    assert ("shop", "order_cancel") in never
    assert not always & conditional and not always & never and not conditional & never
    assert len(always | conditional | never) == ProviderTool.objects.count()
    for provider, name in always:
        tool = ProviderTool.objects.get(provider__name=provider, name=name)
        assert tool.risk == "high" or tool.compiled["approval"].get("required") is True


def test_filter_by_workspace_follows_the_catalog(admin_http, seeded):
    response = admin_http.get(tools_url(route="ro-desk"))
    names = {name for _, name in listed(response)}
    assert names and all(
        ProviderTool.objects.get(provider__name="shop", name=name).scope.startswith("order.")
        for name in names
    )
    assert "order_cancel" not in names  # a write: ro-desk lists no write_tools
    assert listed(admin_http.get(tools_url(route="quiet"))) == []  # agent direct tools off
    assert {p for p, _ in listed(admin_http.get(tools_url(route="other")))} == {"crm"}


def test_a_workspace_that_forces_approval_shows_it(admin_http, seeded):
    response = admin_http.get(tools_url(route="writer", approval="always"))
    table = rows(response)
    assert table[("shop", "order_cancel")][4] == "always (forced by writer)"
    never = {name for _, name in listed(admin_http.get(tools_url(route="writer", approval="never")))}
    assert "order_cancel" not in never


def test_filters_combine_and_an_unknown_value_is_shown_not_applied(admin_http, seeded):
    response = admin_http.get(tools_url(provider="shop", kind="write", route="writer"))
    assert {name for _, name in listed(response)} == {"order_cancel", "refund_large"}
    response = admin_http.get(tools_url(risk="extreme", name="order"))
    assert response.status_code == 200
    assert "risk" in response.context["filter_form"].errors
    assert {name for _, name in listed(response)} == set(
        ProviderTool.objects.filter(name__icontains="order").values_list("name", flat=True)
    )


def test_empty_states(admin_http):
    response = admin_http.get(tools_url())
    assert "No compiled tools yet: no tool provider has a good spec." in response.content.decode()
    response = admin_http.get(tools_url(provider=""))
    assert response.status_code == 200


@pytest.mark.parametrize("role", ["administrator", "approver", "auditor"])
def test_every_role_may_read_the_list(console_roles, role):
    assert signed_in(UserFactory(roles=[role])).get(tools_url()).status_code == 200


def test_the_nav_links_the_list(admin_http):
    nav = admin_http.get(reverse("console:dashboard")).context["console_nav"]
    assert {"label": "Tools", "url_name": "console:tool_list"} in nav


def test_the_list_costs_the_same_with_more_providers_and_workspaces(admin_http, seeded):
    def page_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert admin_http.get(tools_url(route="writer")).status_code == 200
        return len(queries)

    before = page_queries()
    for n in range(4):
        ToolProviderFactory(name=f"extra-{n}", spec=load_spec("catalog_crm"))
        RouteFactory(
            route_key=f"extra-{n}",
            tools={
                "sources": [{"provider": f"extra-{n}", "allow": ["*"]}],
                "agent_direct": {"enabled": True},
            },
        )
    assert page_queries() == before
    assert before <= 15
