"""An approved write with large arguments reaches the business system with exactly the frozen bytes.

Regression: frozen arguments were sealed under a 64 KiB cap meant for provider secrets, so any
approved write past ~48 KB of JSON ended ``rejected_before_dispatch`` (``frozen_arguments_unavailable``)
after the approver's decision was spent. The argument budget (1 MiB of compact UTF-8 JSON) now holds
end to end: at ``limit - 1`` and ``limit`` the call waits, is approved, resumes and is sent byte for
byte; at ``limit + 1`` it is refused when invoked, never later.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from agent_runtime.models import ToolApproval, ToolInvocation
from agent_runtime.services.invocations import ARGUMENTS_MAX_BYTES, arguments_hash
from bailing.api.jsjson import js_stringify
from tests.support.invocations import (
    INVOKE_URL,
    agent,
    approve,
    invoke_body,
    post,
    provider_for,
    resume_url,
    sized_arguments,
    workspace,
)

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "bulk"
TOOL = "chaos_bulk_ok"


@pytest.fixture
def session(chaos_business):
    provider_for(
        name="chaos", base_url=chaos_business.base_url, secret=chaos_business.secret, timeout_ms=20_000
    )
    workspace(route_key=ROUTE, provider="chaos", write_tools=[TOOL])
    return agent(route_key=ROUTE)


@pytest.mark.parametrize("size", [48 * 1024, 900_000, ARGUMENTS_MAX_BYTES - 1, ARGUMENTS_MAX_BYTES])
def test_an_approved_write_of_any_size_within_the_budget_is_sent_with_the_frozen_bytes(
    api_client, session, chaos_business, size
):
    arguments = sized_arguments(size, note=f"n{size}")
    body = invoke_body(session, ROUTE, TOOL, arguments)
    waiting = post(api_client, session, INVOKE_URL, body).json()
    assert waiting["state"] == "awaiting_approval", waiting
    approval = ToolApproval.objects.get(pk=waiting["approval_id"])
    assert approval.args_bytes == size
    assert approval.args_hash == arguments_hash(arguments)
    assert chaos_business.calls(TOOL) == 0

    approve(approval.pk)
    result = post(api_client, session, resume_url(body["invocation_id"]), {}).json()
    assert result["state"] == "executed", result

    (received,) = chaos_business.requests(TOOL)
    assert received.body == js_stringify(arguments).encode("utf-8")
    assert hashlib.sha256(received.body).hexdigest() in result["text"]
    assert arguments_hash(json.loads(received.body)) == approval.args_hash
    assert chaos_business.writes(TOOL) == 1
    # A replay answers the stored result and sends nothing.
    assert post(api_client, session, resume_url(body["invocation_id"]), {}).json() == result
    assert chaos_business.writes(TOOL) == 1


def test_one_byte_over_the_budget_is_refused_when_invoked_and_nothing_is_stored(
    api_client, session, chaos_business
):
    body = invoke_body(session, ROUTE, TOOL, sized_arguments(ARGUMENTS_MAX_BYTES + 1))
    response = post(api_client, session, INVOKE_URL, body)
    assert response.status_code == 413
    assert response.json() | {"message": ""} == {
        "error": "arguments_too_large",
        "message": "",
        "origin": "core",
        "dispatch": "not_dispatched",
        "limit_scope": "arguments",
        "max_bytes": ARGUMENTS_MAX_BYTES,
        "actual_bytes": ARGUMENTS_MAX_BYTES + 1,
    }
    assert not ToolInvocation.objects.filter(invocation_id=body["invocation_id"]).exists()
    assert not ToolApproval.objects.exists()
    assert chaos_business.calls(TOOL) == 0
