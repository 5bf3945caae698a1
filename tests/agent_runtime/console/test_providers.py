"""What the tool provider pages show and what their Refresh button does.

Providers are seeded through the real services (compile + ``provider_spec_store``, sealed secret via
``provider_set_secret``); exposure columns come from real workspaces; Refresh runs against the real
Demo Shop process and against a closed port.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_runtime.console.providers import approval_summary, base_origin
from agent_runtime.models import ProviderTool, ToolProvider
from agent_runtime.services.providers import provider_refresh
from agent_runtime.tools import GUIDANCE_MAX_BYTES, GUIDANCE_MAX_CHARS, compile_spec
from bailing.audit.actor import Actor
from demo_business.spec import build_spec
from tests.factories import RouteFactory, ToolProviderFactory
from tests.support.console import signed_in
from tests.support.demo_business import running_demo_business
from tests.support.providers_seed import (
    SHOP_SECRET,
    closed_port,
    load_spec,
    seed_console_providers,
    shop_spec,
    url_provider,
)

pytestmark = pytest.mark.django_db

SHOP_TOOLS = [
    "customer_profile_get",
    "good_read",
    "good_write",
    "guidance_over_chars",
    "inventory_list",
    "long_description",
    "order_cancel",
    "order_get",
    "order_note_add",
    "order_search",
    "refund_create",
    "refund_large",
    "staff_list",
    "voucher_issue",
]
# Operations of the seeded shop spec that the compiler left out, with their finding's code.
SHOP_LEFT_OUT = {
    "bad_risk_value": "acc_invalid",
    "bad_unknown_field": "acc_invalid",
    "bad_wrong_type": "acc_invalid",
    "bad_version": "acc_unsupported_version",
    "bad_missing_scope": "acc_invalid",
    "bad_not_object": "acc_invalid",
    "bad_enabled_type": "acc_invalid",
}


@pytest.fixture
def seeded(console_roles):
    return seed_console_providers()


def rows_by_key(table) -> dict[str, dict[str, object]]:
    """``{first cell text: {column: cell}}`` of a console table."""
    return {row[0].text: dict(zip(table.columns, row, strict=True)) for row in table.rows}


def texts(table) -> dict[str, dict[str, str]]:
    return {
        key: {column: cell.text for column, cell in row.items()} for key, row in rows_by_key(table).items()
    }


def detail(http, name: str):
    response = http.get(reverse("console:provider_detail", args=[name]))
    assert response.status_code == 200
    return response


def tool_page(http, provider: str, tool: str):
    response = http.get(reverse("console:provider_tool_detail", args=[provider, tool]))
    assert response.status_code == 200
    return response


def flashed(response) -> list[tuple[str, str]]:
    return [(message.level_tag, str(message)) for message in response.context["messages"]]


# --- list -----------------------------------------------------------------------------------------------


def test_list_shows_each_provider_with_refresh_probe_and_counts(seeded, admin_http):
    broken = url_provider("billing", f"http://127.0.0.1:{closed_port()}/billing/v1", "billing-secret-value")
    assert provider_refresh(provider=broken, actor=Actor.system("tests")).error == "spec_unreachable"

    response = admin_http.get(reverse("console:provider_list"))

    assert response.status_code == 200
    rows = rows_by_key(response.context["table"])
    assert list(rows) == ["billing", "crm", "shop"]
    shop, billing = rows["shop"], rows["billing"]
    assert shop["Name"].href == reverse("console:provider_detail", args=["shop"])
    assert (shop["Status"].text, shop["Status"].tone) == ("enabled", "ok")
    assert shop["Base URL and spec"].text == "https://shop.example.test"  # origin only, no path
    assert shop["Base URL and spec"].sub == "inline"
    assert shop["Last refresh"].kind == "time"
    assert (shop["Result"].text, shop["Result"].tone, shop["Result"].sub) == ("ok", "ok", "")
    assert shop["Access probe"].kind == "muted"  # an inline spec is never fetched
    assert shop["Tools"].text == str(len(SHOP_TOOLS))
    assert shop["Warnings"].text == str(len(seeded.shop.compile_warnings))
    assert rows["crm"]["Tools"].text == "3"
    # The crm fixture's only findings are its undescribed inputs (compile caveats count as warnings).
    crm_codes = {warning["code"] for warning in seeded.crm.compile_warnings}
    assert crm_codes == {"param_missing_description"}
    assert rows["crm"]["Warnings"].text == str(len(seeded.crm.compile_warnings))

    assert billing["Base URL and spec"].text == broken.base_url.removesuffix("/billing/v1")
    assert billing["Base URL and spec"].sub == "url · signed_required"
    assert (billing["Result"].text, billing["Result"].tone, billing["Result"].sub) == (
        "failed",
        "bad",
        "spec_unreachable",
    )
    assert (billing["Access probe"].text, billing["Access probe"].tone) == ("inconclusive", "bad")
    assert billing["Tools"].text == "0"


def test_list_when_there_are_no_providers(admin_http):
    response = admin_http.get(reverse("console:provider_list"))
    assert response.status_code == 200
    assert response.context["table"].rows == []


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://shop.example.test/api/v2", "https://shop.example.test"),
        ("https://shop.example.test:8443/", "https://shop.example.test:8443"),
        ("http://127.0.0.1:8100", "http://127.0.0.1:8100"),
        ("http://[::1]:8100/x", "http://[::1]:8100"),
        ("not a url", ""),
        ("https://host:99999/", ""),
    ],
)
def test_base_origin(url, origin):
    assert base_origin(url) == origin


# --- detail ---------------------------------------------------------------------------------------------


def test_detail_shows_configuration_and_spec_status(seeded, admin_http):
    response = detail(admin_http, "shop")
    body = response.content.decode()
    provider = response.context["provider"]
    assert provider.has_secret is True
    assert "secret set on" in body
    assert seeded.shop.spec_sha256[:12] in body
    assert seeded.shop.spec_sha256 in body  # full value in the title, for copying
    assert "https://shop.example.test/api/v2" in body
    assert response.context["tool_count"] == len(SHOP_TOOLS)
    assert response.context["disabled_count"] == len(SHOP_LEFT_OUT)
    assert response.context["refresh_error_code"] == ""
    # No access probe for an inline spec: the table says so instead of showing an empty row.
    assert response.context["probe_table"].rows == []
    assert response.context["authz_probe_table"].rows == []
    assert "No authorization probe yet" in body


@pytest.mark.parametrize(
    ("probe", "tone", "answer", "subject"),
    [
        ({"status": "suspect", "http": 200, "reason": "nobody_served"}, "bad", "HTTP 200", "yes"),
        ({"status": "inconclusive", "reason": "timeout"}, "warn", "—", "yes"),
        ({"status": "pass", "http": 401, "reason": "nobody_refused"}, "ok", "HTTP 401", "yes"),
    ],
)
def test_authz_probe_outcomes_get_their_badge_tone(seeded, admin_http, probe, tone, answer, subject):
    ToolProvider.objects.filter(pk=seeded.shop.pk).update(
        authz_probe={
            **probe,
            "tool": "authz_probe",
            "mode": "dedicated",
            "requires_subject": True,
            "at": "2026-01-02T03:04:05+00:00",
        }
    )
    table = detail(admin_http, "shop").context["authz_probe_table"]
    [row] = table.rows
    cells = dict(zip(table.columns, row, strict=True))
    assert (cells["Status"].text, cells["Status"].tone) == (probe["status"], tone)
    assert (cells["Answer"].text, cells["Subject required"].text) == (answer, subject)
    assert cells["Reason"].text == probe["reason"]


def test_a_skipped_authz_probe_shows_only_its_reason(seeded, admin_http):
    ToolProvider.objects.filter(pk=seeded.shop.pk).update(
        authz_probe={"status": "skipped", "reason": "inline_spec", "at": "2026-01-02T03:04:05+00:00"}
    )
    table = detail(admin_http, "shop").context["authz_probe_table"]
    cells = dict(zip(table.columns, table.rows[0], strict=True))
    assert (cells["Status"].text, cells["Status"].tone, cells["Reason"].text) == (
        "skipped",
        "off",
        "inline_spec",
    )
    assert [cells[name].text for name in ("Mode", "Target", "Answer", "Subject required")] == ["—"] * 4


def test_detail_of_a_provider_without_secret(seeded, admin_http):
    response = detail(admin_http, "crm")
    assert response.context["provider"].has_secret is False
    assert "no secret" in response.content.decode()
    assert "secret set on" not in response.content.decode()


def test_tools_table_lists_every_compiled_tool_with_governance(seeded, admin_http):
    table = detail(admin_http, "shop").context["tools_table"]
    rows = texts(table)
    assert list(rows) == SHOP_TOOLS
    cells = rows_by_key(table)
    assert cells["order_get"]["Tool"].href == reverse(
        "console:provider_tool_detail", args=["shop", "order_get"]
    )
    assert cells["order_get"]["Tool"].sub == "GET /orders/{order_id}"
    assert cells["order_cancel"]["Tool"].sub == "POST /orders/{order_id}/cancel"
    assert rows["order_get"]["Scope"] == "order.read"
    assert rows["order_get"]["Kind"] == "read-only"
    assert cells["order_get"]["Kind"].sub == "idempotent"
    assert rows["order_cancel"]["Kind"] == "write"
    assert (rows["refund_create"]["Risk"], cells["refund_create"]["Risk"].tone) == ("high", "bad")
    assert rows["refund_create"]["Approval"] == "always (high risk)"
    assert rows["voucher_issue"]["Approval"] == "always (declared)"
    assert rows["refund_large"]["Approval"] == "when amount > 500"
    assert rows["order_note_add"]["Approval"] == 'when priority == "urgent"'
    assert rows["order_get"]["Approval"] == "never"
    assert rows["long_description"]["Warnings"] == "1"
    assert rows["guidance_over_chars"]["Warnings"] == "1"
    assert rows["order_get"]["Warnings"] == "1"  # its path parameter has no description
    assert rows["refund_large"]["Warnings"] == "0"


@pytest.mark.parametrize(
    ("approval", "risk", "summary"),
    [
        ({"required": False, "when": []}, "low", "never"),
        ({"required": True, "when": []}, "high", "always (high risk)"),
        (
            {"required": True, "when": [{"param": "amount", "op": ">", "value": 1}]},
            "medium",
            "always (declared)",
        ),
        (
            {"required": False, "when": [{"param": "amount", "op": ">=", "value": 500.5}]},
            "medium",
            "when amount >= 500.5",
        ),
        (
            {
                "required": False,
                "when": [
                    {"param": "country", "op": "in", "value": ["DE", "FR"]},
                    {"param": "note", "op": "exists"},
                ],
            },
            "low",
            'when country in ["DE", "FR"] or note exists',
        ),
    ],
)
def test_approval_summary(approval, risk, summary):
    assert approval_summary(risk=risk, approval=approval) == summary


def test_exposure_per_workspace(seeded, admin_http):
    table = detail(admin_http, "shop").context["tools_table"]
    # Only workspaces naming this provider get a column, in route-key order ("other" names crm only).
    assert table.columns[5:-1] == ["locked", "quiet", "ro-desk", "writer"]
    rows = texts(table)

    # ro-desk: reads of order.* only; nothing else of the provider.
    assert rows["order_get"]["ro-desk"] == "read"
    assert rows["order_search"]["ro-desk"] == "read"
    assert rows["inventory_list"]["ro-desk"] == "—"
    assert rows["order_cancel"]["ro-desk"] == "—"

    # writer (readwrite): listed writes only, forced approval where the route adds it.
    assert rows["order_get"]["writer"] == "read"
    assert rows["refund_large"]["writer"] == "write"
    assert rows["order_cancel"]["writer"] == "write + forced approval"
    assert rows["order_note_add"]["writer"] == "—"  # a write not in write_tools
    assert rows["voucher_issue"]["writer"] == "—"

    # locked: permission readonly hides a write even when it is listed.
    assert rows["order_cancel"]["locked"] == "—"
    assert rows["inventory_list"]["locked"] == "read"

    # quiet: agent direct tools off, nothing is exposed.
    assert {row["quiet"] for row in rows.values()} == {"—"}

    notes = detail(admin_http, "shop").context["routes_note"]
    assert "locked: permission readonly" in notes
    assert "quiet: permission full, agent direct tools off" in notes


def test_exposure_of_a_disabled_workspace_is_marked_in_its_heading(seeded, admin_http):
    RouteFactory(
        route_key="archive", enabled=False, tools={"sources": [{"provider": "shop", "allow": ["*"]}]}
    )
    table = detail(admin_http, "shop").context["tools_table"]
    assert "archive (disabled)" in table.columns


def test_exposure_follows_the_catalog_when_two_sources_claim_a_name(seeded, admin_http):
    # crm also has order_get: a workspace naming both withholds that ambiguous name entirely.
    RouteFactory(
        route_key="both",
        tools={
            "sources": [{"provider": "shop", "allow": ["*"]}, {"provider": "crm", "allow": ["*"]}],
            "agent_direct": {"enabled": True},
        },
    )
    shop_rows = texts(detail(admin_http, "shop").context["tools_table"])
    crm_rows = texts(detail(admin_http, "crm").context["tools_table"])
    assert shop_rows["order_get"]["both"] == "—"
    assert crm_rows["order_get"]["both"] == "—"
    assert shop_rows["inventory_list"]["both"] == "read"
    assert crm_rows["crm_contact_get"]["both"] == "read"


def test_warnings_table_lists_disabled_operations_and_caveats(seeded, admin_http):
    table = detail(admin_http, "shop").context["warnings_table"]
    assert table.columns == ["Code", "Severity", "Tool", "Spec location", "Detail"]
    # Undescribed inputs of the borrowed fixtures are caveats too; the other findings are one per tool.
    undescribed = [row for row in table.rows if row[0].text == "param_missing_description"]
    others = [row for row in table.rows if row[0].text != "param_missing_description"]
    assert undescribed and {(row[0].tone, row[1].text) for row in undescribed} == {("warn", "warning")}
    by_tool = {row[2].text: row for row in others}
    for tool, code in SHOP_LEFT_OUT.items():
        code_cell, severity, _, path, _ = by_tool[tool]
        assert (code_cell.text, code_cell.kind, code_cell.tone) == (code, "badge", "bad")
        assert severity.text == "error"
        assert path.text.startswith("#/paths/~1lab~1acc~1")
    assert by_tool["long_description"][0].text == "tool_description_truncated"
    assert (by_tool["long_description"][1].text, by_tool["long_description"][0].tone) == ("warning", "warn")
    assert by_tool["guidance_over_chars"][0].text == "tool_usage_guidance_truncated"
    assert len(others) == len(SHOP_LEFT_OUT) + 2


def test_detail_query_count_does_not_grow_with_tools_or_workspaces(
    seeded, admin_http, django_assert_max_num_queries
):
    for n in range(5):
        RouteFactory(
            route_key=f"extra-{n}",
            tools={"sources": [{"provider": "shop", "allow": ["*"]}], "agent_direct": {"enabled": True}},
        )
    # session + user + provider + tools + routes + providers of those routes (+ messages/perms)
    with django_assert_max_num_queries(9):  # + the navigation's pending-approvals count
        detail(admin_http, "shop")


# --- tool page ------------------------------------------------------------------------------------------


def test_tool_page_of_a_write_with_conditional_approval(seeded, admin_http):
    response = tool_page(admin_http, "shop", "refund_large")
    context = response.context
    body = response.content.decode()
    tool = ProviderTool.objects.get(provider=seeded.shop, name="refund_large")
    assert context["approval_summary"] == "when amount > 500"
    assert [[cell.text for cell in row] for row in context["rules_table"].rows] == [["amount", ">", "500"]]
    assert "Refund above the desk limit" in body  # the approval prompt
    assert texts(context["params_table"]) == {
        "amount": {
            "Parameter": "amount",
            "Location": "body",
            "Required": "yes",
            "Type": "number",
            "Style": "—",
        },
        "reason": {
            "Parameter": "reason",
            "Location": "body",
            "Required": "no",
            "Type": "string",
            "Style": "—",
        },
    }
    assert tool.execution_fingerprint in body
    assert '<pre class="json">' in body and "&quot;additionalProperties&quot;: false" in body
    assert texts(context["exposure_table"]) == {
        "locked": {"Workspace": "locked", "Permission": "readonly", "Exposure": "—"},
        "quiet": {"Workspace": "quiet", "Permission": "full", "Exposure": "—"},
        "ro-desk": {"Workspace": "ro-desk", "Permission": "full", "Exposure": "—"},
        "writer": {"Workspace": "writer", "Permission": "readwrite", "Exposure": "write"},
    }
    assert context["warnings_table"].rows == []
    assert "description truncated" not in body


def test_tool_page_path_parameters(seeded, admin_http):
    context = tool_page(admin_http, "shop", "order_get").context
    assert texts(context["params_table"])["order_id"] == {
        "Parameter": "order_id",
        "Location": "path",
        "Required": "yes",
        "Type": "string",
        "Style": "—",
    }
    assert context["rules_table"].rows == []
    assert context["approval_summary"] == "never"


def test_tool_page_flags_a_truncated_description(seeded, admin_http):
    response = tool_page(admin_http, "shop", "long_description")
    body = response.content.decode()
    assert response.context["compiled"]["description_truncated"] is True
    assert "description truncated" in body
    assert [row[0].text for row in response.context["warnings_table"].rows] == ["tool_description_truncated"]


def test_tool_page_previews_truncated_guidance_with_its_bounds(seeded, admin_http):
    response = tool_page(admin_http, "shop", "guidance_over_chars")
    body = response.content.decode()
    guidance = response.context["guidance"]
    assert guidance["truncated"] is True
    assert guidance["source_chars"] > GUIDANCE_MAX_CHARS
    assert f"{guidance['source_chars']} / {GUIDANCE_MAX_CHARS} characters" in body
    assert f"{guidance['source_bytes']} / {GUIDANCE_MAX_BYTES} bytes" in body
    assert '<span class="badge badge-warn">truncated</span>' in body
    assert '<pre class="guidance">' in body
    assert guidance["text"][:2000] in body
    assert "description truncated" not in body


def test_tool_page_of_complete_guidance(seeded, admin_http):
    response = tool_page(admin_http, "shop", "order_get")
    body = response.content.decode()
    assert response.context["guidance"]["truncated"] is False
    assert '<span class="badge badge-ok">complete</span>' in body
    assert "Use when the user names one order." in body


# --- what is never shown --------------------------------------------------------------------------------


def test_secret_and_raw_spec_never_appear_on_any_page(seeded, admin_http, auditor):
    sealed = ToolProvider.objects.get(name="shop").secret_encrypted
    assert sealed.startswith("v1.")
    raw_spec_title = shop_spec()["info"]["title"]
    urls = [
        reverse("console:provider_list"),
        reverse("console:provider_detail", args=["shop"]),
        *(reverse("console:provider_tool_detail", args=["shop", name]) for name in SHOP_TOOLS),
    ]
    for http in (admin_http, signed_in(auditor)):
        for url in urls:
            response = http.get(url)
            assert response.status_code == 200
            body = response.content.decode()
            assert SHOP_SECRET not in body
            assert sealed not in body
            assert sealed[3:40] not in body
            assert raw_spec_title not in body
    # The pages never even load the sealed secret or the raw spec.
    provider = admin_http.get(reverse("console:provider_detail", args=["shop"])).context["provider"]
    assert {"secret_encrypted", "spec_json", "spec_inline"} <= provider.get_deferred_fields()
    for row in admin_http.get(reverse("console:provider_list")).context["object_list"]:
        assert {"secret_encrypted", "spec_json", "spec_inline"} <= row.get_deferred_fields()


# --- refresh ---------------------------------------------------------------------------------------------


def test_refresh_against_the_demo_business_then_a_closed_port(console_roles, admin_http):
    expected = sorted(tool.name for tool in compile_spec(build_spec(), provider="demo-shop").tools)
    with running_demo_business() as shop:
        provider = url_provider("demo-shop", shop.base_url, shop.secret)
        url = reverse("console:provider_refresh", args=["demo-shop"])

        response = admin_http.post(url, follow=True)

        assert response.redirect_chain == [(reverse("console:provider_detail", args=["demo-shop"]), 302)]
        [(level, text)] = flashed(response)
        assert level == "success"
        n = len(expected)
        assert f"{n} tools ({n} added, 0 removed, 0 changed)" in text
        assert sorted(texts(response.context["tools_table"])) == expected
        assert response.context["provider"].last_refresh_status == "ok"
        probe = rows_by_key(response.context["probe_table"])["protected"]
        assert probe["Signed request"].text == "HTTP 200"
        assert probe["Unsigned request"].text in {"HTTP 401", "HTTP 403", "HTTP 404"}
        assert probe["Invalid signature"].text in {"HTTP 401", "HTTP 403", "HTTP 404"}
        assert probe["Reason"].text == "negative_probes_refused"
        # Next to it, the authorization probe: the Demo Shop refuses the nobody subject.
        [authz] = response.context["authz_probe_table"].rows
        cells = dict(zip(response.context["authz_probe_table"].columns, authz, strict=True))
        assert (cells["Status"].text, cells["Status"].kind, cells["Status"].tone) == ("pass", "badge", "ok")
        assert (cells["Mode"].text, cells["Target"].text, cells["Answer"].text) == (
            "dedicated",
            "authz_probe",
            "HTTP 403",
        )
        assert (cells["Subject required"].text, cells["Reason"].text) == ("yes", "nobody_refused")
        assert cells["Observed"].kind == "time"
        body = response.content.decode()
        headings = [
            body.index(f"<h2>{h}</h2>") for h in ("Access probe", "Authorization probe", "Compiled tools")
        ]
        assert headings == sorted(headings)
        assert shop.secret not in body

        # Unchanged spec: nothing added, removed or changed.
        [(level, text)] = flashed(admin_http.post(url, follow=True))
        assert (level, f"{n} tools (0 added, 0 removed, 0 changed)" in text) == ("success", True)

    # The business system moves away: the refresh fails and the last good spec stays.
    ToolProvider.objects.filter(pk=provider.pk).update(base_url=f"http://127.0.0.1:{closed_port()}")
    response = admin_http.post(url, follow=True)
    [(level, text)] = flashed(response)
    assert level == "error"
    assert "spec_unreachable" in text
    assert response.context["refresh_error_code"] == "spec_unreachable"
    assert response.context["provider"].last_refresh_status == "failed"
    assert sorted(texts(response.context["tools_table"])) == expected
    assert ProviderTool.objects.filter(provider=provider).count() == len(expected)
    assert (
        rows_by_key(response.context["probe_table"])["inconclusive"]["Reason"].text
        == "signed_request_no_answer"
    )
    listed = rows_by_key(admin_http.get(reverse("console:provider_list")).context["table"])["demo-shop"]
    assert (listed["Result"].text, listed["Result"].sub, listed["Tools"].text) == (
        "failed",
        "spec_unreachable",
        str(len(expected)),
    )


def test_refresh_with_a_wrong_secret_names_the_error_and_keeps_the_tools(console_roles, admin_http):
    spec = load_spec("catalog_crm")
    with running_demo_business() as shop:
        url_provider("demo-shop", shop.base_url, "not-the-demo-secret", spec=spec)
        response = admin_http.post(reverse("console:provider_refresh", args=["demo-shop"]), follow=True)
    [(level, text)] = flashed(response)
    assert level == "error"
    assert "spec_http_status" in text
    assert "not-the-demo-secret" not in response.content.decode()
    assert sorted(texts(response.context["tools_table"])) == ["crm_contact_get", "crm_note_add", "order_get"]


def test_refresh_of_a_disabled_provider_changes_nothing(console_roles, admin_http):
    spec = load_spec("catalog_crm")
    provider = ToolProviderFactory(name="crm", spec=spec, spec_inline=spec, enabled=False)
    before = ToolProvider.objects.get(pk=provider.pk).last_refresh_at
    response = admin_http.post(reverse("console:provider_refresh", args=["crm"]), follow=True)
    [(level, text)] = flashed(response)
    assert level == "error"
    assert "provider_disabled" in text
    assert ToolProvider.objects.get(pk=provider.pk).last_refresh_at == before
