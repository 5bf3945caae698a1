"""Tool calls against the live Demo Shop process, signed like the hub signs them.

The process is shared by the session, so each test uses its own orders or checks deltas, and every
write uses a fresh idempotency key.
"""

import threading
import time
import uuid
from pathlib import Path

import pytest

from demo_business.store import CANCELLABLE_STATUSES, ORDER_STATUSES, REFUNDABLE_STATUSES

HANDBOOK = Path(__file__).resolve().parents[2] / "examples" / "demo-knowledge"
PROBE_SUBJECT = "__bailing_authz_probe__:nobody"


def new_key():
    return uuid.uuid4().hex + uuid.uuid4().hex


def error_of(response):
    return response.json()["error"]


# --- signature and subject gates ------------------------------------------------------------------


def test_health_needs_no_signature(demo_shop):
    response = demo_shop.client.get(demo_shop.url("/health"))
    assert response.status_code == 200
    assert response.json() == {"ok": True, "app": "demo-business"}


def test_unsigned_tool_call_is_401(demo_shop):
    response = demo_shop.client.get(demo_shop.url("/orders"), headers={"X-Bailing-On-Behalf-Of": "alice"})
    assert response.status_code == 401
    assert error_of(response) == "invalid_signature"
    assert response.json()["reason"] == "missing_signature"


# Five seconds past the window, as the approval tests do: a request of a loaded machine that takes a
# second to arrive must not bring +301 back inside it. The exact boundary (±300 s, with a fixed clock)
# is tests/bailing/test_signing.py's.
@pytest.mark.parametrize("offset", [-305, 305])
def test_skewed_timestamp_is_401(demo_shop, offset):
    response = demo_shop.call("GET", "/orders", on_behalf_of="alice", timestamp=int(time.time()) + offset)
    assert response.status_code == 401
    assert error_of(response) == "invalid_signature"
    assert response.json()["reason"] == "timestamp_skew"


def test_subject_swapped_after_signing_is_401(demo_shop):
    headers = demo_shop.sign("GET", "/orders", on_behalf_of="alice", job_id="job-1")
    headers["X-Bailing-On-Behalf-Of"] = "bob"
    response = demo_shop.client.get(demo_shop.url("/orders"), headers=headers)
    assert response.status_code == 401
    assert response.json()["reason"] == "signature_mismatch"


def test_query_changed_after_signing_is_401(demo_shop):
    headers = demo_shop.sign("GET", "/orders?status=delivered", on_behalf_of="alice")
    response = demo_shop.client.get(demo_shop.url("/orders?status=shipped"), headers=headers)
    assert response.status_code == 401


def test_body_changed_after_signing_is_401(demo_shop):
    signed = b'{"subject":"Broken","message":"Please help"}'
    headers = demo_shop.sign("POST", "/tickets", body=signed, on_behalf_of="alice")
    headers.update({"Content-Type": "application/json", "X-Bailing-Idempotency-Key": new_key()})
    response = demo_shop.client.post(
        demo_shop.url("/tickets"), content=b'{"subject":"Broken","message":"Refund me"}', headers=headers
    )
    assert response.status_code == 401


def test_signature_covers_the_raw_path(demo_shop):
    # The hub signs the path it sends; the shop must verify before percent-decoding it.
    response = demo_shop.call("GET", "/orders/SO%2D1002", on_behalf_of="alice")
    assert response.status_code == 200
    assert response.json()["order"]["order_id"] == "SO-1002"


def test_missing_subject_is_401_for_subject_tools(demo_shop):
    response = demo_shop.call("GET", "/orders")
    assert response.status_code == 401
    assert error_of(response) == "subject_required"


@pytest.mark.parametrize("subject", ["mallory", PROBE_SUBJECT, "Alice"])
def test_unknown_subject_is_403(demo_shop, subject):
    response = demo_shop.call("GET", "/orders", on_behalf_of=subject)
    assert response.status_code == 403
    assert error_of(response) == "subject_not_allowed"


# --- authorization probe endpoint -------------------------------------------------------------------

AUTHZ_PROBE = "/.well-known/bailing/authz-probe"
PROBE_BODY = {"subject": PROBE_SUBJECT, "reason": "bailing-authz-probe", "expect": "deny"}


def test_the_authz_probe_refuses_the_synthetic_nobody_subject_with_403(demo_shop):
    response = demo_shop.call(
        "POST", AUTHZ_PROBE, json_body=PROBE_BODY, on_behalf_of=PROBE_SUBJECT, job_id="probe"
    )
    assert response.status_code == 403
    assert error_of(response) == "subject_not_allowed"


