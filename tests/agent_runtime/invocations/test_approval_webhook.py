"""Approval notifications: a signed business webhook after commit, retried on 5xx/429/network errors,
never blocking the call, its outcome on record; and the whole round trip with the Demo Shop playing
the business approver (notification → its approve button → decision → agent resume → dispatch)."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from agent_runtime.models import ApprovalNotification, Route, ToolApproval
from agent_runtime.services.approval_requests import approval_notification_body
from bailing.signing import verify_callback
from tests.support import outbound as outbound_support
from tests.support.demo_business import running_demo_business
from tests.support.invocations import (
    INVOKE_URL,
    agent,
    invoke_body,
    post,
    provider_for,
    resume_url,
    workspace,
)
from tests.support.threaded_server import ServerThread

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "shop"


class Receiver:
    """A business system's webhook endpoint: records what arrived, answers the scripted statuses."""

    def __init__(self, statuses: list[int]):
        self.statuses = list(statuses)
        self.received: list[tuple[dict, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/approvals"
        self.running = ServerThread(self.server)

    def stop(self):
        self.running.stop()


@pytest.fixture
def receiver_factory():
    started = []

    def start(statuses):
        receiver = Receiver(statuses)
        started.append(receiver)
        return receiver

    yield start
    for receiver in started:
        receiver.stop()


@pytest.fixture(autouse=True)
def fast_retries(settings):
    settings.BAILING_APPROVAL_NOTIFY_DELAYS = [0, 0.05, 0.1]


def _wait_final(approval_id: int, timeout: float = 10) -> ApprovalNotification:
    deadline = time.monotonic() + timeout
    while True:
        notification = ApprovalNotification.objects.get(approval_id=approval_id)
        if notification.status != ApprovalNotification.Status.PENDING:
            return notification
        assert time.monotonic() < deadline, "the notification was never delivered"
        time.sleep(0.05)


def _pending_with_webhook(api_client, demo_shop, url, kind="business_webhook"):
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(
        route_key=ROUTE,
        provider="demo-shop",
        write_tools=["cancel_order"],
        approval={"type": kind, "url": url},
    )
    session = agent(route_key=ROUTE)
    body = invoke_body(session, ROUTE, "cancel_order", {"order_id": "SO-1004", "reason": "moved house"})
    started = time.monotonic()
    result = post(api_client, session, INVOKE_URL, body).json()
    elapsed = time.monotonic() - started
    assert result["state"] == "awaiting_approval"
    return session, body, ToolApproval.objects.get(pk=result["approval_id"]), elapsed


@pytest.fixture(scope="module")
def demo_shop():
    with running_demo_business() as shop:
        yield shop


def test_a_new_approval_is_announced_with_a_signed_business_webhook(api_client, demo_shop, receiver_factory):
    receiver = receiver_factory([200])
    session, body, approval, _ = _pending_with_webhook(api_client, demo_shop, receiver.url)
    notification = _wait_final(approval.pk)
    assert (notification.status, notification.attempts, notification.last_http_status) == (
        "delivered",
        1,
        200,
    )
    [(headers, raw)] = receiver.received
    assert verify_callback(secret=session._client_token, headers=headers, body=raw)
    sent = json.loads(raw)
    assert list(sent)[:6] == ["kind", "approval_id", "job_id", "request_id", "route", "subject"]
    assert sent["kind"] == "tool_approval_request"
    assert sent["approval_id"] == approval.pk and isinstance(sent["approval_id"], int)
    assert sent["args"] == body["arguments"]
    assert sent["args_hash"] == approval.args_hash
    assert sent["summary"] == "Cancel order SO-1004 for the customer? Reason: moved house"
    assert sent["decision_path"] == f"/approvals/{approval.pk}/decision"
    assert sent["decision_contract"]["match"] == {
        "approval_id": approval.pk,
        "job_id": str(approval.job_id),
        "request_id": approval.request_id,
        "args_hash": approval.args_hash,
    }
    assert sent["intent"]["schema_version"] == "bailing.approval-intent.v1"
    assert sent["intent"]["policy"] == "risk_high"
    # The signed bytes are exactly JSON.stringify of the body the hub built.
    assert (
        raw
        == json.dumps(
            approval_notification_body(approval, "business_webhook"),
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
    )


@pytest.mark.parametrize("unit", ["s", '"', "\x01", "é"])
def test_a_summary_too_long_for_the_webhook_budget_is_cut_to_fit(
    api_client, demo_shop, receiver_factory, unit
):
    """Arguments are left out first; a summary that still does not fit is cut (escapes included:
    a quote is two bytes of JSON, a control character six) and says so."""
    from agent_runtime.budgets import WEBHOOK_BODY_MAX_BYTES

    receiver = receiver_factory([200])
    _, _, approval, _ = _pending_with_webhook(api_client, demo_shop, receiver.url)
    _wait_final(approval.pk)
    approval.summary = "Cancel " + unit * 70_000
    approval.args_bytes = WEBHOOK_BODY_MAX_BYTES + 1  # as if the arguments did not fit either
    body = approval_notification_body(approval, "business_webhook")
    size = len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    assert WEBHOOK_BODY_MAX_BYTES - 256 <= size <= WEBHOOK_BODY_MAX_BYTES  # cut to fit, not far below
    assert body["summary_truncated"] is True and body["intent"]["summary_truncated"] is True
    assert body["summary"].startswith("Cancel ") and body["summary"].endswith("…")
    assert body["summary"] == body["intent"]["summary"]
    assert "args" not in body and body["args_omitted"] is True


def test_5xx_and_429_are_retried_then_delivered(api_client, demo_shop, receiver_factory):
    receiver = receiver_factory([503, 429, 200])
    _, _, approval, _ = _pending_with_webhook(api_client, demo_shop, receiver.url)
    notification = _wait_final(approval.pk)
    assert (notification.status, notification.attempts) == ("delivered", 3)
    assert len(receiver.received) == 3


def test_a_4xx_is_final_and_a_failure_never_blocks_the_call(
    api_client, demo_shop, receiver_factory, settings
):
    receiver = receiver_factory([400])
    settings.BAILING_APPROVAL_NOTIFY_DELAYS = [0, 2, 10]
    _, _, approval, elapsed = _pending_with_webhook(api_client, demo_shop, receiver.url)
    assert elapsed < 2  # the agent's answer never waited for the webhook
    notification = _wait_final(approval.pk)
    assert (notification.status, notification.attempts, notification.last_error) == ("failed", 1, "http_400")


def test_an_unreachable_webhook_is_retried_and_recorded_as_failed(api_client, demo_shop):
    _, _, approval, _ = _pending_with_webhook(api_client, demo_shop, "http://127.0.0.1:9/approvals")
    notification = _wait_final(approval.pk)
    assert (notification.status, notification.attempts, notification.last_error) == (
        "failed",
        3,
        "unreachable",
    )


def test_a_plain_webhook_gets_the_older_body(api_client, demo_shop, receiver_factory):
    receiver = receiver_factory([200])
    _, body, approval, _ = _pending_with_webhook(api_client, demo_shop, receiver.url, kind="webhook")
    _wait_final(approval.pk)
    sent = json.loads(receiver.received[0][1])
    assert sent["kind"] == "tool_approval"
    assert json.loads(sent["args"]) == body["arguments"]


def test_the_round_trip_with_the_demo_shop_as_business_approver(api_client, live_server):
    """Notification → the Demo Shop's approve button → decision → agent resume → dispatch."""
    client_token = "demo-client-token-" + "x" * 24
    env = {"DEMO_HUB_URL": live_server.url, "DEMO_CLIENT_TOKEN": client_token}
    with running_demo_business(extra_env=env) as shop:
        provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
        workspace(
            route_key=ROUTE,
            provider="demo-shop",
            write_tools=["cancel_order"],
            approval={"type": "business_webhook", "url": shop.url("/approvals")},
        )
        session = agent(route_key=ROUTE)
        from agent_runtime.services.clients import client_token_set
        from bailing.audit.actor import Actor

        client_token_set(client=session.client, token=client_token, actor=Actor.system("tests"))
        body = invoke_body(session, ROUTE, "cancel_order", {"order_id": "SO-1003", "reason": "wrong size"})
        waiting = post(api_client, session, INVOKE_URL, body).json()
        approval_id = waiting["approval_id"]
        assert _wait_final(approval_id).status == "delivered"
        inbox = httpx.get(shop.url("/approvals.json"), timeout=5).json()
        assert [item["approval_id"] for item in inbox["approvals"]] == [approval_id]
        # The business approver clicks "Approve" on the shop's own page.
        clicked = httpx.post(
            shop.url(f"/approvals/{approval_id}/approve"),
            data={"comment": "fine"},
            headers={"Origin": shop.base_url},
            timeout=15,
        )
        assert clicked.status_code in (200, 303), clicked.text
        approval = ToolApproval.objects.get(pk=approval_id)
        assert (approval.status, approval.decided_by, approval.decision_id) == (
            "approved",
            "demo-manager",
            f"demo-{approval_id}-approved",
        )
        before = next(o["status"] for o in shop.records()["orders"] if o["order_id"] == "SO-1003")
        done = post(api_client, session, resume_url(body["invocation_id"]), {}).json()
        assert done["state"] == "executed", done
        after = next(o["status"] for o in shop.records()["orders"] if o["order_id"] == "SO-1003")
        assert (before, after) == ("paid", "cancelled")


# --- each attempt bounded in time and bytes; the outbound target rules --------------------------------
ATTEMPT_SECONDS = 1.5
# "By the deadline" on a loaded two-core machine.
MARGIN = 2.0
MiB = 1024 * 1024
# What the hub may have taken in before it hangs up: the 64 KiB it reads, plus what the kernel
# buffered on both sides meanwhile (the receiver keeps its send buffer small); far from the 50 MiB.
SENT_BOUND = 1 * MiB


@pytest.fixture
def short_attempts(settings):
    settings.BAILING_APPROVAL_NOTIFY_TIMEOUT = ATTEMPT_SECONDS


def _finished(server, count: int, timeout: float = 40) -> list:
    """The receiver's first ``count`` connections once each has closed."""
    deadline = time.monotonic() + timeout
    while len(server.connections) < count or any(c.closed_at is None for c in server.connections[:count]):
        assert time.monotonic() < deadline, "the receiver's connections never closed"
        time.sleep(0.05)
    return server.connections[:count]


@pytest.mark.parametrize(
    "answer",
    [outbound_support.huge_body(50 * MiB), outbound_support.endless_body()],
    ids=["50-MiB", "endless"],
)
def test_a_huge_or_endless_answer_is_read_only_up_to_the_cap(api_client, demo_shop, short_attempts, answer):
    with outbound_support.raw_http_server(answer, sndbuf=64 * 1024) as receiver:
        _, _, approval, _ = _pending_with_webhook(api_client, demo_shop, receiver.base_url + "/approvals")
        notification = _wait_final(approval.pk, timeout=40)
        [attempt] = _finished(receiver, 1)
    assert (notification.status, notification.attempts) == ("delivered", 1)
    assert notification.last_http_status == 200
    assert attempt.hung_up  # the hub closed before the answer was over
    assert attempt.sent < SENT_BOUND, attempt.sent
    assert attempt.seconds < ATTEMPT_SECONDS + MARGIN


def test_an_answer_whose_headers_drip_ends_every_attempt_at_its_deadline(
    api_client, demo_shop, short_attempts
):
    with outbound_support.raw_http_server(outbound_support.drip_headers()) as receiver:
        _, _, approval, _ = _pending_with_webhook(api_client, demo_shop, receiver.base_url + "/approvals")
        notification = _wait_final(approval.pk, timeout=40)
        attempts = _finished(receiver, 3)
    assert (notification.status, notification.attempts, notification.last_error) == ("failed", 3, "timeout")
    assert len(receiver.requests) == 3
    for attempt in attempts:
        assert attempt.seconds < ATTEMPT_SECONDS + MARGIN


def test_a_body_that_drips_after_a_2xx_status_is_delivered_by_the_deadline(
    api_client, demo_shop, short_attempts
):
    with outbound_support.raw_http_server(outbound_support.drip_body()) as receiver:
        _, _, approval, _ = _pending_with_webhook(api_client, demo_shop, receiver.base_url + "/approvals")
        notification = _wait_final(approval.pk, timeout=40)
        [attempt] = _finished(receiver, 1)
    assert (notification.status, notification.attempts) == ("delivered", 1)
    assert notification.last_http_status == 200
    assert attempt.seconds < ATTEMPT_SECONDS + MARGIN


def _pending_with_stored_url(api_client, demo_shop, stored_url: str) -> ToolApproval:
    """A pending approval whose route names ``stored_url``, written past validation (a route applied
    before the outbound rules existed)."""
    route = workspace(
        route_key=ROUTE,
        provider=provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret).name,
        write_tools=["cancel_order"],
        approval={"type": "business_webhook", "url": "http://127.0.0.1:9/approvals"},
    )
    tools = {**route.tools, "approval": {"type": "business_webhook", "url": stored_url}}
    Route.objects.filter(pk=route.pk).update(tools=tools)
    session = agent(route_key=ROUTE)
    body = invoke_body(session, ROUTE, "cancel_order", {"order_id": "SO-1004", "reason": "moved house"})
    result = post(api_client, session, INVOKE_URL, body).json()
    assert result["state"] == "awaiting_approval", result
    return ToolApproval.objects.get(pk=result["approval_id"])


@pytest.mark.parametrize(
    "stored_url",
    ["http://hooks.example.com/approvals", "https://169.254.169.254/approvals", "https://[fe80::1]/x"],
    ids=["plain-http-beyond-loopback", "link-local", "link-local-v6"],
)
def test_a_stored_webhook_url_the_rules_refuse_is_never_attempted(
    api_client, demo_shop, loopback_only, stored_url
):
    approval = _pending_with_stored_url(api_client, demo_shop, stored_url)
    notification = _wait_final(approval.pk)
    assert (notification.status, notification.attempts, notification.last_error) == (
        "failed",
        0,
        "target_forbidden",
    )
    assert all(host in ("127.0.0.1", "::1") for host in loopback_only)  # the Demo Shop only


def test_a_webhook_name_resolving_to_a_denied_address_fails_once_without_connecting(
    api_client, demo_shop, loopback_only, stand_in_resolver
):
    resolver = stand_in_resolver({"hooks.test": [["169.254.169.254"]]})
    approval = _pending_with_stored_url(api_client, demo_shop, "https://hooks.test/approvals")
    notification = _wait_final(approval.pk)
    assert (notification.status, notification.attempts, notification.last_error) == (
        "failed",
        1,
        "target_forbidden",
    )
    assert resolver.calls == ["hooks.test"]  # not retried: the policy would refuse it again
    assert all(host in ("127.0.0.1", "::1") for host in loopback_only)
