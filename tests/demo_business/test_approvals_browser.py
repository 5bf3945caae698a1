"""The approver's page in headless Chromium: the forms work as a browser posts them.

A browser adds what scripts never send (``Origin``, ``Sec-Fetch-Site``, the page's referrer policy
applied to its own forms), so the cross-origin check is only proven against a real one.
"""

import json

import pytest

from tests.demo_business.test_approvals import TOKEN, FakeHub, approval_request, deliver, hub_state, stored
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
        # #2 was approved in the hub console meanwhile: the hub refuses the shop's decision with 409.
        hub.answer(2, (409, {"error": "approval_conflict"}, {}))

        page = browser_page
        page.goto(shop.url("/approvals"))
        assert "2 pending." in page.locator(".lead").inner_text()
        page.locator("#approval-1 form[action$='/deny'] input[name=comment]").fill("Not without a photo")
        with page.expect_navigation():
            page.locator("#approval-1 form[action$='/deny'] button").click()
        assert page.url == shop.url("/approvals")  # 303 back to the inbox
        assert "decision demo-1-denied" in page.locator("#approval-1").inner_text()

        hub.state(2, 200, hub_state(2, "approved"))
        with page.expect_response(lambda r: r.url.endswith("/approvals/2/approve")) as answer:
            page.locator("#approval-2 form[action$='/approve'] button").click()
        assert answer.value.status == 409
        alert = page.get_by_role("alert").inner_text()
        assert "Approval #2 was already decided in the hub: approved by manager in the hub console" in alert
        assert "still pending" not in page.content()
        assert page.locator("#approval-2 form").count() == 0  # decided: nothing left to click
        assert "Not decided here: Approved by manager" in page.locator("#approval-2").inner_text()
        assert "0 pending." in page.locator(".lead").inner_text()
        screenshot(page, "demo-shop-approvals")
        page.set_viewport_size({"width": 1024, "height": 860})
        screenshot(page, "demo-shop-approvals-1024")

        records = stored(shop)
        assert (records[1]["status"], records[2]["status"]) == ("denied", "approved")
    sent = [json.loads(r["body"]) for r in hub.requests if r["method"] == "POST"]
    assert [(d["approval_id"], d["decision"]) for d in sent] == [(1, "denied"), (2, "approved")]
    assert sent[0]["comment"] == "Not without a photo"