def test_the_authz_probe_passes_the_same_gates_as_a_tool(demo_shop):
    unsigned = demo_shop.client.post(demo_shop.url(AUTHZ_PROBE), json=PROBE_BODY)
    assert (unsigned.status_code, error_of(unsigned)) == (401, "invalid_signature")
    no_subject = demo_shop.call("POST", AUTHZ_PROBE, json_body={})
    assert (no_subject.status_code, error_of(no_subject)) == (401, "subject_required")
    customer = demo_shop.call("POST", AUTHZ_PROBE, json_body={"subject": "alice"}, on_behalf_of="alice")
    assert customer.status_code == 200
    assert customer.json() == {"authorized": True, "subject": "alice"}
    empty = demo_shop.call("POST", AUTHZ_PROBE, on_behalf_of="bob")
    assert empty.json() == {"authorized": True, "subject": "bob"}


@pytest.mark.parametrize(
    ("body", "field"),
    [({"subject": "bob"}, "subject"), ({"subject": "alice", "user": "x"}, "user"), ({"reason": 5}, "reason")],
)
def test_the_authz_probe_validates_its_body(demo_shop, body, field):
    response = demo_shop.call("POST", AUTHZ_PROBE, json_body=body, on_behalf_of="alice")
    assert response.status_code == 400
    assert response.json()["field"] == field


def test_the_authz_probe_is_post_only(demo_shop):
    response = demo_shop.call("GET", AUTHZ_PROBE, on_behalf_of="alice")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


# --- read tools -----------------------------------------------------------------------------------


def test_list_orders_returns_only_the_callers_orders(demo_shop):
    alice = demo_shop.call("GET", "/orders", on_behalf_of="alice").json()
    bob = demo_shop.call("GET", "/orders", on_behalf_of="bob").json()
    assert {o["order_id"] for o in alice["orders"]} == {
        "SO-1001",
        "SO-1002",
        "SO-1003",
        "SO-1004",
        "SO-1005",
        "SO-1006",
        "SO-1007",
    }
    assert {o["order_id"] for o in bob["orders"]} == {"SO-2001", "SO-2002", "SO-2003"}
    assert alice["ok"] is True and alice["count"] == 7
    order = next(o for o in alice["orders"] if o["order_id"] == "SO-1001")
    assert order["item"] == "Wireless noise-cancelling headphones"
    assert (order["amount"], order["currency"]) == (199.0, "USD")
    assert "owner" not in order


def test_list_orders_filters_by_status(demo_shop):
    response = demo_shop.call("GET", "/orders?status=delivered", on_behalf_of="alice")
    assert response.status_code == 200
    assert [o["order_id"] for o in response.json()["orders"]] == ["SO-1001", "SO-1002"]
    assert response.headers["cache-control"] == "no-store"
    processing = demo_shop.call("GET", "/orders?status=processing", on_behalf_of="alice").json()
    assert [o["order_id"] for o in processing["orders"]] == ["SO-1005"]


def test_alice_has_an_order_in_every_state_of_its_life(demo_shop):
    # The walk-through refunds SO-1002 (delivered) and cancels SO-1005 (processing).
    alice = demo_shop.call("GET", "/orders", on_behalf_of="alice").json()["orders"]
    by_id = {o["order_id"]: o["status"] for o in alice}
    assert set(by_id.values()) == set(ORDER_STATUSES) - {"cancelled"}
    assert (by_id["SO-1002"], by_id["SO-1005"]) == ("delivered", "processing")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?status=lost", "status"),
        ("?owner=bob", "owner"),
        ("?status=paid&status=shipped", "status"),
        ("?x", "query"),
    ],
)
def test_list_orders_rejects_bad_query(demo_shop, query, field):
    response = demo_shop.call("GET", "/orders" + query, on_behalf_of="alice")
    assert response.status_code == 400
    assert error_of(response) == "invalid_request"
    assert response.json()["field"] == field


def test_get_order_happy_path(demo_shop):
    response = demo_shop.call("GET", "/orders/SO-2002", on_behalf_of="bob")
    assert response.status_code == 200
    order = response.json()["order"]
    assert order["order_id"] == "SO-2002"
    assert order["item"] == "27-inch 4K monitor"


