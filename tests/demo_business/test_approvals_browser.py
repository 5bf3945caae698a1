"""The approver's page in headless Chromium: the forms work as a browser posts them.

A browser adds what scripts never send (``Origin``, ``Sec-Fetch-Site``, the page's referrer policy
applied to its own forms), so the cross-origin check is only proven against a real one.
"""

import json

import pytest

from tests.demo_business.test_approvals import TOKEN, FakeHub, approval_request, deliver, stored
from tests.support.demo_business import running_demo_business

pytestmark = pytest.mark.browser


@pytest.fixture
def hub():
    fake = FakeHub()
    yield fake
    fake.stop()


def test_manager_approves_and_denies_in_the_browser(hub, browser_page, screenshot):
    env = {"DEMO_CLIENT_TOKEN": TOKEN, "DEMO_HUB_URL": hub.url}
    with running_demo_business(extra_env=env) as shop:
        refund, cancel = approval_request(1), approval_request(2, tool="cancel_order", risk="high")
        for body in (refund, cancel):
            assert deliver(shop, body).status_code == 200
        hub.answer(2, (409, {"error": "approval_conflict"}, {}))

        page = browser_page
        page.goto(shop.url("/approvals"))
        page.locator("#approval-1 form[action$='/deny'] input[name=comment]").fill("Not without a photo")
        with page.expect_navigation():
            page.locator("#approval-1 form[action$='/deny'] button").click()
        assert page.url == shop.url("/approvals")  # 303 back to the inbox
        assert "decision demo-1-denied" in page.locator("#approval-1").inner_text()

        with page.expect_response(lambda r: r.url.endswith("/approvals/2/approve")) as answer:
            page.locator("#approval-2 form[action$='/approve'] button").click()
        assert answer.value.status == 502
        assert "HTTP 409" in page.get_by_role("alert").inner_text()
        assert page.locator("#approval-2 form").count() == 2  # still pending, can be retried
        screenshot(page, "demo-shop-approvals")

        records = stored(shop)
        assert (records[1]["status"], records[2]["status"]) == ("denied", "pending")
    sent = [json.loads(r["body"]) for r in hub.requests]
    assert [(d["approval_id"], d["decision"]) for d in sent] == [(1, "denied"), (2, "approved")]
    assert sent[0]["comment"] == "Not without a photo"
