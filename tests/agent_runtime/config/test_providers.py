"""``tool_providers`` as code: validation, secrets by reference, idempotent apply, inline specs, notes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from agent_runtime.config import (
    PROVIDER_SPEC_MAX_BYTES,
    ConfigError,
    validate_document,
    validate_tool_provider_config,
)
from agent_runtime.models import Client, ProviderTool, Route, ToolProvider
from agent_runtime.services.config_apply import config_apply, provider_upsert
from agent_runtime.services.providers import provider_secret_open
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_chain_verify
from bailing.audit.models import AuditEvent
from demo_business.spec import build_spec

ACTOR = Actor.system("tests")
SECRET = "shop-secret-" + "q" * 28
PROVIDER = {"name": "shop", "base_url": "https://shop.example.com", "secret_env": "SHOP_TOOL_SECRET"}


def _validate(**overrides) -> dict:
    return validate_tool_provider_config({**PROVIDER, **overrides}, path="tool_providers[0]")


def _error(data: dict) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        validate_tool_provider_config(data, path="p")
    return info.value


# --- Validation ---------------------------------------------------------------------------------------
def test_defaults_are_the_upstream_ones():
    """A tool provider's defaults are BailingHub's (docs/compatibility.md "Business contract")."""
    assert validate_tool_provider_config(
        {"name": "shop", "base_url": "https://shop.example.com"}, path="p"
    ) == {
        "name": "shop",
        "description": "",
        "enabled": True,
        "base_url": "https://shop.example.com",
        "spec_source": "url",
        "spec_url": "/.well-known/bailing/tools.json",
        "spec_inline": None,
        "spec_access_policy": "signed_required",
        "timeout_ms": 10000,
        "rate_limit_per_min": 120,
        # The hub's own addition (the provider bulkhead): unset means BAILING_PROVIDER_MAX_CONCURRENT_CALLS.
        "max_concurrent_calls": None,
        "auto_refresh_min": 0,
        "secret_env": None,
        "secret_file": None,
    }


@pytest.mark.parametrize(("value", "ok"), [(1, True), (256, True), (0, False), (257, False), ("2", False)])
def test_max_concurrent_calls_is_a_bounded_integer(value, ok):
    data = {"name": "shop", "base_url": "https://shop.example.com", "max_concurrent_calls": value}
    if ok:
        assert validate_tool_provider_config(data, path="p")["max_concurrent_calls"] == value
    else:
        with pytest.raises(ConfigError) as info:
            validate_tool_provider_config(data, path="p")
        assert info.value.path == "p.max_concurrent_calls"


def test_every_field_is_read():
    result = validate_tool_provider_config(
        {
            "name": "shop",
            "description": "Orders\nand refunds",
            "enabled": False,
            "base_url": "http://[::1]:8100/api",
            "spec_url": "/tools.json?v=2&x=%20",
            "spec_access_policy": "public_allowed",
            "timeout_ms": 60000,
            "rate_limit_per_min": 0,
            "auto_refresh_min": 1440,
            "secret_file": "var/shop-secret",
        },
        path="p",
    )
    assert result["enabled"] is False
    assert result["base_url"] == "http://[::1]:8100/api"
    assert result["spec_url"] == "/tools.json?v=2&x=%20"
    assert (result["timeout_ms"], result["rate_limit_per_min"], result["auto_refresh_min"]) == (
        60000,
        0,
        1440,
    )
    assert (result["secret_env"], result["secret_file"]) == (None, "var/shop-secret")


@pytest.mark.parametrize(
    "base_url",
    ["http://127.0.0.1:8100", "http://localhost", "http://127.8.9.1/x", "https://shop.example.com/"],
)
def test_accepted_base_urls(base_url):
    assert _validate(base_url=base_url)["base_url"] == base_url


@pytest.mark.parametrize(
    ("overrides", "path"),
    [
        ({"base_url": "http://shop.example.com"}, "p.base_url"),
        ({"base_url": "http://10.0.0.1:8100"}, "p.base_url"),
        ({"base_url": "ftp://shop.example.com"}, "p.base_url"),
        ({"base_url": "https://user:pw@shop.example.com"}, "p.base_url"),
        ({"base_url": "https://shop.example.com/?a=1"}, "p.base_url"),
        ({"base_url": "https://shop.example.com/#top"}, "p.base_url"),
        ({"base_url": "https://shop.example.com:99999"}, "p.base_url"),
        ({"base_url": "https://shöp.example.com"}, "p.base_url"),
        ({"base_url": "https:///path"}, "p.base_url"),
        ({"base_url": 5}, "p.base_url"),
        ({"spec_url": "https://shop.example.com/tools.json"}, "p.spec_url"),
        ({"spec_url": "//evil.example.com/tools.json"}, "p.spec_url"),
        ({"spec_url": "tools.json"}, "p.spec_url"),
        ({"spec_url": "/tools.json#x"}, "p.spec_url"),
        ({"spec_url": "/tools json"}, "p.spec_url"),
        ({"spec_url": "/a/../tools.json"}, "p.spec_url"),
        ({"spec_url": "/./tools.json"}, "p.spec_url"),
        ({"spec": {"openapi": "3.1.0"}}, "p.spec"),
        ({"spec_source": "inline"}, "p.spec"),
        ({"spec_source": "inline", "spec": {}, "spec_url": "/x"}, "p.spec_url"),
        ({"spec_source": "inline", "spec": []}, "p.spec"),
        ({"spec_source": "file"}, "p.spec_source"),
        ({"spec_access_policy": "legacy"}, "p.spec_access_policy"),
        ({"timeout_ms": 999}, "p.timeout_ms"),
        ({"timeout_ms": 60001}, "p.timeout_ms"),
        ({"timeout_ms": 5000.0}, "p.timeout_ms"),
        ({"rate_limit_per_min": -1}, "p.rate_limit_per_min"),
        ({"auto_refresh_min": 1441}, "p.auto_refresh_min"),
        ({"auto_refresh_min": True}, "p.auto_refresh_min"),
        ({"enabled": "yes"}, "p.enabled"),
        ({"name": "Shop"}, "p.name"),
        ({"secret": SECRET}, "p.secret"),
        ({"secret_file": "var/x"}, "p.secret_file"),
        ({"secret_env": "1BAD"}, "p.secret_env"),
        ({"secret_env": ""}, "p.secret_env"),
        ({"log_payload": True}, "p.log_payload"),
    ],
)
def test_invalid_items_name_the_path(overrides, path):
    assert _error({**PROVIDER, **overrides}).path == path


def test_required_fields_and_secret_message():
    assert _error({"name": "shop"}).path == "p.base_url"
    assert _error({"base_url": "https://x.example"}).path == "p.name"
    error = _error({**PROVIDER, "secret": SECRET})
    assert SECRET not in str(error)
    assert "secret_env or secret_file" in error.reason


def test_inline_yaml_specs_read_like_the_compiler_reads_yaml():
    spec = yaml.safe_load(
        "openapi: 3.1.0\ninfo: {title: t, version: 2024-05-01}\npaths: {}\n"
        "components: {responses: {200: {description: ok}}, x: {true: 1}}\n"
    )
    result = _validate(spec_source="inline", spec=spec)["spec_inline"]
    assert result["info"]["version"] == "2024-05-01"
    assert result["components"] == {"responses": {"200": {"description": "ok"}}, "x": {"true": 1}}


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"a": float("nan")}, "p.spec.a"),
        ({"a": [1, {2.5: 1}]}, 'p.spec.a[1]["2.5"]'),
        ({"a": {1, 2}}, "p.spec.a"),
        ({"a": "\ud800"}, "p.spec"),
        ({"a": "x" * PROVIDER_SPEC_MAX_BYTES}, "p.spec"),
    ],
)
def test_inline_specs_must_be_json(spec, path):
    assert _error({**PROVIDER, "spec_source": "inline", "spec": spec}).path == path


def test_documents_apply_clients_providers_knowledge_bases_then_routes():
    assert list(validate_document({})) == ["clients", "tool_providers", "knowledge_bases", "routes"]
    with pytest.raises(ConfigError) as info:
        validate_document({"tool_providers": [PROVIDER, {**PROVIDER, "description": "again"}]})
    assert info.value.path == "tool_providers[1].name"


# --- Apply --------------------------------------------------------------------------------------------
def _apply(document: dict, tmp_path: Path, *args: str) -> list[str]:
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    out = io.StringIO()
    call_command("bailing_apply", str(path), *args, stdout=out, stderr=io.StringIO())
    return out.getvalue().splitlines()


def _apply_error(document: dict, tmp_path: Path) -> str:
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("bailing_apply", str(path), stdout=io.StringIO(), stderr=err)
    return err.getvalue()


def _without_notes(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("  ")]


def _actions() -> list[str]:
    return list(AuditEvent.objects.order_by("id").values_list("action", flat=True))


@pytest.mark.django_db
def test_apply_seals_the_env_secret_and_reapplying_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_TOOL_SECRET", SECRET)
    document = {"tool_providers": [PROVIDER]}
    lines = _apply(document, tmp_path)
    assert lines == [
        "provider shop: created",
        "  note: the spec is not fetched by apply: run manage.py bailing_provider_refresh shop",
        "applied: 1 created, 0 updated, 0 unchanged",
    ]
    provider = ToolProvider.objects.get(name="shop")
    assert provider.secret_encrypted.startswith("v1.")
    assert SECRET not in provider.secret_encrypted
    assert provider_secret_open(provider=provider) == SECRET
    assert _actions() == ["agent_runtime.provider.created", "agent_runtime.provider.secret_changed"]
    assert AuditEvent.objects.get(action="agent_runtime.provider.secret_changed").data == {"previous": "none"}

    state = (provider.secret_encrypted, provider.updated_at, AuditEvent.objects.count())
    lines = _apply(document, tmp_path)
    assert _without_notes(lines) == ["provider shop: unchanged", "applied: 0 created, 0 updated, 1 unchanged"]
    provider.refresh_from_db()
    assert (provider.secret_encrypted, provider.updated_at, AuditEvent.objects.count()) == state

    monkeypatch.setenv("SHOP_TOOL_SECRET", SECRET + "-new")
    assert _apply(document, tmp_path, "--dry-run")[0] == "provider shop: updated (fields: secret)"
    provider.refresh_from_db()
    assert provider_secret_open(provider=provider) == SECRET
    lines = _apply(document, tmp_path)
    assert lines[0] == "provider shop: updated (fields: secret)"
    provider.refresh_from_db()
    assert provider_secret_open(provider=provider) == SECRET + "-new"
    assert _actions()[-1] == "agent_runtime.provider.secret_changed"
    assert AuditEvent.objects.order_by("-id").first().data == {"previous": "set"}

    lines = _apply({"tool_providers": [{**PROVIDER, "timeout_ms": 2000}]}, tmp_path)
    assert lines[0] == "provider shop: updated (fields: timeout_ms)"
    assert AuditEvent.objects.order_by("-id").first().data == {"fields": ["timeout_ms"]}
    assert audit_chain_verify().ok


@pytest.mark.django_db
def test_secret_files_are_read_relative_to_the_repository_or_absolute(tmp_path):
    absolute = tmp_path / "secret"
    absolute.write_text(SECRET + "\r\n\n", encoding="utf-8")
    document = {"tool_providers": [{**PROVIDER, "secret_env": None}]}
    del document["tool_providers"][0]["secret_env"]
    document["tool_providers"][0]["secret_file"] = str(absolute)
    _apply(document, tmp_path)
    assert provider_secret_open(provider=ToolProvider.objects.get(name="shop")) == SECRET

    relative = Path(settings.BASE_DIR) / "var" / f"test-provider-secret-{tmp_path.name}"
    relative.write_text(SECRET + "-relative\n", encoding="utf-8")
    try:
        document["tool_providers"][0]["secret_file"] = str(relative.relative_to(settings.BASE_DIR))
        assert _apply(document, tmp_path)[0] == "provider shop: updated (fields: secret)"
    finally:
        relative.unlink()
    assert provider_secret_open(provider=ToolProvider.objects.get(name="shop")) == SECRET + "-relative"


@pytest.mark.django_db
def test_missing_or_bad_secret_sources_are_config_errors_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv("SHOP_TOOL_SECRET", raising=False)
    client = {"app_id": "first-client", "name": "First"}
    secret_file = tmp_path / "secret"
    cases = [
        (PROVIDER, "tool_providers[0].secret_env"),
        ({**PROVIDER, "secret_env": "SHOP_EMPTY_SECRET"}, "tool_providers[0].secret_env"),
        (
            {"name": "shop", "base_url": "https://x.example", "secret_file": str(tmp_path / "missing")},
            "tool_providers[0].secret_file",
        ),
        (
            {"name": "shop", "base_url": "https://x.example", "secret_file": str(secret_file)},
            "tool_providers[0].secret_file",
        ),
        (
            {"name": "shop", "base_url": "https://x.example", "secret_file": str(tmp_path)},
            "tool_providers[0].secret_file",
        ),
    ]
    monkeypatch.setenv("SHOP_EMPTY_SECRET", "")
    secret_file.write_bytes(b"bad\xffsecret")
    for provider, path in cases:
        err = _apply_error({"clients": [client], "tool_providers": [provider]}, tmp_path)
        assert err.startswith(f"error at {path}: ")
    secret_file.write_text("two\nlines\n", encoding="utf-8")
    err = _apply_error({"tool_providers": [cases[3][0]]}, tmp_path)
    assert err.startswith("error at tool_providers[0].secret_file: ")
    assert "two" not in err and "lines" not in err
    secret_file.write_bytes(b"x" * (64 * 1024 + 1))
    assert _apply_error({"tool_providers": [cases[3][0]]}, tmp_path).startswith(
        "error at tool_providers[0].secret_file: "
    )
    assert not Client.objects.exists()
    assert not ToolProvider.objects.exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_a_provider_without_secret_reference_keeps_its_secret(tmp_path, monkeypatch):
    bare = {"name": "shop", "base_url": "https://shop.example.com"}
    lines = _apply({"tool_providers": [bare]}, tmp_path)
    assert (
        "  note: no secret yet: set secret_env or secret_file (tool calls and signed spec fetches need it)"
        in lines
    )
    monkeypatch.setenv("SHOP_TOOL_SECRET", SECRET)
    _apply({"tool_providers": [PROVIDER]}, tmp_path)
    lines = _apply({"tool_providers": [bare]}, tmp_path)
    assert _without_notes(lines) == ["provider shop: unchanged", "applied: 0 created, 0 updated, 1 unchanged"]
    assert not any("no secret yet" in line for line in lines)
    assert provider_secret_open(provider=ToolProvider.objects.get(name="shop")) == SECRET


@pytest.mark.django_db
def test_after_a_secret_key_change_reapplying_reseals_the_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_TOOL_SECRET", SECRET)
    _apply({"tool_providers": [PROVIDER]}, tmp_path)
    with override_settings(SECRET_KEY="rotated-" + "r" * 60):
        lines = _apply({"tool_providers": [PROVIDER]}, tmp_path)
        assert lines[0] == "provider shop: updated (fields: secret)"
        assert provider_secret_open(provider=ToolProvider.objects.get(name="shop")) == SECRET
        assert AuditEvent.objects.order_by("-id").first().data == {"previous": "unreadable"}
        assert _apply({"tool_providers": [PROVIDER]}, tmp_path)[0] == "provider shop: unchanged"


@pytest.mark.django_db
def test_inline_specs_are_compiled_and_stored_by_apply(tmp_path):
    inline = {
        "name": "inline-shop",
        "base_url": "http://127.0.0.1:8100",
        "spec_source": "inline",
        "spec": build_spec(),
    }
    document = {"tool_providers": [inline]}
    lines = _apply(document, tmp_path, "--dry-run")
    assert "  note: inline spec will be compiled and stored: 6 tools, 0 warnings" in lines
    assert not ToolProvider.objects.exists()

    lines = _apply(document, tmp_path)
    assert lines[0] == "provider inline-shop: created"
    assert "  note: inline spec compiled and stored: 6 tools, 0 warnings" in lines
    provider = ToolProvider.objects.get(name="inline-shop")
    assert provider.spec_json == build_spec() == provider.spec_inline
    assert provider.last_refresh_status == "ok"
    assert ProviderTool.objects.filter(provider=provider).count() == 6
    assert _actions().count("agent_runtime.provider.spec_stored") == 1

    events = AuditEvent.objects.count()
    lines = _apply(document, tmp_path)
    assert lines[0] == "provider inline-shop: unchanged"
    assert not any("inline spec" in line for line in lines)
    assert AuditEvent.objects.count() == events

    smaller = build_spec()
    del smaller["paths"][next(iter(smaller["paths"]))]
    lines = _apply({"tool_providers": [{**inline, "spec": smaller}]}, tmp_path)
    assert lines[0] == "provider inline-shop: updated (fields: spec_inline)"
    assert ProviderTool.objects.filter(provider=provider).count() < 6
    stored = AuditEvent.objects.filter(action="agent_runtime.provider.spec_stored").order_by("-id").first()
    assert stored.data["removed"]


@pytest.mark.django_db
def test_an_inline_spec_that_does_not_compile_is_a_config_error(tmp_path):
    err = _apply_error(
        {
            "clients": [{"app_id": "first-client", "name": "First"}],
            "tool_providers": [
                {
                    "name": "inline-shop",
                    "base_url": "https://x.example",
                    "spec_source": "inline",
                    "spec": {"swagger": "2.0"},
                }
            ],
        },
        tmp_path,
    )
    assert err.startswith("error at tool_providers[0].spec: ")
    assert not Client.objects.exists()


@pytest.mark.django_db
def test_routes_naming_unknown_providers_get_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_TOOL_SECRET", SECRET)
    route = {
        "route_key": "desk",
        "name": "Desk",
        "tools": {"sources": [{"provider": "shop", "allow": ["*"]}, {"provider": "nowhere", "allow": ["*"]}]},
    }
    lines = _apply({"tool_providers": [PROVIDER], "routes": [route]}, tmp_path)
    assert lines.index("provider shop: created") < lines.index("route desk: created")
    assert "  note: tools.sources names tool providers that do not exist: nowhere" in lines
    assert Route.objects.filter(route_key="desk").exists()
    # The provider now exists in the database: a document naming only the route does not note it.
    lines = _apply(
        {"routes": [{**route, "tools": {"sources": [{"provider": "shop", "allow": ["*"]}]}}]}, tmp_path
    )
    assert not any("note" in line for line in lines)


@pytest.mark.django_db
def test_url_providers_note_the_refresh_command_until_a_spec_exists(tmp_path, monkeypatch):
    note = "  note: the spec is not fetched by apply: run manage.py bailing_provider_refresh shop"
    monkeypatch.setenv("SHOP_TOOL_SECRET", SECRET)
    assert note in _apply({"tool_providers": [PROVIDER]}, tmp_path)
    # Once a spec was fetched, an unchanged provider needs no reminder...
    ToolProvider.objects.update(spec_json={"openapi": "3.1.0", "paths": {}})
    assert note not in _apply({"tool_providers": [PROVIDER]}, tmp_path)
    # ...a changed one does (the spec may now come from elsewhere)...
    v2 = {**PROVIDER, "spec_url": "/v2/tools.json"}
    assert note in _apply({"tool_providers": [v2]}, tmp_path)
    # ...and so does one that never got a spec.
    ToolProvider.objects.update(spec_json=None)
    lines = _apply({"tool_providers": [v2]}, tmp_path)
    assert lines[0] == "provider shop: unchanged"
    assert note in lines


@pytest.mark.django_db
def test_provider_upsert_service(monkeypatch):
    data = validate_tool_provider_config(
        {
            "name": "inline-shop",
            "base_url": "https://x.example",
            "spec_source": "inline",
            "spec": build_spec(),
        },
        path="p",
    )
    provider, action = provider_upsert(data=data, actor=ACTOR, secret=SECRET)
    assert action == "created"
    assert provider_secret_open(provider=provider) == SECRET
    assert ProviderTool.objects.filter(provider=provider).count() == 6
    assert provider_upsert(data=data, actor=ACTOR, secret=SECRET)[1] == "unchanged"
    assert provider_upsert(data=data, actor=ACTOR)[1] == "unchanged"
    assert provider_upsert(data={**data, "enabled": False}, actor=ACTOR)[1] == "updated"


@pytest.mark.django_db
def test_no_secret_in_plans_rows_or_audit(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_TOOL_SECRET", SECRET)
    plan = config_apply(document={"tool_providers": [PROVIDER]}, dry_run=False, actor=ACTOR)
    monkeypatch.setenv("SHOP_TOOL_SECRET", SECRET + "-two")
    plan_two = config_apply(document={"tool_providers": [PROVIDER]}, dry_run=False, actor=ACTOR)
    row = ToolProvider.objects.values().get()
    sealed = row.pop("secret_encrypted")
    for text in [
        repr(plan),
        repr(plan_two),
        json.dumps(row, default=str),
        json.dumps(list(AuditEvent.objects.values("data", "target_id"))),
    ]:
        assert SECRET not in text
    assert SECRET not in sealed
