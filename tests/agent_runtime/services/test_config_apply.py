"""`bailing_apply` / `config_apply` (declarative, idempotent, all-or-nothing) and `bailing_client_token`."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from agent_runtime.config import ConfigError, validate_client_config
from agent_runtime.models import Client, Route
from agent_runtime.services.config_apply import client_upsert, config_apply, route_upsert
from agent_runtime.tokens import CLIENT_TOKEN_PREFIX, looks_like, secret_matches
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_chain_verify
from bailing.audit.models import AuditEvent
from knowledge.models import KnowledgeBase
from tests.factories import ClientFactory

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "hub.yaml"

DOCUMENT = {
    "clients": [
        {"app_id": "demo-agent", "name": "Demo agent", "hub_consent": True, "allowed_routes": ["demo"]},
        {
            "app_id": "shop-agent",
            "name": "Shop agent",
            "agent_authorize_url": "https://shop.example.com/agent/authorize",
            "allowed_routes": ["*"],
        },
    ],
    "routes": [
        {
            "route_key": "demo",
            "name": "Demo",
            "permission": "readwrite",
            "target_config": {"system_prompt": "Help with orders.", "model": "m"},
            "tools": {
                "sources": [{"provider": "orders", "allow": ["order.*"]}],
                "agent_direct": {
                    "enabled": True,
                    "write_tools": ["cancel_order"],
                    "force_approval_tools": ["cancel_order"],
                },
            },
            "agent_client": {"enabled": True},
        },
        {
            "route_key": "handbook",
            "name": "Handbook",
            "knowledge": {"kb_id": "handbook"},
            "agent_client": {"enabled": True},
        },
    ],
}


def _write(tmp_path: Path, document, name: str = "hub.yaml") -> Path:
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps(document), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    return path


def _apply(path: Path, *args: str) -> tuple[list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("bailing_apply", str(path), *args, stdout=out, stderr=err)
    return out.getvalue().splitlines(), err.getvalue()


def _apply_error(path: Path, *args: str) -> str:
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("bailing_apply", str(path), *args, stdout=io.StringIO(), stderr=err)
    return err.getvalue()


def _state() -> tuple:
    return (
        sorted(Client.objects.values_list("app_id", "name", "updated_at")),
        sorted(Route.objects.values_list("route_key", "name", "updated_at")),
        AuditEvent.objects.count(),
    )


# --- Apply --------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_apply_creates_everything_then_reapply_is_a_no_op(tmp_path):
    path = _write(tmp_path, DOCUMENT)
    lines, _ = _apply(path)
    assert lines[0] == "client demo-agent: created"
    assert lines[1].startswith("  note: no Client Token yet")
    assert "client shop-agent: created" in lines
    assert "route demo: created" in lines
    assert "route handbook: created" in lines
    assert lines[-1] == "applied: 4 created, 0 updated, 0 unchanged"

    client = Client.objects.get(app_id="shop-agent")
    assert client.agent_authorize_url == "https://shop.example.com/agent/authorize"
    assert client.token_hash is None
    assert client.rate_limit_per_min == 60
    route = Route.objects.get(route_key="demo")
    assert route.permission == "readwrite"
    assert route.tools["agent_direct"]["force_approval_tools"] == ["cancel_order"]
    assert route.memory == {}
    assert Route.objects.get(route_key="handbook").permission is None

    before = _state()
    lines, _ = _apply(path)
    assert [line for line in lines if not line.startswith("  ")] == [
        "client demo-agent: unchanged",
        "client shop-agent: unchanged",
        "route demo: unchanged",
        "route handbook: unchanged",
        "applied: 0 created, 0 updated, 4 unchanged",
    ]
    assert _state() == before


@pytest.mark.django_db
def test_json_files_apply_the_same_way(tmp_path):
    lines, _ = _apply(_write(tmp_path, DOCUMENT, "hub.json"))
    assert lines[-1] == "applied: 4 created, 0 updated, 0 unchanged"
    lines, _ = _apply(_write(tmp_path, DOCUMENT, "hub.yml"))
    assert lines[-1] == "applied: 0 created, 0 updated, 4 unchanged"


@pytest.mark.django_db
def test_update_reports_changed_fields_and_audits_only_names(tmp_path):
    _apply(_write(tmp_path, DOCUMENT))
    changed = json.loads(json.dumps(DOCUMENT))
    changed["routes"][0]["name"] = "Demo desk"
    changed["routes"][0]["target_config"]["model"] = "secret-model-name"
    changed["routes"][0]["tools"]["max_calls"] = 9
    events_before = AuditEvent.objects.count()

    lines, _ = _apply(_write(tmp_path, changed))
    assert "route demo: updated (fields: name, target_config, tools)" in lines
    assert "route handbook: unchanged" in lines
    assert lines[-1] == "applied: 0 created, 1 updated, 3 unchanged"

    route = Route.objects.get(route_key="demo")
    assert route.name == "Demo desk"
    assert route.tools["max_calls"] == 9
    events = list(AuditEvent.objects.order_by("id"))[events_before:]
    assert [(e.action, e.route_key, e.actor_type, e.actor) for e in events] == [
        ("agent_runtime.route.updated", "demo", "system", "bailing_apply")
    ]
    assert events[0].data == {"fields": ["name", "target_config", "tools"]}
    assert "secret-model-name" not in json.dumps(events[0].data)


@pytest.mark.django_db
def test_removing_a_field_resets_it_to_its_default(tmp_path):
    _apply(_write(tmp_path, DOCUMENT))
    changed = json.loads(json.dumps(DOCUMENT))
    del changed["clients"][0]["hub_consent"]
    del changed["routes"][0]["permission"]
    lines, _ = _apply(_write(tmp_path, changed))
    assert "client demo-agent: updated (fields: hub_consent)" in lines
    assert "route demo: updated (fields: permission)" in lines
    assert Client.objects.get(app_id="demo-agent").hub_consent is False
    assert Route.objects.get(route_key="demo").permission is None


@pytest.mark.django_db
def test_audit_records_one_event_per_created_item(tmp_path):
    _apply(_write(tmp_path, DOCUMENT))
    events = AuditEvent.objects.order_by("id")
    assert [(e.action, e.client_app_id or e.route_key) for e in events] == [
        ("agent_runtime.client.created", "demo-agent"),
        ("agent_runtime.client.created", "shop-agent"),
        ("agent_runtime.route.created", "demo"),
        ("agent_runtime.route.created", "handbook"),
    ]
    assert all(e.actor == "bailing_apply" and e.actor_type == "system" for e in events)
    assert "agent_authorize_url" in events[1].data["fields"]
    assert audit_chain_verify().ok


@pytest.mark.django_db
def test_dry_run_writes_nothing(tmp_path):
    path = _write(tmp_path, DOCUMENT)
    lines, _ = _apply(path, "--dry-run")
    assert "client demo-agent: created" in lines
    assert lines[-1] == "dry run: 4 created, 0 updated, 0 unchanged; nothing was written"
    assert (Client.objects.count(), Route.objects.count(), AuditEvent.objects.count()) == (0, 0, 0)

    _apply(path)
    changed = json.loads(json.dumps(DOCUMENT))
    changed["clients"][1]["rate_limit_per_min"] = 5
    before = _state()
    lines, _ = _apply(_write(tmp_path, changed), "--dry-run")
    assert "client shop-agent: updated (fields: rate_limit_per_min)" in lines
    assert lines[-1] == "dry run: 0 created, 1 updated, 3 unchanged; nothing was written"
    assert _state() == before
    assert Client.objects.get(app_id="shop-agent").rate_limit_per_min == 60


@pytest.mark.django_db
def test_an_error_in_the_last_item_means_nothing_is_written(tmp_path):
    bad = json.loads(json.dumps(DOCUMENT))
    bad["routes"][1]["tools"] = {"agent_direct": {"enabled": True, "write_tools": ["cancel_*"]}}
    stderr = _apply_error(_write(tmp_path, bad))
    assert "error at routes[1].tools.agent_direct.write_tools[0]: " in stderr
    assert (Client.objects.count(), Route.objects.count(), AuditEvent.objects.count()) == (0, 0, 0)


@pytest.mark.django_db
def test_an_error_leaves_existing_rows_untouched(tmp_path):
    _apply(_write(tmp_path, DOCUMENT))
    before = _state()
    bad = json.loads(json.dumps(DOCUMENT))
    bad["clients"][0]["name"] = "Renamed"
    bad["routes"].append(dict(bad["routes"][0]))
    stderr = _apply_error(_write(tmp_path, bad))
    assert "error at routes[2].route_key: " in stderr
    assert _state() == before


@pytest.mark.django_db
def test_config_apply_raises_config_error_with_path():
    with pytest.raises(ConfigError) as info:
        config_apply(
            document={"clients": [{"app_id": "x1", "name": "X", "token": "bct_x"}]},
            dry_run=False,
            actor=Actor.system(),
        )
    assert info.value.path == "clients[0].token"
    assert Client.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("hub.yaml", "clients: [\n  - app_id: x\n"),
        ("hub.yaml", "clients: []\nclients: []\n"),
        ("hub.yaml", "- just\n- a list\n"),
        ("hub.yaml", ""),
        ("hub.json", '{"clients": [], "clients": []}'),
        ("hub.json", '{"clients": [{"app_id": "x1", "name": "X", "rate_limit_per_min": NaN}]}'),
        ("hub.json", "{"),
        ("hub.txt", "clients: []\n"),
    ],
)
def test_unreadable_files_are_rejected(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CommandError):
        call_command("bailing_apply", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert Client.objects.count() == 0


@pytest.mark.django_db
def test_missing_and_non_utf8_files_are_rejected(tmp_path):
    with pytest.raises(CommandError):
        call_command("bailing_apply", str(tmp_path / "absent.yaml"), stdout=io.StringIO())
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"clients:\n  - app_id: caf\xe9\n")
    with pytest.raises(CommandError):
        call_command("bailing_apply", str(path), stdout=io.StringIO())


@pytest.mark.django_db
def test_apply_never_touches_an_existing_token(tmp_path):
    client = ClientFactory(app_id="demo-agent")
    token = client._token
    lines, _ = _apply(_write(tmp_path, DOCUMENT))
    assert lines[0].startswith("client demo-agent: updated (fields: ")
    assert "  note: no Client Token yet: run manage.py bailing_client_token demo-agent" not in lines
    assert "  note: no Client Token yet: run manage.py bailing_client_token shop-agent" in lines
    client.refresh_from_db()
    assert secret_matches(token, client.token_hash)
    assert client.name == "Demo agent"


@pytest.mark.django_db
def test_unknown_allowed_routes_are_noted(tmp_path):
    document = {"clients": [{"app_id": "lonely", "name": "Lonely", "allowed_routes": ["nowhere", "*"]}]}
    lines, _ = _apply(_write(tmp_path, document))
    assert "  note: allowed_routes names routes that do not exist: nowhere" in lines


@pytest.mark.django_db
def test_the_example_file_is_valid_and_idempotent(monkeypatch):
    # The example's tool provider reads its secret from this variable at apply time.
    monkeypatch.setenv("SHOP_ORDERS_TOOL_SECRET", "example-shop-orders-secret")
    lines, _ = _apply(EXAMPLE, "--dry-run")
    assert lines[-1] == "dry run: 6 created, 0 updated, 0 unchanged; nothing was written"
    _apply(EXAMPLE)
    lines, _ = _apply(EXAMPLE)
    assert lines[-1] == "applied: 0 created, 0 updated, 6 unchanged"
    assert Client.objects.get(app_id="desk-agent").hub_consent is True
    assert (
        Client.objects.get(app_id="shop-agent").agent_authorize_url
        == "https://shop.example.com/agent/authorize"
    )
    assert Route.objects.get(route_key="order-desk").tools["agent_direct"]["force_approval_tools"] == [
        "cancel_order"
    ]
    assert Route.objects.get(route_key="handbook").tools == {}
    handbook = KnowledgeBase.objects.get(kb_id="staff-handbook")
    assert list(handbook.writers.values_list("app_id", flat=True)) == ["shop-agent"]
    assert Route.objects.get(route_key="handbook").knowledge["fusion"]["rrf_k"] == 60


# --- Services -----------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_upsert_services_return_the_action():
    data = validate_client_config({"app_id": "svc-client", "name": "Svc"}, path="c")
    client, action = client_upsert(data=data, actor=Actor.system("test"))
    assert (client.app_id, action) == ("svc-client", "created")
    assert client_upsert(data=data, actor=Actor.system("test"))[1] == "unchanged"
    client, action = client_upsert(data={**data, "enabled": False}, actor=Actor.system("test"))
    assert (client.enabled, action) == (False, "updated")

    route_data = {
        "route_key": "svc",
        "name": "Svc",
        "description": "",
        "enabled": True,
        "target": "llm",
        "target_config": {},
        "permission": None,
        "audience": {},
        "memory": {"recent_messages": 3},
        "knowledge": {},
        "tools": {},
        "agent_client": {},
        "data_policy": {},
        "run_config": {"retry": {"max": 1}},
    }
    route, action = route_upsert(data=route_data, actor=Actor.system("test"))
    assert action == "created"
    route.refresh_from_db()
    assert route.run_config == {"retry": {"max": 1}}
    assert route_upsert(data=route_data, actor=Actor.system("test"))[1] == "unchanged"
    assert AuditEvent.objects.filter(action="agent_runtime.client.updated").get().data == {
        "fields": ["enabled"]
    }


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_of_one_client_make_one_row_and_one_event():
    data = validate_client_config({"app_id": "race-client", "name": "Race"}, path="c")
    barrier = threading.Barrier(2)
    results: list[str] = []
    errors: list[BaseException] = []

    def worker():
        try:
            barrier.wait()
            results.append(client_upsert(data=data, actor=Actor.system("race"))[1])
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results) == ["created", "unchanged"]
    assert Client.objects.filter(app_id="race-client").count() == 1
    assert AuditEvent.objects.filter(action="agent_runtime.client.created").count() == 1


# --- bailing_client_token -----------------------------------------------------------------------------
@pytest.mark.django_db
def test_client_token_command_rotates_and_prints_the_token_last(tmp_path):
    _apply(_write(tmp_path, DOCUMENT))
    out = io.StringIO()
    call_command("bailing_client_token", "demo-agent", stdout=out, stderr=io.StringIO())
    first = out.getvalue().splitlines()[-1]
    assert looks_like(first, CLIENT_TOKEN_PREFIX)
    client = Client.objects.get(app_id="demo-agent")
    assert secret_matches(first, client.token_hash)

    out = io.StringIO()
    call_command("bailing_client_token", "demo-agent", stdout=out, stderr=io.StringIO())
    second = out.getvalue().splitlines()[-1]
    client.refresh_from_db()
    assert second != first
    assert secret_matches(second, client.token_hash)
    assert not secret_matches(first, client.token_hash)
    rotations = AuditEvent.objects.filter(
        action="agent_runtime.client.token_rotated", client_app_id="demo-agent"
    )
    assert rotations.count() == 2
    assert {e.actor for e in rotations} == {"bailing_client_token"}
    assert all(first not in json.dumps(e.data) and second not in json.dumps(e.data) for e in rotations)

    # With a token issued, re-applying no longer asks for one and leaves it alone.
    lines, _ = _apply(_write(tmp_path, DOCUMENT))
    assert lines[:2] == ["client demo-agent: unchanged", "client shop-agent: unchanged"]
    client.refresh_from_db()
    assert secret_matches(second, client.token_hash)


@pytest.mark.django_db
def test_client_token_command_rejects_unknown_app_id():
    with pytest.raises(CommandError):
        call_command("bailing_client_token", "nobody", stdout=io.StringIO(), stderr=io.StringIO())
    assert AuditEvent.objects.count() == 0


def _sign_in_client(app_id: str, *, mcp_sign_in: bool) -> dict:
    return {"app_id": app_id, "name": app_id, "hub_consent": True, "mcp_sign_in": mcp_sign_in}


@pytest.mark.django_db
def test_mcp_sign_in_moves_when_the_old_holder_is_listed_first():
    config_apply(
        document={"clients": [_sign_in_client("first", mcp_sign_in=True)]},
        dry_run=False,
        actor=Actor.system(),
    )
    config_apply(
        document={
            "clients": [
                _sign_in_client("first", mcp_sign_in=False),
                _sign_in_client("second", mcp_sign_in=True),
            ]
        },
        dry_run=False,
        actor=Actor.system(),
    )
    assert list(Client.objects.filter(mcp_sign_in=True).values_list("app_id", flat=True)) == ["second"]


@pytest.mark.django_db
def test_mcp_sign_in_held_by_another_client_is_a_config_error_and_writes_nothing():
    config_apply(
        document={"clients": [_sign_in_client("first", mcp_sign_in=True)]},
        dry_run=False,
        actor=Actor.system(),
    )
    with pytest.raises(ConfigError) as info:
        config_apply(
            document={
                "clients": [
                    _sign_in_client("second", mcp_sign_in=True),
                    _sign_in_client("first", mcp_sign_in=False),
                ]
            },
            dry_run=False,
            actor=Actor.system(),
        )
    assert info.value.path == "clients[0].mcp_sign_in"
    assert list(Client.objects.values_list("app_id", "mcp_sign_in")) == [("first", True)]
