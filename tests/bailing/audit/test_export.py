"""The audit export and its offline verification: ``approvals_audit_export`` writes real sealed events
with a signed manifest; the standalone verifier (``bailing/audit/export_verify.py``, run as a copy in
a temporary directory with ``python -I``: no project, no Django) and ``approvals_audit_verify --file``
accept a clean export and name the first bad line, with its stable code, of every tampered one."""

from __future__ import annotations

import ast
import base64
import json
import os
import stat
import subprocess
import sys
from datetime import UTC, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from agent_client import pkce_pair
from bailing.api.hashing import canonical_sha256
from bailing.audit import export_verify
from bailing.audit.actor import Actor
from bailing.audit.ledger import GENESIS_HASH, audit_event_content, audit_record, audit_seal
from bailing.audit.models import AuditEvent
from tests.factories import ClientFactory
from tests.support.audit import audit_tampering

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]
PROJECT_PACKAGES = {
    "bailing",
    "agent_runtime",
    "knowledge",
    "mcp_server",
    "approvals",
    "front",
    "benchmarks",
    "chaos",
    "demo_business",
    "agent_client",
    "tests",
    "django",
    "rest_framework",
}


def record(n: int, **fields) -> AuditEvent:
    with transaction.atomic():
        return audit_record(
            actor=Actor.system("pytest"),
            action="tests.audit.exported",
            data={"n": n, "text": "café ✓", "float": 0.1, "nested": {"b": [1, 2.5, None]}},
            **fields,
        )


def ledger(length: int) -> list[AuditEvent]:
    ids = [record(n).pk for n in range(length)]
    audit_seal()
    return list(AuditEvent.objects.filter(pk__in=ids).order_by("chain_seq"))


@pytest.fixture
def keys(tmp_path, capsys) -> tuple[Path, Path]:
    """The operator's key, made by the command, and its public key as printed by it."""
    private = tmp_path / "audit-export.pem"
    call_command("approvals_audit_export", "--generate-key", str(private))
    generated = capsys.readouterr().out
    call_command("approvals_audit_export", "--key", str(private), "--print-public-key")
    printed = capsys.readouterr().out
    assert printed == generated and printed.startswith("-----BEGIN PUBLIC KEY-----")
    public = tmp_path / "audit-export.pub"
    public.write_text(printed)
    return private, public


@pytest.fixture
def verifier(tmp_path) -> Path:
    """The standalone verifier as the command ships it, alone in a directory of its own."""
    directory = tmp_path / "auditor"
    call_command("approvals_audit_export", "--write-verifier", str(directory))
    script = directory / "verify-audit-export.py"
    assert script.read_bytes() == (ROOT / "bailing/audit/export_verify.py").read_bytes()
    assert script.stat().st_mode & stat.S_IXUSR
    return script


def export(keys, path: Path, *extra: str) -> Path:
    call_command("approvals_audit_export", "--key", str(keys[0]), "--output", str(path), *extra)
    return path


def run_script(script: Path, export_path: Path, public: Path) -> subprocess.CompletedProcess:
    """The verifier as an auditor runs it: isolated mode (no PYTHON* variables, no script directory
    or user site on the path), from the auditor's directory."""
    return subprocess.run(
        [sys.executable, "-I", str(script), str(export_path), "--public-key", str(public), "--json"],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )


def script_result(script, export_path, public) -> dict:
    done = run_script(script, export_path, public)
    result = json.loads(done.stdout)
    assert done.returncode == (0 if result["ok"] else 1), done.stderr
    if not result["ok"]:
        assert done.stderr == (
            f"audit export broken at line {result['line']}: {result['code']}: {result['reason']}\n"
        )
    return result


def command_failure(export_path, public) -> tuple[int, str]:
    with pytest.raises(CommandError) as info:
        call_command("approvals_audit_verify", "--file", str(export_path), "--public-key", str(public))
    assert info.value.returncode == 1
    message = str(info.value)
    prefix = "audit export broken at line "
    assert message.startswith(prefix)
    line, code, _ = message[len(prefix) :].split(": ", 2)
    return int(line), code


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def canonical_line(value: dict) -> bytes:
    return export_verify.canonical_json(value) + b"\n"


# --- a clean export --------------------------------------------------------------------------------------


