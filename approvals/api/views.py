"""The business approval endpoints: ``POST /approvals/:id/decision``, where a business approval system
decides (``bailing.approval-decision.v1``), and ``GET /approvals/:id``, where it reads where the
approval stands (``bailing.approval-state.v1``, this hub's addition: it learns of a decision made in
the hub console, which the upstream contract never tells it).

Authentication of both, either of:

* ``Authorization: Bearer <Client Token>`` of the client that owns the invocation (its agent client);
* ``X-Bailing-Timestamp`` (milliseconds) + ``X-Bailing-Signature: sha256=HMAC(client token, "<ms>.<raw
  body>")`` within 300 s, keyed by that same client's token (a GET has no body: ``"<ms>."``).

The decision's body (at most 64 KiB) must name the approval it decides and match its frozen call exactly
(``approval_id``, ``job_id``, ``request_id``, ``args_hash``); see docs/protocol.md "Decisions".
Answers ``200 {ok, id, status, decision_id, idempotent, rerun}``; 400, 401, 404 and 409 in the flat
JSON envelope like every business endpoint. The state read answers ``200`` with the selector's
document (:func:`approvals.selectors.approval_state_get`), 401 and 404 likewise.
"""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runtime.api.authentication import ClientTokenAuthentication
from agent_runtime.services.clients import client_token_plaintext
from approvals.budgets import DECISION_BODY_MAX_BYTES, DECISION_COMMENT_MAX_CHARS
from approvals.selectors import approval_owner_client, approval_state_get
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
        pk = _approval_pk(approval_id)
        client, auth = business_authenticate(request, pk)
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


class ApprovalStateApi(APIView):
    """``GET /approvals/:id``: where one of the caller's approvals stands."""

    authentication_classes: list = []

    def initial(self, request, *args, **kwargs):
        # A path that cannot name an approval is an unknown path, whatever the method (404, not 405).
        _approval_pk(kwargs["approval_id"])
        super().initial(request, *args, **kwargs)

    def get(self, request, approval_id: str):
        pk = _approval_pk(approval_id)
        client, _ = business_authenticate(request, pk, signs_body=False)
        state = approval_state_get(approval_id=pk, client_id=client.pk)
        if state is None:
            raise NotFound("Unknown approval.")
        return Response(state)


def _approval_pk(approval_id: str) -> int:
    if not _APPROVAL_ID_RE.fullmatch(approval_id):
        raise NotFound("Unknown approval.")
    return int(approval_id)


def business_authenticate(request, pk: int, *, signs_body: bool = True):
    """The business client calling about approval ``pk``: by its Client Token (any enabled client;
    the caller then looks the approval up among that client's own), or by a callback signature made
    with the token of the client owning the approval, over the raw body (``signs_body``) or over
    nothing (a GET). Returns ``(client, auth)``. The body is read only on the signed path, after the
    headers said a signature is there, so a bearer request is authenticated before it is parsed."""
    if bearer_token(request) is not None:
        result = ClientTokenAuthentication().authenticate(request)
        return result[1], "client_token"
    if request.META.get("HTTP_" + SIGNATURE_HEADER.upper().replace("-", "_")) is None:
        raise Unauthorized()
    client = approval_owner_client(approval_id=pk)
    if client is None:
        raise NotFound("Unknown approval.")
    token = client_token_plaintext(client) if client.enabled else None
    body = _raw_body(request) if signs_body else b""
    if token is None or not verify_callback(secret=token, headers=request.headers, body=body):
        raise Unauthorized()
    return client, "signed"


def _raw_body(request) -> bytes:
    """The raw bytes the signature covers (the budgeted parser keeps them)."""
    request.data  # noqa: B018 - parse now, under the body budget
    return getattr(request, "raw_body", b"")
