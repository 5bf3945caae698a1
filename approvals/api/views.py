"""``POST /approvals/:id/decision``: a business approval system decides (``bailing.approval-decision.v1``).

Authentication, either of:

* ``Authorization: Bearer <Client Token>`` of the client that owns the invocation (its agent client);
* ``X-Bailing-Timestamp`` (milliseconds) + ``X-Bailing-Signature: sha256=HMAC(client token, "<ms>.<raw
  body>")`` within 300 s, keyed by that same client's token.

The body (at most 64 KiB) must name the approval it decides and match its frozen call exactly
(``approval_id``, ``job_id``, ``request_id``, ``args_hash``); see docs/protocol.md "Decisions".
Answers ``200 {ok, id, status, decision_id, idempotent, rerun}``; 400, 401, 404 and 409 in the flat
JSON envelope like every business endpoint.
"""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runtime.api.authentication import ClientTokenAuthentication
from agent_runtime.models import ToolApproval
from agent_runtime.services.clients import client_token_plaintext
from approvals.budgets import DECISION_BODY_MAX_BYTES, DECISION_COMMENT_MAX_CHARS
from approvals.services.decisions import approval_decide
from bailing.api.authentication import bearer_token
from bailing.api.errors import InvalidRequest, NotFound, Unauthorized
from bailing.api.serializers import StrictCharField, StrictIntegerField, StrictSerializer, validate_strict
from bailing.audit.actor import Actor
from bailing.signing import SIGNATURE_HEADER, verify_callback

DECISION_ID_PATTERN = r"[A-Za-z0-9_.:-]{1,128}"
_APPROVAL_ID_RE = re.compile(r"[1-9][0-9]{0,17}")


class ApproverField(serializers.Field):
    """``approver``: a string of at most 64 characters, or ``{id, name?}`` (the contract's example)."""

    default_error_messages = {"type": "Must be a string or an object with an id.", "too_long": "Too long."}
    openapi_schema = {
        "oneOf": [
            {"type": "string", "maxLength": 64},
            {
                "type": "object",
                "properties": {"id": {"type": "string", "maxLength": 64}, "name": {}},
                "required": ["id"],
                "additionalProperties": False,
            },
        ]
    }

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, dict):
            if set(data) - {"id", "name"} or not isinstance(data.get("id"), str):
                self.fail("type")
            data = data["id"]
        if not isinstance(data, str) or not data.strip() or not data.isprintable():
            self.fail("type")
        if len(data) > 64:
            self.fail("too_long")
        return data


class DecisionInput(StrictSerializer):
    kind = StrictCharField(pattern="tool_approval_decision")
    schema_version = StrictCharField(pattern=r"bailing\.approval-decision\.v1")
    approval_id = StrictIntegerField(min_value=1)
    job_id = StrictCharField(max_length=64)
    request_id = StrictCharField(max_length=128)
    args_hash = StrictCharField(max_length=64)
    decision = StrictCharField(pattern="approved|denied")
    decision_id = StrictCharField(pattern=DECISION_ID_PATTERN)
    approver = ApproverField(required=False)
    operator = ApproverField(required=False)
    comment = StrictCharField(
        max_length=DECISION_COMMENT_MAX_CHARS, allow_blank=True, multiline=True, required=False, display=True
    )
    decided_at = StrictCharField(max_length=64, required=False)


class ApprovalDecisionApi(APIView):
    authentication_classes: list = []
    schema_request_serializer = DecisionInput
    body_max_bytes = DECISION_BODY_MAX_BYTES

    def post(self, request, approval_id: str):
        if not _APPROVAL_ID_RE.fullmatch(approval_id):
            raise NotFound("Unknown approval.")
        pk = int(approval_id)
        client, auth = self._authenticate(request, pk)
        data = validate_strict(DecisionInput, request.data)
        if data["approval_id"] != pk:
            raise InvalidRequest("approval_id does not match the path.", field="approval_id")
        approver = data.get("approver") or data.get("operator")
        if approver is None:
            raise InvalidRequest(field="approver")
        outcome = approval_decide(
            approval_id=pk,
            decision=data["decision"],
            decision_id=data["decision_id"],
            approver=approver,
            comment=data.get("comment", ""),
            source=f"business:{auth}",
            actor=Actor.client(client),
            client_id=client.pk,
            match={
                "job_id": data["job_id"],
                "request_id": data["request_id"],
                "args_hash": data["args_hash"],
            },
        )
        return Response(outcome.body())

    def _authenticate(self, request, pk: int):
        """The owning client, by its Client Token or by a signature made with it."""
        if bearer_token(request) is not None:
            result = ClientTokenAuthentication().authenticate(request)
            return result[1], "client_token"
        if request.META.get("HTTP_" + SIGNATURE_HEADER.upper().replace("-", "_")) is None:
            raise Unauthorized()
        approval = ToolApproval.objects.select_related("invocation__client").filter(pk=pk).first()
        if approval is None:
            raise NotFound("Unknown approval.")
        client = approval.invocation.client
        token = client_token_plaintext(client) if client.enabled else None
        body = _raw_body(request)
        if token is None or not verify_callback(secret=token, headers=request.headers, body=body):
            raise Unauthorized()
        return client, "signed"


def _raw_body(request) -> bytes:
    """The raw bytes the signature covers (the budgeted parser keeps them)."""
    request.data  # noqa: B018 - parse now, under the body budget
    return getattr(request, "raw_body", b"")
