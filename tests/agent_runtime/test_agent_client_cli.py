"""The reference agent client's command line signs in through the hub consent page for real."""

from __future__ import annotations

import json
import os
import stat
import threading
import time

import pytest

from agent_runtime.models import AgentAuthorization
from agent_runtime.services.agent_auth import authorization_approve
from agent_runtime.services.clients import Actor
from bailing.agent_client import browser_visit, main
from tests.factories import ClientFactory, RouteFactory, UserFactory


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
