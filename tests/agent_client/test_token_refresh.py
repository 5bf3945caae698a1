"""The reference agent client keeps a saved session going: an access token the hub refuses (401
``unauthorized``) is refreshed once with the saved refresh token, the rotated pair is written back
atomically (mode 0600) and the call is sent once more. A session that has ended (revoked, refresh
replayed) is one clear line and exit status 3, never a traceback. Everything runs against a live hub.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from agent_client import (
    EXIT_SIGN_IN_AGAIN,
    AgentAuthError,
    ReferenceAgentClient,
    SessionGone,
    TokenFile,
    browser_visit,
    main,
    write_token_file,
)
from agent_runtime.models import AgentRefreshToken, AgentSession
from agent_runtime.services.agent_auth.authorizations import authorization_approve
from agent_runtime.services.agent_auth.sessions import session_revoke
from bailing.audit.actor import Actor
from tests.factories import ClientFactory, KnowledgeBaseFactory, RouteFactory, UserFactory, knowledge_document

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def signed_in(live_server, settings, tmp_path):
    """A real sign-in (authorization, consent, code exchange) of ``refresh-agent`` to ``handbook``,
    saved as ``login --save`` saves it. Yields the token file's path."""
    settings.BAILING_PUBLIC_URL = live_server.url
    ClientFactory(app_id="refresh-agent", allowed_routes=["handbook"])
    kb = KnowledgeBaseFactory(
        kb_id="refresh-kb", embedding_provider="none", embedding_model="", embedding_dim=0
    )
    RouteFactory(route_key="handbook", name="Handbook", knowledge={"kb_id": "refresh-kb"})
    knowledge_document(kb, "refunds", "Refund policy", "Refunds are paid within 14 days.")
    user = UserFactory(username="dora")
    agent = ReferenceAgentClient(live_server.url, "refresh-agent", ["handbook"])
    try:
        agent.start_login()
        redirect = authorization_approve(
            authorization_id=agent.authorization_id,
            client=None,
            principal={"id": "dora", "roles": []},
            on_behalf_of="dora",
            allowed_routes=["handbook"],
            approved_by=user,
            actor=Actor.user(user),
        )
        assert browser_visit(redirect).status_code == 200
        agent.wait_for_redirect()
        tokens = agent.exchange()
    finally:
        agent.close()
    path = tmp_path / "tokens.json"
    write_token_file(path, {"hub": live_server.url, "client_app_id": "refresh-agent", **tokens})
    return path


