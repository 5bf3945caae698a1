"""Revealing a sealed business answer in headless Chromium at 1024 px: the administrator's trace
shows the filtered answer and the data policy's counts, Reveal leads to a confirmation, confirming
shows the raw answer and records the reveal; an approver's trace has no Reveal, and the reveal URL
is refused to them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.services.answers import REVEALED_ACTION
from bailing.audit.models import AuditEvent
from tests.support.console import PASSWORD, csp_violations
from tests.support.sealed_answers import CARD, EMAIL, sealed_call

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def _sign_in(chromium, base: str, username: str):
    context = chromium.new_context(viewport={"width": 1024, "height": 800}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(10_000)
    violations = csp_violations(page)
    page.goto(base + reverse("console:dashboard"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:dashboard"))
    return page, violations


def test_an_administrator_reveals_the_raw_answer_and_an_approver_cannot(
    hub_server, api_client, chromium, screenshot, console_roles, demo_shop
):
    from tests.factories import UserFactory

    invocation = sealed_call(api_client, demo_shop)
    UserFactory(username="ada", roles=["administrator"])
    UserFactory(username="april", roles=["approver"])
    base = hub_server.url
    trace_url = base + reverse("console:invocation_detail", args=[invocation.job_id])

    page, violations = _sign_in(chromium, base, "ada")
    page.goto(trace_url)
    answer = page.locator("#business-answer")
    text = answer.locator("#answer-text").inner_text()
    assert "[REDACTED:payment_card#1]" in text and "[REDACTED:email#1]" in text
    assert CARD not in page.content() and EMAIL not in page.content()
    findings = answer.locator("#answer-findings").inner_text()
    for line in ("Data policy", "redact", "payment_card", "email", "injection", "external_media"):
        assert line in findings
    screenshot(page, "dp-seal-01-trace-filtered")

    answer.get_by_role("link", name="Reveal raw answer").click()
    page.wait_for_url(base + reverse("console:invocation_answer_reveal", args=[invocation.job_id]))
    assert page.get_by_role("heading", level=1).inner_text() == "Reveal the raw business answer?"
    assert CARD not in page.content()
    assert not AuditEvent.objects.filter(action=REVEALED_ACTION).exists()
    screenshot(page, "dp-seal-02-confirm")

    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.get_by_role("button", name="Reveal the raw answer").click()
    response = posted.value
    assert response.status == 200 and "no-store" in response.headers["cache-control"]
    raw = page.locator("#raw-answer").inner_text()
    assert CARD in raw and EMAIL in raw and "Ignore previous instructions" in raw
    screenshot(page, "dp-seal-03-revealed")
    (event,) = AuditEvent.objects.filter(action=REVEALED_ACTION)
    assert (event.actor, event.target_id) == ("ada", str(invocation.job_id))
    assert CARD not in str(event.data) and EMAIL not in str(event.data)
    assert not violations, violations
    page.context.close()

    page, violations = _sign_in(chromium, base, "april")
    page.goto(trace_url)
    assert "[REDACTED:payment_card#1]" in page.locator("#answer-text").inner_text()
    assert page.get_by_role("link", name="Reveal raw answer").count() == 0
    refused = page.goto(base + reverse("console:invocation_answer_reveal", args=[invocation.job_id]))
    assert refused.status == 403 and CARD not in page.content()
    assert AuditEvent.objects.filter(action=REVEALED_ACTION).count() == 1
    assert not violations, violations