def test_a_clean_export_holds_every_link_and_verifies_with_the_script_and_the_command(
    keys, verifier, tmp_path, capsys
):
    events = ledger(5)
    path = export(keys, tmp_path / "ledger.jsonl")
    out = capsys.readouterr().out
    assert "exported 5 sealed audit events (positions 1..5" in out
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not (tmp_path / "ledger.jsonl.partial").exists()

    lines = [json.loads(line) for line in lines_of(path)]
    manifest, rows = lines[0], lines[1:]
    assert (manifest["type"], manifest["format"]) == ("manifest", export_verify.FORMAT)
    assert (manifest["first_seq"], manifest["last_seq"], manifest["count"]) == (1, 5, 5)
    assert manifest["anchor_hash"] == GENESIS_HASH
    assert manifest["head_hash"] == events[-1].chain_hash
    assert manifest["range"] == {"since": None, "until": None}
    assert set(manifest["exporter"]) == {"hub", "version", "public_url", "host"}
    # The signature: Ed25519 over the manifest without its signature, by the operator's key.
    public_key = export_verify.load_public_key(keys[1].read_bytes())
    public_key.verify(base64.b64decode(manifest["signature"]), export_verify.manifest_signed_bytes(manifest))
    assert manifest["key_sha256"] == export_verify.public_key_sha256(public_key)
    # Every link of the chain, each event's fields exactly as the ledger hashed them.
    for row, event in zip(rows, events, strict=True):
        assert row == {
            "type": "event",
            "seq": event.chain_seq,
            "prev_hash": event.prev_hash,
            "content_hash": event.content_hash,
            "chain_hash": event.chain_hash,
            "content": audit_event_content(event),
        }
        assert canonical_sha256(row["content"]) == event.content_hash

    result = script_result(verifier, path, keys[1])
    assert result["ok"] is True
    assert (result["count"], result["first_seq"], result["last_seq"]) == (5, 1, 5)
    assert result["head_hash"] == events[-1].chain_hash
    call_command("approvals_audit_verify", "--file", str(path), "--public-key", str(keys[1]))
    assert capsys.readouterr().out.startswith("audit export ok: 5 events, positions 1..5")


