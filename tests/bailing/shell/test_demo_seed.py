"""The demo seed is idempotent and leaves a working administrator, agent client, workspace and
knowledge base."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from agent_runtime.models import Client, Route
from agent_runtime.selectors.workspaces import workspace_profile
from knowledge.models import Document, KnowledgeBase

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
    # Demo knowledge: every file indexed on the first run (lexically and with vectors), nothing
    # re-embedded on the second.
    kb = KnowledgeBase.objects.get(kb_id="demo-handbook")
    documents = Document.objects.filter(kb=kb)
    assert sorted(documents.values_list("source_key", flat=True)) == [
        "demo:cancellations",
        "demo:refunds",
        "demo:returns-zh",
        "demo:shipping",
    ]
    assert set(documents.values_list("status", flat=True)) == {"ready"}
    assert "4 document(s) ready in demo-handbook (indexed 4 now)" in first
    assert "4 document(s) ready in demo-handbook (indexed 0 now)" in second
    assert documents.get(source_key="demo:refunds").title == "Refund policy"
    assert Route.objects.get(route_key="demo").knowledge["kb_id"] == "demo-handbook"