def test_alice_cannot_read_bobs_order(demo_shop):
    response = demo_shop.call("GET", "/orders/SO-2002", on_behalf_of="alice")
    assert response.status_code == 404
    assert error_of(response) == "order_not_found"
    missing = demo_shop.call("GET", "/orders/SO-9999", on_behalf_of="alice")
    assert missing.status_code == 404
    # Someone else's order is indistinguishable from a missing one.
    assert missing.json() == response.json()


def test_get_order_rejects_malformed_id(demo_shop):
    response = demo_shop.call("GET", "/orders/1002", on_behalf_of="alice")
    assert response.status_code == 400
    assert response.json()["field"] == "order_id"


def test_failure_probe_returns_500_with_or_without_subject(demo_shop):
    anonymous = demo_shop.call("GET", "/diagnostics/failure")
    assert anonymous.status_code == 500
    assert error_of(anonymous) == "demo_failure"
    assert demo_shop.call("GET", "/diagnostics/failure", on_behalf_of="alice").status_code == 500
    assert demo_shop.call("GET", "/diagnostics/failure", on_behalf_of="mallory").status_code == 403
    assert demo_shop.client.get(demo_shop.url("/diagnostics/failure")).status_code == 401


# --- create_ticket and idempotency ----------------------------------------------------------------


def test_create_ticket_happy_path_and_replay(demo_shop):
    key = new_key()
    body = {
        "subject": "Headphones stopped charging",
        "message": "Left earcup\nno longer charges.",
        "order_id": "SO-1001",
    }
    first = demo_shop.call("POST", "/tickets", json_body=body, on_behalf_of="alice", idempotency_key=key)
    assert first.status_code == 201
    created = first.json()
    assert created["ok"] is True and created["status"] == "open"
    assert created["business_id"] == created["ticket"]["ticket_id"]
    assert created["ticket"]["order_id"] == "SO-1001"
    assert "idempotent-replayed" not in first.headers

    replay = demo_shop.call("POST", "/tickets", json_body=body, on_behalf_of="alice", idempotency_key=key)
    assert replay.status_code == 201
    assert replay.json() == created
    assert replay.headers["idempotent-replayed"] == "true"

    # Same arguments with different key order and whitespace are the same request.
    reordered = (
        b'{ "order_id": "SO-1001", "message": "Left earcup\\nno longer charges.",'
        b' "subject": "Headphones stopped charging" }'
    )
    again = demo_shop.call("POST", "/tickets", content=reordered, on_behalf_of="alice", idempotency_key=key)
    assert again.status_code == 201 and again.json() == created

    tickets = [t for t in demo_shop.records()["tickets"] if t["ticket_id"] == created["business_id"]]
    assert len(tickets) == 1


def test_same_key_with_different_body_is_409(demo_shop):
    key = new_key()
    body = {"subject": "Late delivery", "message": "Where is my espresso machine?"}
    assert (
        demo_shop.call(
            "POST", "/tickets", json_body=body, on_behalf_of="alice", idempotency_key=key
        ).status_code
        == 201
    )
    changed = {**body, "message": "Where is my order?"}
    conflict = demo_shop.call(
        "POST", "/tickets", json_body=changed, on_behalf_of="alice", idempotency_key=key
    )
    assert conflict.status_code == 409
    assert error_of(conflict) == "idempotency_key_conflict"
    other_user = demo_shop.call("POST", "/tickets", json_body=body, on_behalf_of="bob", idempotency_key=key)
    assert other_user.status_code == 409
    assert error_of(other_user) == "idempotency_key_conflict"


def test_new_key_creates_a_new_ticket(demo_shop):
    body = {"subject": "Question", "message": "Do you ship abroad?"}
    first = demo_shop.call("POST", "/tickets", json_body=body, on_behalf_of="bob", idempotency_key=new_key())
    second = demo_shop.call("POST", "/tickets", json_body=body, on_behalf_of="bob", idempotency_key=new_key())
    assert first.status_code == second.status_code == 201
    assert first.json()["business_id"] != second.json()["business_id"]


def test_concurrent_first_requests_with_one_key_create_one_ticket(demo_shop):
    key = new_key()
    body = {"subject": "Double click", "message": "The agent retried quickly."}
    results = []
    barrier = threading.Barrier(8)

    def send():
        barrier.wait()
        response = demo_shop.call(
            "POST", "/tickets", json_body=body, on_behalf_of="alice", idempotency_key=key
        )
        results.append((response.status_code, response.json()["business_id"]))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {status for status, _ in results} == {201}
    assert len({ticket_id for _, ticket_id in results}) == 1
    records = demo_shop.records()
    assert sum(1 for t in records["tickets"] if t["ticket_id"] == results[0][1]) == 1
    assert sum(1 for k in records["idempotency_keys"] if k["key"] == key) == 1


