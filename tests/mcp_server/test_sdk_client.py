"""The official MCP Python SDK as the client, against the hub served live (pytest-django's live server)
with the demo knowledge (local embeddings: real hybrid retrieval) and a live Demo Shop; approvals are
decided in headless Chromium through the console, as an approver would.

Each era is driven: ``mode="auto"`` (the SDK probes ``server/discover`` and stays on 2026-07-28) and
``mode="legacy"`` (the ``initialize`` handshake).
"""

from __future__ import annotations

import contextlib

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import async_playwright

from tests.factories import UserFactory
from tests.mcp_server.conftest import ROUTE
from tests.support.asyncio_run import run_async
from tests.support.console import CHROMIUM, CHROMIUM_ARGS, PASSWORD
from tests.support.invocations import agent

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.asynccontextmanager
async def _client(url: str, token: str, mode: str):
    """An SDK client on the endpoint with the agent bearer. The HTTP client is closed on the way out,
    so the live server's request thread ends (and closes its database connection) with the test."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_lists_tools_and_uses_both_knowledge_tools(hub, mode):
    token = agent(route_key=ROUTE)._access
    url = f"{hub.url}/mcp/{ROUTE}"

    async def scenario():
        async with _client(url, token, mode) as client:
            version = client.protocol_version
            tools = await client.list_tools()
            found = await client.call_tool(
                "search_knowledge", {"query": "How long do refunds take?", "limit": 3}
            )
            answered = await client.call_tool("ask_knowledge", {"query": "How long do refunds take?"})
            failed = await client.call_tool("search_knowledge", {"query": ""})
            return version, tools, found, answered, failed

    version, tools, found, answered, failed = run_async(scenario())
    assert version == ("2026-07-28" if mode == "auto" else "2025-11-25")
    names = [tool.name for tool in tools.tools]
    assert names[:6] == [
        "search_knowledge",
        "ask_knowledge",
        "find_tools",
        "call_tool",
        "resume_invocation",
        "get_receipt",
    ]
    assert "request_refund" in names
    by_name = {tool.name: tool for tool in tools.tools}
    assert by_name["search_knowledge"].annotations.read_only_hint is True
    assert by_name["list_orders"].annotations.read_only_hint is True

    assert found.is_error is False
    results = found.structured_content["results"]
    assert 1 <= len(results) <= 3
    assert results[0]["source_id"].startswith("demo-handbook:")
    assert any(set(result["retrievers"]) == {"vector", "text"} for result in results)  # hybrid
    assert found.content[0].text.startswith(f"### {results[0]['title']} (score: ")

    assert answered.is_error is False
    sources = answered.structured_content["sources"]
    assert sources and "[1]" in answered.structured_content["answer"]
    last = sources[-1]
    line = f"[{len(sources)}] {last['title']} ({last['document_id']}, score {last['score']:.4f})"
    assert answered.content[0].text.endswith(line)

    assert failed.is_error is True
    assert failed.content[0].text == "Tool failed: `query` must be a non-empty string"


def test_a_governed_write_waits_for_approval_in_the_console_then_resumes_once(hub, demo_shop):
    approver = UserFactory(username="april", roles=["approver"])
    token = agent(route_key=ROUTE, on_behalf_of="alice")._access
    url = f"{hub.url}/mcp/{ROUTE}"
    refunds_before = len(demo_shop.records()["refunds"])
    arguments = {"order_id": "SO-1002", "amount": 650, "reason": "Broken jug"}

    async def approve_in_console(approval_id: int):
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = await browser.new_page()
            await page.goto(f"{hub.url}/console/approvals/{approval_id}/")
            await page.get_by_label("Username").fill(approver.username)
            await page.get_by_label("Password").fill(PASSWORD)
            await page.get_by_role("button", name="Sign in").click()
            await page.get_by_role("link", name="Approve…").click()
            await page.get_by_role("button", name="Approve the call").click()
            await page.locator(".alert-success").wait_for()
            await browser.close()

    async def scenario():
        async with _client(url, token, "auto") as client:
            waiting = await client.call_tool("request_refund", arguments)
            state = waiting.structured_content
            invocation_id = state["invocation_id"]
            again = await client.call_tool("resume_invocation", {"invocation_id": invocation_id})
            await approve_in_console(state["approval_id"])
            done = await client.call_tool("resume_invocation", {"invocation_id": invocation_id})
            replay = await client.call_tool("resume_invocation", {"invocation_id": invocation_id})
            receipt = await client.call_tool("get_receipt", {"invocation_id": invocation_id})
            return waiting, again, done, replay, receipt

    waiting, again, done, replay, receipt = run_async(scenario())
    assert waiting.structured_content["state"] == "awaiting_approval"
    assert "resume_invocation" in waiting.content[0].text
    assert again.structured_content["state"] == "awaiting_approval"
    assert done.structured_content["state"] == "executed", done.content[0].text
    assert replay.structured_content == done.structured_content
    assert receipt.structured_content["approval"]["status"] == "approved"
    assert len(demo_shop.records()["refunds"]) == refunds_before + 1