def _expire_access_token(path: Path) -> None:
    session_id = json.loads(path.read_text())["session_id"]
    updated = AgentSession.objects.filter(pk=session_id).update(
        access_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert updated == 1


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """``python -m agent_client …`` as a user runs it (a separate process: tracebacks would show)."""
    return subprocess.run(
        [sys.executable, "-m", "agent_client", *argv],
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_expired_access_token_is_refreshed_saved_and_the_call_succeeds(signed_in, capsys):
    before = json.loads(signed_in.read_text())
    _expire_access_token(signed_in)

    code = main(["knowledge", "--tokens", str(signed_in), "--workspace", "handbook", "refund days"])

    assert code == 0
    assert '"schema_version": "bailing.agent-knowledge-search.v1"' in capsys.readouterr().out
    after = json.loads(signed_in.read_text())
    assert stat.S_IMODE(os.stat(signed_in).st_mode) == 0o600
    assert after["session_id"] == before["session_id"]
    assert after["hub"] == before["hub"] and after["client_app_id"] == "refresh-agent"
    assert after["access_token"].startswith("bha_") and after["access_token"] != before["access_token"]
    assert after["refresh_token"].startswith("bhr_") and after["refresh_token"] != before["refresh_token"]
    statuses = sorted(
        AgentRefreshToken.objects.filter(session_id=before["session_id"]).values_list("status", flat=True)
    )
    assert statuses == ["active", "used"]  # rotated once, not replayed
    assert AgentSession.objects.get(pk=before["session_id"]).revoked_at is None
    assert not [name for name in os.listdir(signed_in.parent) if name.endswith(".tmp")]  # no temp left

    # The saved pair is the live one: the next command needs no refresh and leaves the file alone.
    assert main(["knowledge", "--tokens", str(signed_in), "--workspace", "handbook", "refund"]) == 0
    assert json.loads(signed_in.read_text()) == after
    assert AgentRefreshToken.objects.filter(session_id=before["session_id"]).count() == 2


def test_a_revoked_session_says_sign_in_again_without_a_traceback(signed_in):
    before = signed_in.read_text()
    session = AgentSession.objects.get(pk=json.loads(before)["session_id"])
    session_revoke(session=session, actor=Actor.system("tests"), reason="admin_revoked")

    result = _cli("knowledge", "--tokens", str(signed_in), "--workspace", "handbook", "refund")

    assert result.returncode == EXIT_SIGN_IN_AGAIN
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "has ended" in lines[0] and "Sign in again" in lines[0] and "login --hub" in lines[0]
    assert "bhr_" not in lines[0] and "bha_" not in lines[0]  # never a secret in a message
    assert signed_in.read_text() == before  # nothing rotated, nothing written


def test_a_replayed_refresh_token_ends_the_session_and_says_so(signed_in):
    """A copy of the file taken before a refresh holds a used refresh token: presenting it is a
    replay, the hub revokes the session, and both holders are told to sign in again."""
    stale = signed_in.parent / "stale-copy.json"
    write_token_file(stale, json.loads(signed_in.read_text()))
    _expire_access_token(signed_in)
    assert _cli("knowledge", "--tokens", str(signed_in), "--workspace", "handbook", "refund").returncode == 0

    replay = _cli("knowledge", "--tokens", str(stale), "--workspace", "handbook", "refund")

    assert replay.returncode == EXIT_SIGN_IN_AGAIN and "Traceback" not in replay.stderr
    assert "refused its refresh token" in replay.stderr
    session_id = json.loads(signed_in.read_text())["session_id"]
    assert AgentSession.objects.get(pk=session_id).revoked_at is not None  # replay revocation
    again = _cli("receipt", "--tokens", str(signed_in), "0" * 64)
    assert again.returncode == EXIT_SIGN_IN_AGAIN and "Traceback" not in again.stderr


def test_only_a_refused_bearer_triggers_a_refresh(signed_in):
    """A 400 from a business endpoint is raised as it is: no refresh, no second request, no write."""
    before = signed_in.read_text()
    agent = ReferenceAgentClient.from_token_file(TokenFile(signed_in))
    try:
        with pytest.raises(AgentAuthError) as exc:
            agent.knowledge_read("handbook", "v1.not.a-ref")
        assert (exc.value.status, exc.value.code) == (400, "knowledge_reference_invalid")
        assert agent.refreshes == 0
    finally:
        agent.close()
    assert signed_in.read_text() == before


def test_a_refused_bearer_without_a_refresh_token_is_session_gone(signed_in):
    saved = json.loads(signed_in.read_text())
    _expire_access_token(signed_in)
    agent = ReferenceAgentClient(saved["hub"], "refresh-agent", ["handbook"])
    agent.access_token = saved["access_token"]
    try:
        with pytest.raises(SessionGone) as exc:
            agent.knowledge_search("handbook", "refund")
        assert exc.value.reason == "no_refresh_token"
    finally:
        agent.close()


def test_a_missing_or_broken_token_file_is_one_line_and_status_2(tmp_path):
    missing = _cli("knowledge", "--tokens", str(tmp_path / "nope.json"), "--workspace", "w", "q")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "no token file" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    result = _cli("invoke", "--tokens", str(broken), "--workspace", "w", "list_orders")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "cannot read the token file" in result.stderr


def test_the_token_file_is_replaced_atomically_with_mode_0600(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text("{}")
    os.chmod(path, 0o644)
    write_token_file(path, {"hub": "http://127.0.0.1:1", "client_app_id": "a", "access_token": "bha_x"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert TokenFile(path).read()["access_token"] == "bha_x"
    assert sorted(os.listdir(tmp_path)) == ["tokens.json"]


def test_two_clients_sharing_a_file_never_replay_a_refresh_token(signed_in):
    """Two commands loaded the same file; the first refreshes and saves. The second, refused with its
    old access token, finds the newer pair in the file (under the lock) and uses it instead of
    presenting the used refresh token again, which would revoke the session."""
    _expire_access_token(signed_in)
    first = ReferenceAgentClient.from_token_file(TokenFile(signed_in))
    second = ReferenceAgentClient.from_token_file(TokenFile(signed_in))
    try:
        assert first.knowledge_search("handbook", "refund")["status"] == "ok"
        assert first.refreshes == 1
        assert second.knowledge_search("handbook", "refund")["status"] == "ok"
        assert second.refreshes == 0  # took the pair the first one saved
        assert second.access_token == first.access_token
    finally:
        first.close()
        second.close()
    session_id = json.loads(signed_in.read_text())["session_id"]
    assert AgentSession.objects.get(pk=session_id).revoked_at is None
    assert not AgentRefreshToken.objects.filter(session_id=session_id, status="replayed").exists()
