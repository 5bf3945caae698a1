"""The official MCP Python SDK drives an approval as a task, end to end, against the live hub: a client
extension declares ``io.modelcontextprotocol/tasks`` (the SDK then puts it in every request's
``_meta`` capabilities) and claims the ``resultType: "task"`` result of ``tools/call``; its resolver
polls ``tasks/get`` (a request type of the test's own, sent with ``session.send_request``, which sets
``Mcp-Name`` to the task id) while an approver approves in headless Chromium through the console. The
SDK's ``call_tool`` returns the final ``CallToolResult``. A second client, on a new connection, then
reads the same task by its id."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Literal

import httpx2
import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Request, RequestParams, Result
from playwright.async_api import async_playwright
from pydantic import Field

from agent_runtime.models import ToolApproval
from tests.factories import UserFactory
from tests.mcp_server.conftest import ROUTE
from tests.support.asyncio_run import run_async
from tests.support.console import CHROMIUM, CHROMIUM_ARGS, PASSWORD
from tests.support.invocations import agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
TASKS = "io.modelcontextprotocol/tasks"


class CreatedTask(Result):
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskState(Result):
    result_type: Literal["complete"] = "complete"
    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId")


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class ApprovalTasks(ClientExtension):
    """The tasks extension as this test's client implements it: poll until the task ends. ``on_working``
    runs once, after the first poll that still reports ``working`` (the approver acts then)."""

    identifier = TASKS

    def __init__(self, on_working):
        self.on_working = on_working
        self.created: list[CreatedTask] = []
        self.seen: list[str] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve)]

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        self.created.append(created)
        acted = False
        for _ in range(200):
            state = await ctx.session.send_request(
                GetTask(params=TaskParams(task_id=created.task_id)), TaskState
            )
            self.seen.append(state.status)
            if state.status == "completed":
                return CallToolResult.model_validate(state.result)
            assert state.status == "working", state
            if not acted:
                acted = True
                await self.on_working(created)
            await asyncio.sleep(0.1)  # the test's own pace; a real client honours pollIntervalMs
        raise AssertionError("the task never completed")


@contextlib.asynccontextmanager
async def _client(url: str, token: str, extensions=None):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with (
        http,
        Client(streamable_http_client(url, http_client=http), mode="auto", extensions=extensions) as client,
    ):
        yield client


def test_the_sdk_takes_a_refund_through_approval_as_a_task(hub, demo_shop):
    approver = UserFactory(username="april", roles=["approver"])
    token = agent(route_key=ROUTE, on_behalf_of="alice")._access
    url = f"{hub.url}/mcp/{ROUTE}"
    refunds_before = len(demo_shop.records()["refunds"])
    arguments = {"order_id": "SO-1002", "amount": 650, "reason": "Broken jug"}

    async def approve_in_console(created: CreatedTask):
        approval_id = int(created.status_message.split("#", 1)[1].split(".", 1)[0])
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

    extension = ApprovalTasks(approve_in_console)

    async def scenario():
        async with _client(url, token, [extension]) as client:
            version = client.protocol_version
            done = await client.call_tool("request_refund", arguments)
        # A new connection (and a client without the extension's resolver) reads the task by its id.
        async with _client(url, token, [ApprovalTasks(None)]) as later:
            task_id = extension.created[0].task_id
            again = await later.session.send_request(GetTask(params=TaskParams(task_id=task_id)), TaskState)
        return version, done, again

    version, done, again = run_async(scenario())
    assert version == "2026-07-28"
    (created,) = extension.created
    approval = ToolApproval.objects.get(invocation__job_id=created.task_id)
    assert created.status == "working" and f"#{approval.pk}" in created.status_message
    assert extension.seen[0] == "working" and extension.seen[-1] == "completed"
    assert done.is_error is False
    assert done.structured_content["state"] == "executed"
    assert approval.status == "approved" and approval.consumed_at is not None
    assert len(demo_shop.records()["refunds"]) == refunds_before + 1
    assert again.status == "completed"
    assert again.result["structuredContent"] == done.structured_content
    assert len(demo_shop.records()["refunds"]) == refunds_before + 1
