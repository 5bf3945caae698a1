"""The reference agent client (and its command line) against a live hub: sign-in through the hub
consent page, knowledge search and a paged read."""

from __future__ import annotations

import json
import os
import stat
import threading
import time

import pytest

from agent_client import AgentAuthError, ReferenceAgentClient, browser_visit, main
from agent_runtime.models import AgentAuthorization
from agent_runtime.services.agent_auth.authorizations import authorization_approve
from bailing.audit.actor import Actor
from tests.factories import (
    AgentSessionFactory,
    ClientFactory,
    KnowledgeBaseFactory,
    RouteFactory,
    UserFactory,
    knowledge_document,
)


@pytest.mark.django_db(transaction=True)
def test_cli_login_signs_in_and_prints_the_workspace_profile(live_server, settings, tmp_path, capsys):
    settings.BAILING_PUBLIC_URL = live_server.url
    ClientFactory(app_id="cli-agent", allowed_routes=["desk"])
    RouteFactory(route_key="desk", name="Desk")
    user = UserFactory(username="carol")
    token_file = tmp_path / "tokens.json"
    result: dict[str, int] = {}
    argv = ["login", "--hub", live_server.url, "--client", "cli-agent", "--workspace", "desk"]
    argv += ["--no-browser", "--timeout", "20", "--save", str(token_file)]
    thread = threading.Thread(target=lambda: result.setdefault("code", main(argv)))
    thread.start()
    deadline = time.monotonic() + 10
    while not AgentAuthorization.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    authorization = AgentAuthorization.objects.get()
    redirect = authorization_approve(
        authorization_id=authorization.id,
        client=None,
        principal={"id": "carol", "roles": []},
        on_behalf_of="carol",
        allowed_routes=["desk"],
        approved_by=user,
        actor=Actor.user(user),
    )
    assert browser_visit(redirect).status_code == 200
    thread.join(timeout=20)
    assert result == {"code": 0}
    out = capsys.readouterr().out
    assert "bailing.agent-runtime-profile.v1" in out
    assert '"route": "desk"' in out
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    saved = json.loads(token_file.read_text())
    assert saved["access_token"].startswith("bha_") and saved["client_app_id"] == "cli-agent"


@pytest.mark.django_db(transaction=True)
def test_cli_knowledge_searches_and_reads_the_best_hit_over_http(live_server, tmp_path, capsys):
    client = ClientFactory(app_id="kb-agent", allowed_routes=["handbook"])
    kb = KnowledgeBaseFactory(
        kb_id="handbook-kb", embedding_provider="none", embedding_model="", embedding_dim=0
    )
    RouteFactory(route_key="handbook", name="Handbook", knowledge={"kb_id": "handbook-kb"})
    long_body = "Refunds are paid within 14 days. " * 1500  # ~49 KB: three 16 KiB pages
    knowledge_document(kb, "refunds", "Refund policy", long_body)
    knowledge_document(kb, "shipping", "Shipping", "Parcels ship the same day.")
    session = AgentSessionFactory(client=client, allowed_routes=["handbook"])
    token_file = tmp_path / "tokens.json"
    token_file.write_text(
        json.dumps({"hub": live_server.url, "client_app_id": "kb-agent", "access_token": session._access})
    )

    code = main(["knowledge", "--tokens", str(token_file), "--workspace", "handbook", "refund days"])

    assert code == 0
    out = capsys.readouterr().out
    assert '"schema_version": "bailing.agent-knowledge-search.v1"' in out
    assert '"trust": "reference_only"' in out
    read_line = next(line for line in out.splitlines() if line.startswith("--- read 'Refund policy'"))
    size = len(long_body.strip().encode())
    assert f"{size} of {size} bytes" in read_line and "page(s)" in read_line
    assert int(read_line.split(": ")[1].split(" ")[0]) >= 3  # followed next_cursor across pages


@pytest.mark.django_db(transaction=True)
def test_reference_client_surfaces_knowledge_errors_by_code(live_server):
    client = ClientFactory(app_id="kb-agent2", allowed_routes=["handbook"])
    RouteFactory(route_key="handbook", name="Handbook")
    session = AgentSessionFactory(client=client, allowed_routes=["handbook"])
    agent = ReferenceAgentClient(live_server.url, "kb-agent2", ["handbook"])
    agent.access_token = session._access
    try:
        assert agent.knowledge_search("handbook", "anything")["status"] == "disabled"
        with pytest.raises(AgentAuthError) as exc:
            agent.knowledge_read("handbook", "v1.not.a-ref")
        assert (exc.value.status, exc.value.code) == (400, "knowledge_reference_invalid")
    finally:
        agent.close()
