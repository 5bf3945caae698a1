"""The demo seed is idempotent and leaves a working administrator, agent client and workspace."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from agent_runtime.models import Client, Route
from agent_runtime.services.workspaces import workspace_profile

pytestmark = pytest.mark.django_db


def test_demo_seed_is_idempotent_and_complete(capsys):
    call_command("bailing_demo")
    first = capsys.readouterr().out
    call_command("bailing_demo")
    second = capsys.readouterr().out
    user = get_user_model().objects.get(username="alice")
    assert list(user.groups.values_list("name", flat=True)) == ["administrator"]
    password = first.split("alice / ", 1)[1].split()[0]
    assert user.check_password(password)
    assert f"alice / {password}" in second
    assert "0 item(s) changed" in second
    client = Client.objects.get(app_id="demo-agent")
    assert client.hub_consent and client.allows_route("demo")
    profile = workspace_profile(Route.objects.get(route_key="demo"))
    assert profile["profile"]["governance"]["permission"] == "readwrite"