def test_the_script_imports_nothing_of_the_project_or_django(keys, verifier, tmp_path):
    ledger(2)
    path = export(keys, tmp_path / "ledger.jsonl")
    # What it imports, as written: the standard library and cryptography only.
    tree = ast.parse(verifier.read_text(encoding="utf-8"))
    imported = {
        (alias.name if isinstance(node, ast.Import) else node.module).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported - set(sys.stdlib_module_names) == {"cryptography"}
    # What it imports, as run: every module Python loaded (-X importtime lists each one).
    done = subprocess.run(
        [sys.executable, "-I", "-X", "importtime", str(verifier), str(path), "--public-key", str(keys[1])],
        cwd=verifier.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("audit export ok: 2 events")
    loaded = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "cryptography" in loaded and "json" in loaded
    assert not loaded & PROJECT_PACKAGES


def test_the_unsealed_tail_is_not_exported_and_the_output_says_so(keys, verifier, tmp_path, capsys):
    ledger(3)
    record(99)  # unsealed: --no-seal leaves it so
    path = export(keys, tmp_path / "ledger.jsonl", "--no-seal")
    out = capsys.readouterr().out
    assert "exported 3 sealed audit events (positions 1..3" in out
    assert "1 unsealed events not exported" in out
    assert len(lines_of(path)) == 4
    assert script_result(verifier, path, keys[1])["count"] == 3
    # Without --no-seal the command seals first, so the event is exported.
    export(keys, tmp_path / "sealed.jsonl")
    assert "unsealed events not exported" not in capsys.readouterr().out
    assert len(lines_of(tmp_path / "sealed.jsonl")) == 5


# --- a range export --------------------------------------------------------------------------------------


def test_a_range_export_is_the_contiguous_stretch_anchored_at_its_previous_hash(
    keys, verifier, tmp_path, capsys
):
    """[since, until): from the lowest position recorded at or after since to the highest recorded
    before until; an event sealed in between but recorded earlier (a late committer) is included."""
    before, inside, late, last_inside, after = (record(n) for n in range(5))
    start = inside.created_at
    end = last_inside.created_at + timedelta(microseconds=1)
    with audit_tampering():  # the late committer: recorded before since, sealed after `inside`
        event = AuditEvent.objects.get(pk=late.pk)
        event.created_at = before.created_at - timedelta(seconds=30)
        AuditEvent.objects.filter(pk=late.pk).update(
            created_at=event.created_at, content_hash=canonical_sha256(audit_event_content(event))
        )
    after_moment = after.created_at
    assert after_moment >= end
    audit_seal()
    chain = {e.pk: e for e in AuditEvent.objects.all()}
    path = export(keys, tmp_path / "range.jsonl", "--since", start.isoformat(), "--until", end.isoformat())
    assert "exported 3 sealed audit events (positions 2..4" in capsys.readouterr().out
    lines = [json.loads(line) for line in lines_of(path)]
    manifest = lines[0]
    assert (manifest["first_seq"], manifest["last_seq"], manifest["count"]) == (2, 4, 3)
    assert manifest["anchor_hash"] == chain[before.pk].chain_hash != GENESIS_HASH
    assert manifest["head_hash"] == chain[last_inside.pk].chain_hash
    assert manifest["range"] == {"since": start.isoformat(), "until": end.isoformat()}
    assert lines[1]["prev_hash"] == manifest["anchor_hash"]
    assert [line["seq"] for line in lines[1:]] == [2, 3, 4]
    result = script_result(verifier, path, keys[1])
    assert (result["ok"], result["first_seq"], result["anchor_hash"]) == (
        True,
        2,
        chain[before.pk].chain_hash,
    )
    call_command("approvals_audit_verify", "--file", str(path), "--public-key", str(keys[1]))
    # A naive time is UTC; a range with nothing sealed in it exports nothing.
    naive = (after_moment + timedelta(hours=1)).astimezone(UTC).replace(tzinfo=None)
    with pytest.raises(CommandError) as info:
        export(keys, tmp_path / "empty.jsonl", "--since", naive.isoformat())
    assert info.value.returncode == 1 and "no sealed audit event" in str(info.value)
    assert not (tmp_path / "empty.jsonl").exists() and not (tmp_path / "empty.jsonl.partial").exists()


def test_consecutive_ranges_join_without_a_gap(keys, verifier, tmp_path):
    events = ledger(4)
    boundary = events[2].created_at.isoformat()
    first = export(keys, tmp_path / "first.jsonl", "--until", boundary)
    second = export(keys, tmp_path / "second.jsonl", "--since", boundary)
    one, two = script_result(verifier, first, keys[1]), script_result(verifier, second, keys[1])
    assert (one["first_seq"], one["last_seq"], two["first_seq"], two["last_seq"]) == (1, 2, 3, 4)
    assert two["anchor_hash"] == one["head_hash"] == events[1].chain_hash


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--since", "yesterday"], "not an ISO 8601 time"),
        (["--since", "2026-02-01", "--until", "2026-01-01"], "--since must be before --until"),
    ],
)
def test_bad_ranges_are_refused(keys, tmp_path, arguments, message):
    ledger(1)
    with pytest.raises(CommandError) as info:
        export(keys, tmp_path / "x.jsonl", *arguments)
    assert info.value.returncode == 2 and message in str(info.value)


# --- tampering: the first bad line, with its stable code -------------------------------------------------


def _edit_content(lines):
    event = json.loads(lines[3])
    event["content"]["data"]["n"] = 1000
    lines[3] = canonical_line(event)


def _edit_consistently(lines):
    """Line 4 rewritten with hashes that match it: the next link no longer holds."""
    event = json.loads(lines[3])
    event["content"]["actor"] = "someone-else"
    event["content_hash"] = export_verify.content_hash_of(event["content"])
    event["chain_hash"] = export_verify.chain_hash_of(event["prev_hash"], event["content_hash"])
    lines[3] = canonical_line(event)


def _edit_last_consistently(lines):
    event = json.loads(lines[-1])
    event["content"]["action"] = "tests.audit.rewritten"
    event["content_hash"] = export_verify.content_hash_of(event["content"])
    event["chain_hash"] = export_verify.chain_hash_of(event["prev_hash"], event["content_hash"])
    lines[-1] = canonical_line(event)


def _reorder(lines):
    lines[2], lines[3] = lines[3], lines[2]


def _drop_middle(lines):
    del lines[3]