def test_write_without_idempotency_key_is_400(demo_shop):
    body = {"subject": "No key", "message": "Should be refused."}
    response = demo_shop.call("POST", "/tickets", json_body=body, on_behalf_of="alice")
    assert response.status_code == 400
    assert error_of(response) == "idempotency_key_required"
    bad = demo_shop.call(
        "POST", "/tickets", json_body=body, on_behalf_of="alice", idempotency_key="has space"
    )
    assert error_of(bad) == "invalid_idempotency_key"


def test_ticket_for_someone_elses_order_is_404(demo_shop):
    body = {"subject": "Keyboard", "message": "Keys stick.", "order_id": "SO-2001"}
    response = demo_shop.call(
        "POST", "/tickets", json_body=body, on_behalf_of="alice", idempotency_key=new_key()
    )
    assert response.status_code == 404
    assert error_of(response) == "order_not_found"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"message": "no subject"}, "subject"),
        ({"subject": "no message"}, "message"),
        ({"subject": "x", "message": "y", "priority": "high"}, "priority"),
        ({"subject": 123, "message": "y"}, "subject"),
        ({"subject": "   ", "message": "y"}, "subject"),
        ({"subject": "x" * 121, "message": "y"}, "subject"),
        ({"subject": "line\nbreak", "message": "y"}, "subject"),
        ({"subject": "x", "message": "bell\x07"}, "message"),
        ({"subject": "x", "message": "y", "order_id": None}, "order_id"),
        ({"subject": "x", "message": "y", "order_id": "1001"}, "order_id"),
    ],
)
def test_create_ticket_input_validation(demo_shop, body, field):
    response = demo_shop.call(
        "POST", "/tickets", json_body=body, on_behalf_of="alice", idempotency_key=new_key()
    )
    assert response.status_code == 400
    assert error_of(response) == "invalid_request"
    assert response.json()["field"] == field


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        (b'{"subject":"a","subject":"b","message":"c"}', 400, "invalid_json"),
        (b'{"subject":"a","message":NaN}', 400, "invalid_json"),
        (b"\xff\xfe", 400, "invalid_json"),
        (b"{", 400, "invalid_json"),
        (b'["subject"]', 400, "invalid_request"),
    ],
)
def test_malformed_json_is_rejected(demo_shop, content, status, code):
    response = demo_shop.call(
        "POST", "/tickets", content=content, on_behalf_of="alice", idempotency_key=new_key()
    )
    assert response.status_code == status
    assert error_of(response) == code


