"""Fixtures of the MCP tests: the chaos business server, a live Demo Shop, and the live hub with the
demo workspace (Demo Shop tools, the demo handbook with local embeddings)."""

from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections

from agent_runtime.config import validate_route_config
from agent_runtime.services.config_apply import route_upsert
from bailing.audit.actor import Actor
from knowledge.services.documents import documents_put_files
from knowledge.services.indexing import documents_index
from tests.factories import KnowledgeBaseFactory
from tests.support.chaos_business import chaos_business  # noqa: F401 - the fixture, for this package
from tests.support.demo_business import running_demo_business
from tests.support.invocations import provider_for

ROUTE = "demo"
DEMO_KNOWLEDGE = Path(settings.BASE_DIR) / "examples" / "demo-knowledge"


@pytest.fixture(scope="module")
def demo_shop():
    with running_demo_business() as shop:
        yield shop


@pytest.fixture
def hub(live_server, settings, monkeypatch, demo_shop):
    """The demo workspace on the live hub: Demo Shop tools and the demo handbook (local embeddings)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.BAILING_PUBLIC_URL = live_server.url
    settings.BAILING_ANSWER_CHAT_URL = ""
    kb = KnowledgeBaseFactory(kb_id="demo-handbook")
    ids = documents_put_files(
        kb=kb, paths=sorted(DEMO_KNOWLEDGE.glob("*.md")), source_prefix="", actor=Actor.system("tests")
    )
    documents_index(document_ids=ids)
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    data = validate_route_config(
        {
            "route_key": ROUTE,
            "name": "Demo workspace",
            "permission": "readwrite",
            "knowledge": {"kb_ids": ["demo-handbook"]},
            "tools": {
                "sources": [{"provider": "demo-shop", "allow": ["*"]}],
                "agent_direct": {"enabled": True, "write_tools": ["create_ticket", "request_refund"]},
            },
            "agent_client": {"enabled": True},
        },
        path="route",
    )
    route_upsert(data=data, actor=Actor.system("tests"))
    yield live_server
    connections.close_all()
