"""The workspace's data policy over MCP, with the official SDK as the client against the live hub: the
Demo Shop's order SO-1007 (a card number, an email, an injection line and an exfiltrating image in
its notes) through a business tool, ``call_tool``, ``resume_invocation`` and ``get_receipt``."""

from __future__ import annotations

import contextlib
import json

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agent_runtime.models import Route
from tests.mcp_server.conftest import ROUTE
from tests.support.asyncio_run import run_async
from tests.support.invocations import agent

pytestmark = pytest.mark.django_db(transaction=True)
CARD = "4111 1111 1111 1111"
EMAIL = "carol.buyer@example.com"
FINDINGS = {"email": 1, "payment_card": 1, "injection": 1, "external_media": 1}
DETECTORS = ["payment_card", "email", "injection", "external_media"]


@contextlib.asynccontextmanager
async def _client(url: str, token: str):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode="auto") as client:
        yield client


def _policy(**policy) -> None:
    Route.objects.filter(route_key=ROUTE).update(data_policy=policy)


def test_business_tool_call_tool_resume_and_receipt_are_released_under_the_policy(hub):
    _policy(detectors=DETECTORS, actions={"injection": "flag"})
    token = agent(route_key=ROUTE, on_behalf_of="alice")._access
    url = f"{hub.url}/mcp/{ROUTE}"

    async def scenario():
        async with _client(url, token) as client:
            direct = await client.call_tool("get_order", {"order_id": "SO-1007"})
            meta = await client.call_tool(
                "call_tool", {"name": "get_order", "arguments": {"order_id": "SO-1007"}}
            )
            invocation_id = direct.structured_content["invocation_id"]
            resumed = await client.call_tool("resume_invocation", {"invocation_id": invocation_id})
            receipt = await client.call_tool("get_receipt", {"invocation_id": invocation_id})
            return direct, meta, resumed, receipt

    direct, meta, resumed, receipt = run_async(scenario())
    for answer in (direct, meta, resumed):
        assert answer.is_error is False
        structured = answer.structured_content
        assert structured["state"] == "executed"
        assert structured["data_policy"] == {"action": "redact", "findings": FINDINGS}
        text = answer.content[0].text
        assert CARD not in text and EMAIL not in text
        assert CARD not in json.dumps(structured) and EMAIL not in json.dumps(structured)
        assert "[REDACTED:payment_card#1]" in text
        assert "data_policy: redact (" in text
    assert json.loads(direct.structured_content["text"])["order"]["order_id"] == "SO-1007"
    result = receipt.structured_content["result"]
    assert result["data_policy"] == {"action": "redact", "findings": FINDINGS}
    assert CARD not in receipt.content[0].text and EMAIL not in json.dumps(receipt.structured_content)


def test_a_blocked_answer_over_mcp_says_why_and_the_call_stays_executed(hub):
    _policy(detectors=DETECTORS, action="block")
    token = agent(route_key=ROUTE, on_behalf_of="alice")._access

    async def scenario():
        async with _client(f"{hub.url}/mcp/{ROUTE}", token) as client:
            return await client.call_tool("get_order", {"order_id": "SO-1007"})

    blocked = run_async(scenario())
    assert blocked.is_error is False
    assert blocked.structured_content["state"] == "executed"
    assert blocked.structured_content["data_policy"] == {"action": "block", "findings": FINDINGS}
    text = blocked.content[0].text
    assert "withheld" in text and "SO-1007" not in blocked.structured_content["text"]
    assert all(detector in text for detector in FINDINGS)