def _drop_last(lines):
    del lines[-1]


def _append_copy(lines):
    lines.append(lines[-1])


def _append_next_link(lines):
    """A well-formed event continuing the chain from the head: still one too many."""
    head = json.loads(lines[-1])
    content = {**head["content"], "action": "tests.audit.appended"}
    content_hash = export_verify.content_hash_of(content)
    lines.append(
        canonical_line(
            {
                "type": "event",
                "seq": head["seq"] + 1,
                "prev_hash": head["chain_hash"],
                "content_hash": content_hash,
                "chain_hash": export_verify.chain_hash_of(head["chain_hash"], content_hash),
                "content": content,
            }
        )
    )


def _truncate_mid_line(lines):
    lines[-1] = lines[-1][: len(lines[-1]) // 2]


def _truncate_mid_line_in_the_middle(lines):
    del lines[4:]
    lines[3] = lines[3][:40]


def _not_canonical(lines):
    lines[2] = lines[2].replace(b'"seq":', b'"seq": ', 1)


def _manifest_count_changed(lines):
    manifest = json.loads(lines[0])
    manifest["count"], manifest["last_seq"] = 4, 4
    lines[0] = canonical_line(manifest)


def _manifest_signed_by_another_key(lines):
    manifest = json.loads(lines[0])
    lines[0] = canonical_line(export_verify.manifest_sign(manifest, Ed25519PrivateKey.generate()))


def _manifest_dropped(lines):
    del lines[0]


def _emptied(lines):
    lines.clear()


# (tampering, first bad line, code) on an export of 5 events: line 1 the manifest, lines 2-6 events.
TAMPERING = [
    (_edit_content, 4, "content_hash_mismatch"),
    (_edit_consistently, 5, "link_broken"),
    (_edit_last_consistently, 6, "head_mismatch"),
    (_reorder, 3, "sequence_mismatch"),
    (_drop_middle, 4, "sequence_mismatch"),
    (_drop_last, 6, "missing_lines"),
    (_append_copy, 7, "extra_line"),
    (_append_next_link, 7, "extra_line"),
    (_truncate_mid_line, 6, "truncated"),
    (_truncate_mid_line_in_the_middle, 4, "truncated"),
    (_not_canonical, 3, "not_canonical"),
    (_manifest_count_changed, 1, "signature_invalid"),
    (_manifest_signed_by_another_key, 1, "signature_invalid"),
    (_manifest_dropped, 1, "manifest_missing"),
    (_emptied, 1, "manifest_missing"),
]


@pytest.mark.parametrize(
    ("tamper", "line", "code"), TAMPERING, ids=[t[0].__name__.strip("_") for t in TAMPERING]
)
def test_a_tampered_export_fails_at_the_first_bad_line_in_the_script_and_the_command(
    keys, verifier, tmp_path, tamper, line, code
):
    ledger(5)
    path = export(keys, tmp_path / "ledger.jsonl")
    lines = lines_of(path)
    tamper(lines)
    path.write_bytes(b"".join(lines))
    result = script_result(verifier, path, keys[1])
    assert (result["ok"], result["line"], result["code"]) == (False, line, code)
    assert code in export_verify.CODES
    assert command_failure(path, keys[1]) == (line, code)


def test_an_export_checked_against_another_public_key_fails_at_the_manifest(keys, verifier, tmp_path):
    ledger(2)
    path = export(keys, tmp_path / "ledger.jsonl")
    other = tmp_path / "other.pub"
    other.write_text(export_verify.public_key_pem(Ed25519PrivateKey.generate().public_key()))
    result = script_result(verifier, path, other)
    assert (result["line"], result["code"]) == (1, "signature_invalid")


def test_unreadable_files_and_keys_are_usage_errors(keys, verifier, tmp_path):
    ledger(1)
    path = export(keys, tmp_path / "ledger.jsonl")
    not_a_key = tmp_path / "not-a-key.pub"
    not_a_key.write_text("hello")
    for export_path, public in ((path, not_a_key), (tmp_path / "missing.jsonl", keys[1])):
        done = run_script(verifier, export_path, public)
        assert done.returncode == 2 and done.stdout == ""
        with pytest.raises(CommandError) as info:
            call_command("approvals_audit_verify", "--file", str(export_path), "--public-key", str(public))
        assert info.value.returncode == 2
    with pytest.raises(CommandError) as info:
        call_command("approvals_audit_verify", "--file", str(path))
    assert info.value.returncode == 2


# --- the key and the command's refusals ------------------------------------------------------------------


def test_the_generated_key_is_private_to_its_owner_and_never_overwritten(keys):
    private, _ = keys
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    before = private.read_bytes()
    with pytest.raises(CommandError) as info:
        call_command("approvals_audit_export", "--generate-key", str(private))
    assert info.value.returncode == 2 and "not overwritten" in str(info.value)
    assert private.read_bytes() == before


def test_an_export_needs_a_key_and_never_overwrites_a_file(keys, tmp_path):
    ledger(1)
    with pytest.raises(CommandError) as info:
        call_command("approvals_audit_export", "--output", str(tmp_path / "x.jsonl"))
    assert info.value.returncode == 2
    wrong = tmp_path / "wrong.pem"
    wrong.write_text(keys[1].read_text())  # a public key is no signing key
    with pytest.raises(CommandError) as info:
        call_command("approvals_audit_export", "--key", str(wrong), "--output", str(tmp_path / "x.jsonl"))
    assert info.value.returncode == 2
    existing = tmp_path / "existing.jsonl"
    existing.write_text("keep me")
    with pytest.raises(CommandError) as info:
        export(keys, existing)
    assert info.value.returncode == 2 and existing.read_text() == "keep me"


def test_progress_is_drawn_on_standard_error_when_asked(keys, tmp_path, capsys):
    ledger(3)
    export(keys, tmp_path / "ledger.jsonl", "--progress")
    captured = capsys.readouterr()
    assert "exporting" in captured.err and "3/3" in captured.err
    assert "exporting" not in captured.out


# --- secrets ---------------------------------------------------------------------------------------------


def test_an_export_of_a_signed_in_session_holds_no_token(api_client, keys, tmp_path):
    """A real sign-in and refresh: the session's events are exported, none of its secrets."""
    business = ClientFactory(
        app_id="shop",
        hub_consent=False,
        agent_authorize_url="https://business.example.com/agent/authorize",
        allowed_routes=["orders"],
    )
    verifier_, challenge = pkce_pair()
    redirect = "http://127.0.0.1:53682/callback"
    created = api_client.post(
        "/agent-auth/v1/authorizations",
        {
            "client_app_id": "shop",
            "redirect_uri": redirect,
            "state": "state-1234567",
            "requested_routes": ["orders"],
            "device_label": "laptop",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    approved = api_client.post(
        f"/agent-auth/v1/authorizations/{created.json()['authorization_id']}/approve",
        {"principal": {"id": "alice", "roles": []}, "on_behalf_of": "alice", "allowed_routes": ["orders"]},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {business._token}",
    )
    assert approved.status_code == 200, approved.content
    code = parse_qs(urlsplit(approved.json()["redirect_uri"]).query)["code"][0]
    tokens = api_client.post(
        "/agent-auth/v1/token",
        {
            "grant_type": "authorization_code",
            "client_app_id": "shop",
            "code": code,
            "redirect_uri": redirect,
            "code_verifier": verifier_,
        },
        format="json",
    ).json()
    refreshed = api_client.post(
        "/agent-auth/v1/token",
        {"grant_type": "refresh_token", "client_app_id": "shop", "refresh_token": tokens["refresh_token"]},
        format="json",
    ).json()
    assert refreshed["access_token"].startswith("bha_")
    path = export(keys, tmp_path / "ledger.jsonl")
    text = path.read_text(encoding="utf-8")
    session_events = [
        json.loads(line)["content"]
        for line in text.splitlines()[1:]
        if json.loads(line)["content"]["session_id"] == tokens["session_id"]
    ]
    assert len(session_events) >= 2  # the sign-in and the refresh, at least
    secrets = [
        tokens["access_token"],
        tokens["refresh_token"],
        refreshed["access_token"],
        refreshed["refresh_token"],
        code,
        verifier_,
        business._token,
    ]
    for secret in secrets:
        assert secret not in text
        assert secret[4:20] not in text  # not even a piece of one
    assert "bha_" not in text and "bhr_" not in text
    assert os.path.getsize(path) == len(text.encode("utf-8"))