def test_non_json_content_type_is_415(demo_shop):
    response = demo_shop.call(
        "POST",
        "/tickets",
        content=b"subject=a&message=b",
        on_behalf_of="alice",
        idempotency_key=new_key(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 415


def test_oversized_body_is_413(demo_shop):
    body = {"subject": "big", "message": "x" * (70 * 1024)}
    response = demo_shop.call(
        "POST", "/tickets", json_body=body, on_behalf_of="alice", idempotency_key=new_key()
    )
    assert response.status_code == 413
    assert error_of(response) == "request_too_large"


# --- cancel_order ---------------------------------------------------------------------------------


def test_cancel_order_happy_path_replay_and_state_conflict(demo_shop):
    key = new_key()
    body = {"reason": "Ordered the wrong size"}
    first = demo_shop.call(
        "POST", "/orders/SO-1003/cancel", json_body=body, on_behalf_of="alice", idempotency_key=key
    )
    assert first.status_code == 200
    assert first.json()["status"] == "cancelled"
    assert first.json()["order"]["status"] == "cancelled"
    assert first.json()["business_id"] == "SO-1003"

    # The replay returns the recorded outcome even though the order can no longer be cancelled.
    replay = demo_shop.call(
        "POST", "/orders/SO-1003/cancel", json_body=body, on_behalf_of="alice", idempotency_key=key
    )
    assert replay.status_code == 200 and replay.json() == first.json()

    fresh = demo_shop.call(
        "POST", "/orders/SO-1003/cancel", json_body=body, on_behalf_of="alice", idempotency_key=new_key()
    )
    assert fresh.status_code == 409
    assert error_of(fresh) == "order_not_cancellable"
    assert (
        demo_shop.call("GET", "/orders/SO-1003", on_behalf_of="alice").json()["order"]["status"]
        == "cancelled"
    )


def test_cancel_without_body_and_refused_attempt_keeps_key_unused(demo_shop):
    key = new_key()
    refused = demo_shop.call("POST", "/orders/SO-1001/cancel", on_behalf_of="alice", idempotency_key=key)
    assert refused.status_code == 409
    assert error_of(refused) == "order_not_cancellable"
    assert refused.json()["order_status"] == "delivered"
    assert key not in {k["key"] for k in demo_shop.records()["idempotency_keys"]}

    accepted = demo_shop.call("POST", "/orders/SO-2001/cancel", on_behalf_of="bob", idempotency_key=new_key())
    assert accepted.status_code == 200
    assert accepted.json()["order"]["status"] == "cancelled"


def test_cannot_cancel_someone_elses_order(demo_shop):
    response = demo_shop.call("POST", "/orders/SO-1004/cancel", on_behalf_of="bob", idempotency_key=new_key())
    assert response.status_code == 404
    assert demo_shop.call("GET", "/orders/SO-1004", on_behalf_of="alice").json()["order"]["status"] == (
        "pending_payment"
    )


def test_cancel_and_refund_follow_the_shops_handbook(demo_shop):
    """The rules the demo knowledge tells the agent (examples/demo-knowledge/) are the shop's rules:
    cancelled until it ships, refunded once delivered, never the other way round."""
    cancellations = (HANDBOOK / "cancellations.md").read_text(encoding="utf-8")
    refunds = (HANDBOOK / "refunds.md").read_text(encoding="utf-8")
    assert "An order can be cancelled while it is `processing`." in cancellations
    assert "Shipped orders cannot be cancelled" in cancellations
    assert "The order must be in the status\n`delivered`" in refunds
    assert "orders that are still `processing` are cancelled instead of refunded" in refunds
    assert "processing" in CANCELLABLE_STATUSES and "shipped" not in CANCELLABLE_STATUSES
    assert set(REFUNDABLE_STATUSES) == {"delivered"}

    def refund(order_id):
        return demo_shop.call(
            "POST",
            f"/orders/{order_id}/refunds",
            json_body={"amount": 1, "reason": "x"},
            on_behalf_of="alice",
            idempotency_key=new_key(),
        )

    def cancel(order_id):
        return demo_shop.call(
            "POST", f"/orders/{order_id}/cancel", on_behalf_of="alice", idempotency_key=new_key()
        )

    for order_id, status in (
        ("SO-1005", "processing"),
        ("SO-1006", "shipped"),
        ("SO-1004", "pending_payment"),
    ):
        refused = refund(order_id)
        assert (refused.status_code, error_of(refused), refused.json()["order_status"]) == (
            409,
            "order_not_refundable",
            status,
        )
    for order_id, status in (("SO-1006", "shipped"), ("SO-1002", "delivered")):
        refused = cancel(order_id)
        assert (refused.status_code, error_of(refused), refused.json()["order_status"]) == (
            409,
            "order_not_cancellable",
            status,
        )
    accepted = cancel("SO-1005")
    assert (accepted.status_code, accepted.json()["order"]["status"]) == (200, "cancelled")


# --- request_refund -------------------------------------------------------------------------------


def refunded(shop, user, order_id):
    return shop.call("GET", f"/orders/{order_id}", on_behalf_of=user).json()["order"]["refunded_amount"]


def test_request_refund_happy_path_and_replay(demo_shop):
    before = refunded(demo_shop, "alice", "SO-1002")
    key = new_key()
    body = {"amount": 120.5, "reason": "Arrived with a dented drip tray"}
    first = demo_shop.call(
        "POST", "/orders/SO-1002/refunds", json_body=body, on_behalf_of="alice", idempotency_key=key
    )
    assert first.status_code == 201
    payload = first.json()
    assert payload["status"] == "submitted"
    assert payload["business_id"] == payload["refund"]["refund_id"]
    assert (payload["refund"]["amount"], payload["refund"]["currency"]) == (120.5, "USD")

    replay = demo_shop.call(
        "POST",
        "/orders/SO-1002/refunds",
        content=b'{"amount":120.50,"reason":"Arrived with a dented drip tray"}',
        on_behalf_of="alice",
        idempotency_key=key,
    )
    assert replay.status_code == 201 and replay.json() == payload
    assert refunded(demo_shop, "alice", "SO-1002") == pytest.approx(before + 120.5)

    changed = demo_shop.call(
        "POST",
        "/orders/SO-1002/refunds",
        json_body={**body, "amount": 121},
        on_behalf_of="alice",
        idempotency_key=key,
    )
    assert changed.status_code == 409
    assert error_of(changed) == "idempotency_key_conflict"


def test_integer_and_float_amounts_are_the_same_request(demo_shop):
    key = new_key()
    first = demo_shop.call(
        "POST",
        "/orders/SO-2002/refunds",
        content=b'{"amount":10,"reason":"Dead pixel"}',
        on_behalf_of="bob",
        idempotency_key=key,
    )
    again = demo_shop.call(
        "POST",
        "/orders/SO-2002/refunds",
        content=b'{"amount":10.0,"reason":"Dead pixel"}',
        on_behalf_of="bob",
        idempotency_key=key,
    )
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()


def test_refund_above_approval_threshold_is_accepted_by_the_business(demo_shop):
    # approval.when (amount > 500) is enforced by the hub before dispatch; the shop only checks limits.
    response = demo_shop.call(
        "POST",
        "/orders/SO-2002/refunds",
        json_body={"amount": 501, "reason": "Wrong model"},
        on_behalf_of="bob",
        idempotency_key=new_key(),
    )
    assert response.status_code == 201


def test_refund_limits_and_order_state(demo_shop):
    too_much = demo_shop.call(
        "POST",
        "/orders/SO-1001/refunds",
        json_body={"amount": 199.01, "reason": "x"},
        on_behalf_of="alice",
        idempotency_key=new_key(),
    )
    assert too_much.status_code == 409
    assert error_of(too_much) == "refund_exceeds_remaining"
    cancelled = demo_shop.call(
        "POST",
        "/orders/SO-2003/refunds",
        json_body={"amount": 1, "reason": "x"},
        on_behalf_of="bob",
        idempotency_key=new_key(),
    )
    assert cancelled.status_code == 409
    assert error_of(cancelled) == "order_not_refundable"
    foreign = demo_shop.call(
        "POST",
        "/orders/SO-2002/refunds",
        json_body={"amount": 1, "reason": "x"},
        on_behalf_of="alice",
        idempotency_key=new_key(),
    )
    assert foreign.status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"amount": "100", "reason": "x"}, "amount"),
        ({"amount": True, "reason": "x"}, "amount"),
        ({"amount": 0, "reason": "x"}, "amount"),
        ({"amount": -5, "reason": "x"}, "amount"),
        ({"amount": 1.234, "reason": "x"}, "amount"),
        ({"amount": 1e9, "reason": "x"}, "amount"),
        ({"reason": "x"}, "amount"),
        ({"amount": 5}, "reason"),
        ({"amount": 5, "reason": ""}, "reason"),
        ({"amount": 5, "reason": "x", "currency": "EUR"}, "currency"),
    ],
)
def test_request_refund_input_validation(demo_shop, body, field):
    response = demo_shop.call(
        "POST", "/orders/SO-1002/refunds", json_body=body, on_behalf_of="alice", idempotency_key=new_key()
    )
    assert response.status_code == 400
    assert error_of(response) == "invalid_request"
    assert response.json()["field"] == field


@pytest.mark.parametrize("amount", [b"1" + b"0" * 400, b"1e400", b"-0"])
def test_request_refund_rejects_extreme_numbers(demo_shop, amount):
    content = b'{"amount":' + amount + b',"reason":"x"}'
    response = demo_shop.call(
        "POST", "/orders/SO-1002/refunds", content=content, on_behalf_of="alice", idempotency_key=new_key()
    )
    assert response.status_code == 400
    assert response.json()["field"] == "amount"


# --- routing and the records view -----------------------------------------------------------------


def test_unknown_path_is_404_and_wrong_method_is_405(demo_shop):
    assert demo_shop.call("GET", "/admin", on_behalf_of="alice").status_code == 404
    response = demo_shop.call("DELETE", "/orders", on_behalf_of="alice")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET"


def test_records_view_requires_a_signature(demo_shop):
    assert demo_shop.client.get(demo_shop.url("/_demo/records")).status_code == 401
    records = demo_shop.records()
    assert {o["order_id"] for o in records["orders"]} >= {"SO-1001", "SO-2001"}
