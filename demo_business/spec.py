"""The Demo Shop tool catalog: OpenAPI 3.1 with one ``x-agent-capability`` (ACC v1) per operation.

Served at ``/.well-known/bailing/tools.json`` to correctly signed requests only (``signed_required``).
The root ``x-bailing-authz-probe`` declares the endpoint where a hub checks, after each refresh, that
the shop refuses a subject that is not one of its customers (``POST`` :data:`AUTHZ_PROBE_PATH`).

Two compatibility choices, both because hub compilers read operations shallowly:

* request parameters and bodies are written inline (a compiler copies ``parameters[].schema`` and
  ``requestBody...schema.properties`` without resolving ``$ref``); ``$ref`` is used for responses,
  which only humans and debug views read;
* the signature headers are documented as a security scheme, never as parameters, so they do not
  become model-visible tool arguments.

``guidance.examples`` entries are argument objects: hubs append the first one to the tool
description as a sample call.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from demo_business.store import ORDER_STATUSES

SPEC_PATH = "/.well-known/bailing/tools.json"
AUTHZ_PROBE_PATH = "/.well-known/bailing/authz-probe"
ORDER_ID_PATTERN = r"^SO-[0-9]{4}$"

_ERRORS = {
    "400": {"$ref": "#/components/responses/InvalidRequest"},
    "401": {"$ref": "#/components/responses/Unauthorized"},
    "403": {"$ref": "#/components/responses/Forbidden"},
}


def _json_response(description: str, schema_ref: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}},
    }


def _order_id_parameter(description: str) -> dict[str, Any]:
    return {
        "name": "order_id",
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "pattern": ORDER_ID_PATTERN, "examples": ["SO-1002"]},
    }


def _json_body(
    properties: dict[str, Any], required: list[str], *, body_required: bool = True
) -> dict[str, Any]:
    return {
        "required": body_required,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": properties,
                    "required": required,
                }
            }
        },
    }


LIST_ORDERS = {
    "operationId": "list_orders",
    "summary": "List the current customer's orders",
    "description": (
        "Returns the orders that belong to the customer the agent is acting for. Never returns other "
        "customers' orders. Optionally filtered by status."
    ),
    "tags": ["orders"],
    "parameters": [
        {
            "name": "status",
            "in": "query",
            "required": False,
            "description": "Only return orders in this status. Omit to list every order.",
            "schema": {"type": "string", "enum": list(ORDER_STATUSES)},
        }
    ],
    "responses": {
        "200": _json_response("The customer's orders.", "OrderList"),
        **_ERRORS,
    },
    "x-agent-capability": {
        "version": 1,
        "enabled": True,
        "scope": "shop.order.read",
        "subject": {"required": True},
        "risk": {"level": "low"},
        "execution": {"readonly": True, "idempotent": True},
        "outcome": {"result": "The customer's orders with status and amounts.", "side_effect": "read"},
        "guidance": {
            "when_to_use": (
                "The customer asks about their orders in general, wants to find an order without "
                "knowing its id, or asks which orders are processing, shipped, delivered or awaiting "
                "payment."
            ),
            "returns": "A list of orders: order_id, item, amount, currency, status, refunded_amount.",
            "examples": [{"status": "shipped"}],
        },
    },
}

GET_ORDER = {
    "operationId": "get_order",
    "summary": "Get one order of the current customer",
    "description": (
        "Looks up a single order by id for the customer the agent is acting for. An order of another "
        "customer is reported as not found."
    ),
    "tags": ["orders"],
    "parameters": [_order_id_parameter("Order id as shown to the customer, e.g. SO-1002. Never guess it.")],
    "responses": {
        "200": _json_response("The order.", "OrderEnvelope"),
        **_ERRORS,
        "404": {"$ref": "#/components/responses/NotFound"},
    },
    "x-agent-capability": {
        "version": 1,
        "enabled": True,
        "scope": "shop.order.read",
        "subject": {"required": True},
        "risk": {"level": "low"},
        "execution": {"readonly": True, "idempotent": True},
        "outcome": {"result": "One order with its status and refunded amount.", "side_effect": "read"},
        "guidance": {
            "when_to_use": (
                "The customer names a specific order id and asks about its status, item or amount."
            ),
            "returns": "The order: order_id, item, amount, currency, status, refunded_amount, created_at.",
            "examples": [{"order_id": "SO-1002"}],
        },
    },
}

CREATE_TICKET = {
    "operationId": "create_ticket",
    "summary": "Open a support ticket for the current customer",
    "description": (
        "Creates a support ticket that a human agent will follow up. Does not change any order, "
        "refund or cancel anything. Optionally links the ticket to one of the customer's orders."
    ),
    "tags": ["support"],
    "requestBody": _json_body(
        {
            "subject": {
                "type": "string",
                "minLength": 1,
                "maxLength": 120,
                "description": "One-line summary of the problem, in the customer's words.",
            },
            "message": {
                "type": "string",
                "minLength": 1,
                "maxLength": 2000,
                "description": "What happened and what the customer wants; include facts already looked up.",
            },
            "order_id": {
                "type": "string",
                "pattern": ORDER_ID_PATTERN,
                "description": "Related order id, if the problem concerns a specific order.",
            },
        },
        ["subject", "message"],
    ),
    "responses": {
        "201": _json_response("The ticket was created.", "TicketCreated"),
        **_ERRORS,
        "404": {"$ref": "#/components/responses/NotFound"},
        "409": {"$ref": "#/components/responses/Conflict"},
    },
    "x-agent-capability": {
        "version": 1,
        "enabled": True,
        "scope": "shop.ticket.create",
        "subject": {"required": True},
        "risk": {"level": "medium"},
        "execution": {
            "readonly": False,
            "idempotent": False,
            "rate_limit": {"count": 30, "window": "1m"},
        },
        # Ticket text is free-form customer input and may carry personal data.
        "audit": {"sensitive": True},
        "outcome": {"result": "A new support ticket id with status open.", "side_effect": "write"},
        "guidance": {
            "when_to_use": (
                "The customer asks for a human to follow up, reports a problem the tools cannot solve, "
                "or explicitly asks to open a ticket."
            ),
            "returns": "ok, status (open), business_id (the ticket id) and the ticket record.",
            "examples": [
                {
                    "subject": "Headphones stopped charging",
                    "message": "Left earcup no longer charges since last week; customer wants a repair.",
                    "order_id": "SO-1001",
                }
            ],
        },
    },
}

CANCEL_ORDER = {
    "operationId": "cancel_order",
    "summary": "Cancel an order that has not shipped",
    "description": (
        "Cancels one of the customer's orders immediately. Only orders that have not shipped yet "
        "(awaiting payment, paid or processing) can be cancelled; a delivered order is refunded "
        "instead. Irreversible, so every call needs human approval."
    ),
    "tags": ["orders"],
    "parameters": [_order_id_parameter("Id of the order to cancel, e.g. SO-1005.")],
    "requestBody": _json_body(
        {
            "reason": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "Why the customer wants to cancel, in a short sentence.",
            }
        },
        [],
        body_required=False,
    ),
    "responses": {
        "200": _json_response("The order is cancelled.", "OrderCancelled"),
        **_ERRORS,
        "404": {"$ref": "#/components/responses/NotFound"},
        "409": {"$ref": "#/components/responses/Conflict"},
    },
    "x-agent-capability": {
        "version": 1,
        "enabled": True,
        "scope": "shop.order.cancel",
        "subject": {"required": True},
        "risk": {"level": "high"},
        "approval": {
            "required": True,
            "prompt": "Cancel order {order_id} for the customer? Reason: {reason}",
        },
        "execution": {"readonly": False, "idempotent": False},
        "outcome": {"result": "The order with status cancelled.", "side_effect": "write"},
        "guidance": {
            "when_to_use": (
                "The customer clearly asks to cancel a specific order that has not shipped yet. "
                "Check the status with get_order first."
            ),
            "returns": "ok, status (cancelled), business_id (the order id) and the updated order.",
            "examples": [{"order_id": "SO-1003", "reason": "Ordered the wrong size"}],
        },
    },
}

REQUEST_REFUND = {
    "operationId": "request_refund",
    "summary": "Submit a refund request for an order",
    "description": (
        "Files a refund request for part or all of a delivered order (one that has not shipped is "
        "cancelled instead). The amount may not exceed what is left to refund. Refunds above 500 "
        "need human approval first."
    ),
    "tags": ["refunds"],
    "parameters": [_order_id_parameter("Id of the order to refund, e.g. SO-1002.")],
    "requestBody": _json_body(
        {
            "amount": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 1000000,
                "description": "Refund amount in the order's currency, at most two decimals.",
            },
            "reason": {
                "type": "string",
                "minLength": 1,
                "maxLength": 500,
                "description": "Why the customer asks for a refund.",
            },
        },
        ["amount", "reason"],
    ),
    "responses": {
        "201": _json_response("The refund request was submitted.", "RefundSubmitted"),
        **_ERRORS,
        "404": {"$ref": "#/components/responses/NotFound"},
        "409": {"$ref": "#/components/responses/Conflict"},
    },
    "x-agent-capability": {
        "version": 1,
        "enabled": True,
        "scope": "shop.refund.request",
        "subject": {"required": True},
        "risk": {"level": "medium"},
        "approval": {
            "when": [
                {
                    "param": "amount",
                    "op": ">",
                    "value": 500,
                    "label": "Refunds above 500 need a manager's approval",
                }
            ],
            "prompt": "Refund {amount} on order {order_id}? Reason: {reason}",
        },
        "execution": {"readonly": False, "idempotent": False},
        "outcome": {"result": "A refund request id with status submitted.", "side_effect": "write"},
        "guidance": {
            "when_to_use": (
                "The customer asks for money back on a delivered order. Confirm the amount with "
                "the customer; never refund more than they asked for."
            ),
            "returns": "ok, status (submitted), business_id (the refund id) and the refund record.",
            "examples": [
                {"order_id": "SO-1002", "amount": 120.5, "reason": "Arrived with a dented drip tray"}
            ],
        },
    },
}

DEMO_FAILURE_PROBE = {
    "operationId": "demo_failure_probe",
    "summary": "Trigger a simulated backend failure",
    "description": (
        "Always fails with HTTP 500. Exists so operators can see how the hub records a failing business "
        "tool in traces and reconciliation. Has no side effects."
    ),
    "tags": ["diagnostics"],
    "responses": {
        "500": _json_response("The simulated failure.", "Error"),
        **_ERRORS,
    },
    "x-agent-capability": {
        "version": 1,
        "enabled": True,
        "scope": "shop.diagnostics.read",
        "subject": {"required": False},
        "risk": {"level": "low"},
        "execution": {"readonly": True, "idempotent": True, "timeout_ms": 5000},
        "outcome": {"result": "Always an HTTP 500 error.", "side_effect": "none"},
        "guidance": {
            "when_to_use": "Only when an operator explicitly asks to test failure handling.",
            "returns": "Nothing useful: an error with code demo_failure.",
            "examples": [{}],
        },
    },
}


def _error_response(description: str) -> dict[str, Any]:
    return _json_response(description, "Error")


def build_spec() -> dict[str, Any]:
    """A fresh copy of the catalog (callers may mutate it)."""
    return copy.deepcopy(
        {
            "openapi": "3.1.0",
            "info": {
                "title": "Demo Shop tools",
                "version": "1.0.0",
                "description": (
                    "Order, support and refund actions of the Demo Shop, exposed to agents through the hub. "
                    "Every call is signed by the hub and authorised against the customer in "
                    "X-Bailing-On-Behalf-Of."
                ),
            },
            "x-bailing-authz-probe": {"method": "POST", "path": AUTHZ_PROBE_PATH},
            "security": [{"bailingSignature": []}],
            "paths": {
                "/orders": {"get": LIST_ORDERS},
                "/orders/{order_id}": {"get": GET_ORDER},
                "/tickets": {"post": CREATE_TICKET},
                "/orders/{order_id}/cancel": {"post": CANCEL_ORDER},
                "/orders/{order_id}/refunds": {"post": REQUEST_REFUND},
                "/diagnostics/failure": {"get": DEMO_FAILURE_PROBE},
            },
            "components": {
                "securitySchemes": {
                    "bailingSignature": {
                        "type": "apiKey",
                        "in": "header",
                        "name": "X-Bailing-Signature",
                        "description": (
                            "sha256=HMAC-SHA256(shared secret, '<X-Bailing-Timestamp>.<METHOD>."
                            "<path?query>.<sha256 hex of body>.<X-Bailing-On-Behalf-Of>.<X-Bailing-Job-Id>'),"
                            " 300 s window."
                        ),
                    }
                },
                "schemas": {
                    "OrderStatus": {"type": "string", "enum": list(ORDER_STATUSES)},
                    "Order": {
                        "type": "object",
                        "required": [
                            "order_id",
                            "item",
                            "amount",
                            "currency",
                            "status",
                            "refunded_amount",
                            "created_at",
                        ],
                        "properties": {
                            "order_id": {"type": "string", "pattern": ORDER_ID_PATTERN},
                            "item": {"type": "string"},
                            "amount": {"type": "number"},
                            "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                            "status": {"$ref": "#/components/schemas/OrderStatus"},
                            "refunded_amount": {"type": "number"},
                            "created_at": {"type": "string", "format": "date-time"},
                            "notes": {"type": "string", "description": "The customer's note, if any."},
                        },
                    },
                    "OrderList": {
                        "type": "object",
                        "required": ["ok", "count", "orders"],
                        "properties": {
                            "ok": {"const": True},
                            "count": {"type": "integer", "minimum": 0},
                            "orders": {"type": "array", "items": {"$ref": "#/components/schemas/Order"}},
                        },
                    },
                    "OrderEnvelope": {
                        "type": "object",
                        "required": ["ok", "order"],
                        "properties": {
                            "ok": {"const": True},
                            "order": {"$ref": "#/components/schemas/Order"},
                        },
                    },
                    "OrderCancelled": {
                        "type": "object",
                        "required": ["ok", "status", "message", "business_id", "order"],
                        "properties": {
                            "ok": {"const": True},
                            "status": {"const": "cancelled"},
                            "message": {"type": "string"},
                            "business_id": {"type": "string"},
                            "order": {"$ref": "#/components/schemas/Order"},
                        },
                    },
                    "Ticket": {
                        "type": "object",
                        "required": ["ticket_id", "subject", "message", "order_id", "status", "created_at"],
                        "properties": {
                            "ticket_id": {"type": "string"},
                            "subject": {"type": "string"},
                            "message": {"type": "string"},
                            "order_id": {"type": ["string", "null"]},
                            "status": {"const": "open"},
                            "created_at": {"type": "string", "format": "date-time"},
                        },
                    },
                    "TicketCreated": {
                        "type": "object",
                        "required": ["ok", "status", "message", "business_id", "ticket"],
                        "properties": {
                            "ok": {"const": True},
                            "status": {"const": "open"},
                            "message": {"type": "string"},
                            "business_id": {"type": "string"},
                            "ticket": {"$ref": "#/components/schemas/Ticket"},
                        },
                    },
                    "Refund": {
                        "type": "object",
                        "required": [
                            "refund_id",
                            "order_id",
                            "amount",
                            "currency",
                            "reason",
                            "status",
                            "created_at",
                        ],
                        "properties": {
                            "refund_id": {"type": "string"},
                            "order_id": {"type": "string"},
                            "amount": {"type": "number"},
                            "currency": {"type": "string"},
                            "reason": {"type": "string"},
                            "status": {"const": "submitted"},
                            "created_at": {"type": "string", "format": "date-time"},
                        },
                    },
                    "RefundSubmitted": {
                        "type": "object",
                        "required": ["ok", "status", "message", "business_id", "refund"],
                        "properties": {
                            "ok": {"const": True},
                            "status": {"const": "submitted"},
                            "message": {"type": "string"},
                            "business_id": {"type": "string"},
                            "refund": {"$ref": "#/components/schemas/Refund"},
                        },
                    },
                    "Error": {
                        "type": "object",
                        "required": ["error", "message"],
                        "properties": {
                            "error": {"type": "string"},
                            "message": {"type": "string"},
                            "field": {"type": "string"},
                        },
                    },
                },
                "responses": {
                    "InvalidRequest": _error_response("Invalid arguments; `field` names the first bad one."),
                    "Unauthorized": _error_response(
                        "Missing or invalid hub signature, or no acting customer."
                    ),
                    "Forbidden": _error_response("The acting customer is not a customer of this shop."),
                    "NotFound": _error_response("No such order for this customer."),
                    "Conflict": _error_response(
                        "The order's state forbids this, or the idempotency key was reused."
                    ),
                },
            },
        }
    )


def spec_bytes() -> bytes:
    """The catalog as served: compact UTF-8 JSON, built once per app."""
    return json.dumps(build_spec(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
