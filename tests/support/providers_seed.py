"""Tool providers and workspaces for the console's provider pages (shared by their test modules).

``seed_console_providers()`` stores, through the same services as config apply and refresh:

* ``shop`` — the catalog tests' shop spec plus operations borrowed from the compiler fixtures: a
  description cut at 500 code points, guidance cut at 32,768 characters, a conditional
  (``amount > 500``) and a declared approval, and the malformed ACC declarations (so the
  "Disabled operations / warnings" table has rows). It has a sealed secret.
* ``crm`` — a second provider that only the ``other`` workspace names.
* workspaces naming ``shop``: ``ro-desk`` (reads of one scope only), ``writer`` (readwrite, two
  writes, one with forced approval), ``locked`` (a listed write on a ``readonly`` route) and
  ``quiet`` (agent direct tools off).
"""

from __future__ import annotations

import copy
import json
import socket
from dataclasses import dataclass
from pathlib import Path

from agent_runtime.models import Route, ToolProvider
from agent_runtime.services.providers import provider_set_secret
from bailing.audit.actor import Actor
from tests.factories import RouteFactory, ToolProviderFactory

SPECS = Path(__file__).resolve().parents[1] / "agent_runtime" / "fixtures" / "specs"
SHOP_SECRET = "shop-hmac-secret-7f3a9c1e5b2d4680"

WRITE_BODY = {
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "description": "Amount in the order's currency."},
                    "reason": {"type": "string", "description": "Why, in one sentence."},
                },
                "required": ["amount"],
            }
        }
    }
}


def load_spec(name: str) -> dict:
    return json.loads((SPECS / f"{name}.json").read_text(encoding="utf-8"))


def _borrow(spec: dict, source: str, prefix: str) -> None:
    """Copy every path of fixture ``source`` into ``spec`` under ``prefix`` (no path parameters)."""
    for path, item in load_spec(source)["paths"].items():
        spec["paths"][prefix + path] = copy.deepcopy(item)


def shop_spec() -> dict:
    spec = load_spec("catalog_shop")
    spec["paths"]["/refunds/large"] = {
        "post": {
            "operationId": "refund_large",
            "summary": "Refund part of an order.",
            "requestBody": copy.deepcopy(WRITE_BODY),
            "x-agent-capability": {
                "version": 1,
                "enabled": True,
                "scope": "refund.write",
                "approval": {
                    "when": [{"param": "amount", "op": ">", "value": 500}],
                    "prompt": "Refund above the desk limit",
                },
            },
        }
    }
    spec["paths"]["/vouchers"] = {
        "post": {
            "operationId": "voucher_issue",
            "summary": "Issue a goodwill voucher.",
            "requestBody": copy.deepcopy(WRITE_BODY),
            "x-agent-capability": {
                "version": 1,
                "enabled": True,
                "scope": "voucher.write",
                "approval": {"required": True},
            },
        }
    }
    long_description = load_spec("long_description")["paths"]["/a"]
    spec["paths"]["/lab/long-description"] = copy.deepcopy(long_description)
    spec["paths"]["/lab/guidance"] = copy.deepcopy(load_spec("long_guidance")["paths"]["/chars"])
    _borrow(spec, "malformed_acc", "/lab/acc")
    return spec


@dataclass
class ConsoleProviders:
    shop: ToolProvider
    crm: ToolProvider
    routes: dict[str, Route]


def seed_console_providers() -> ConsoleProviders:
    spec = shop_spec()
    shop = ToolProviderFactory(
        name="shop",
        description="Shop orders and refunds.",
        base_url="https://shop.example.test/api/v2",
        spec_inline=spec,
        spec=spec,
    )
    provider_set_secret(provider=shop, secret=SHOP_SECRET, actor=Actor.system("tests"))
    crm = ToolProviderFactory(name="crm", spec=load_spec("catalog_crm"), spec_inline=load_spec("catalog_crm"))

    def direct(*, allow, enabled=True, provider="shop", **policy) -> dict:
        return {
            "sources": [{"provider": provider, "allow": allow}],
            "agent_direct": {"enabled": enabled, **policy},
        }

    routes = {
        "ro-desk": RouteFactory(route_key="ro-desk", permission="full", tools=direct(allow=["order.*"])),
        "writer": RouteFactory(
            route_key="writer",
            permission="readwrite",
            tools=direct(
                allow=["*"],
                write_tools=["order_cancel", "refund_large"],
                force_approval_tools=["order_cancel"],
            ),
        ),
        "locked": RouteFactory(
            route_key="locked",
            permission="readonly",
            tools=direct(allow=["*"], write_tools=["order_cancel"]),
        ),
        "quiet": RouteFactory(route_key="quiet", tools=direct(allow=["*"], enabled=False)),
        "other": RouteFactory(route_key="other", tools=direct(allow=["*"], provider="crm")),
    }
    shop.refresh_from_db()
    return ConsoleProviders(shop=shop, crm=crm, routes=routes)


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def url_provider(name: str, base_url: str, secret: str, spec: dict | None = None) -> ToolProvider:
    """A URL provider with a sealed secret; ``spec`` (optional) is stored as its last good spec."""
    provider = ToolProviderFactory(
        name=name,
        base_url=base_url,
        spec_source="url",
        spec_access_policy="signed_required",
        timeout_ms=5000,
        spec=spec,
    )
    provider_set_secret(provider=provider, secret=secret, actor=Actor.system("tests"))
    return provider
