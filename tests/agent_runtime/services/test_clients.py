"""Creating a client never overwrites one: the unique App ID decides, also under concurrency."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from agent_runtime.config import ConfigError, validate_client_config
from agent_runtime.errors import ClientExists
from agent_runtime.models import Client
from agent_runtime.services.clients import client_create
from bailing.audit.actor import Actor
from bailing.audit.models import AuditEvent


def _data(**overrides):
    return validate_client_config({"app_id": "shop", "name": "Shop", **overrides}, path="client")


@pytest.mark.django_db
def test_create_then_create_again_is_client_exists_and_keeps_the_first():
    client = client_create(data=_data(), actor=Actor.system("test"))
    assert (client.app_id, client.name, client.token_hash) == ("shop", "Shop", None)
    with pytest.raises(ClientExists) as raised:
        client_create(data=_data(name="Other"), actor=Actor.system("test"))
    assert raised.value.code == "client_exists" and raised.value.http_status == 409
    assert Client.objects.get(app_id="shop").name == "Shop"
    events = AuditEvent.objects.filter(action="agent_runtime.client.created", target_id="shop")
    assert events.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_creates_one_wins_the_other_is_refused():
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def create(name: str) -> None:
        try:
            barrier.wait(timeout=10)
            client_create(data=_data(name=name), actor=Actor.system(name))
            outcomes.append(f"created {name}")
        except ClientExists:
            outcomes.append("exists")
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(name,)) for name in ("First", "Second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcome.split()[0] for outcome in outcomes) == ["created", "exists"]
    winner = next(outcome.split()[1] for outcome in outcomes if outcome.startswith("created"))
    assert Client.objects.get(app_id="shop").name == winner


@pytest.mark.django_db
def test_create_with_mcp_sign_in_taken_is_a_config_error_on_that_field():
    client_create(data=_data(hub_consent=True, mcp_sign_in=True), actor=Actor.system("test"))
    with pytest.raises(ConfigError) as raised:
        client_create(
            data=_data(app_id="other", hub_consent=True, mcp_sign_in=True), actor=Actor.system("test")
        )
    assert raised.value.path == "client.mcp_sign_in"
    assert not Client.objects.filter(app_id="other").exists()
