"""A tool call whose business answer is stored sealed under a data policy, made for real: the Demo
Shop's order SO-1007 (its notes hold a card number, an email, an injection line and an exfiltrating
image) read through a workspace whose policy redacts them (injection flagged)."""

from __future__ import annotations

from agent_runtime.models import Route, ToolInvocation
from tests.support.invocations import INVOKE_URL, agent, invoke_body, post, provider_for, workspace

SEALED_ROUTE = "shop-sealed"
CARD = "4111 1111 1111 1111"
EMAIL = "carol.buyer@example.com"
SEALED_FINDINGS = {"email": 1, "payment_card": 1, "injection": 1, "external_media": 1}
SEALED_POLICY = {
    "detectors": ["payment_card", "email", "injection", "external_media"],
    "actions": {"injection": "flag"},
}


def sealed_call(api_client, demo_shop, *, route_key: str = SEALED_ROUTE) -> ToolInvocation:
    """``get_order`` of SO-1007 under :data:`SEALED_POLICY`; the invocation, its journal loaded."""
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key=route_key, provider="demo-shop", write_tools=[])
    Route.objects.filter(route_key=route_key).update(data_policy=SEALED_POLICY)
    session = agent(route_key=route_key)
    body = invoke_body(session, route_key, "get_order", {"order_id": "SO-1007"})
    result = post(api_client, session, INVOKE_URL, body).json()
    assert result["data_policy"] == {"action": "redact", "findings": SEALED_FINDINGS}, result
    return ToolInvocation.objects.select_related("journal").get(invocation_id=body["invocation_id"])
