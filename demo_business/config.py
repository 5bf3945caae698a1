"""Runtime configuration of the demo business system, read from the environment.

Environment variables (all read once at start):

``DEMO_TOOL_SECRET`` (required)
    HMAC key shared with the hub's ``demo-shop`` tool provider: tool calls and spec fetches are
    verified with it.
``DEMO_HUB_URL`` (optional)
    Base URL of the hub (``http(s)://host[:port]``), where approval decisions are posted
    (``<DEMO_HUB_URL>/approvals/<id>/decision``) and approval states read (``GET
    <DEMO_HUB_URL>/approvals/<id>``). Without it the approvals page still lists requests, but cannot
    tell where they stand in the hub, and Approve / Deny answer 503 ``hub_not_configured``.
``DEMO_CLIENT_TOKEN`` (optional)
    Plaintext Client Token of the hub's agent client (``demo-agent``). The hub signs approval
    webhooks (``POST /approvals``) with it, and the shop authenticates its decisions with it.
    Without it ``POST /approvals`` answers 503 ``approvals_not_configured``.
``DEMO_DECISION_AUTH`` (optional, ``bearer`` or ``signed``; default ``bearer``)
    How a decision post proves it comes from the business: ``Authorization: Bearer <token>``, or a
    millisecond ``X-Bailing-Timestamp`` plus ``X-Bailing-Signature`` over ``"<ms>.<raw body>"``
    keyed by the same token (no Authorization header).
``DEMO_HOST`` / ``DEMO_PORT``
    Defaults of ``--host`` / ``--port`` (read by ``__main__``, not here).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

DECISION_AUTH_MODES = ("bearer", "signed")
# The token travels in an HTTP header: visible ASCII only, so it can neither break nor inject a header.
_TOKEN_RE = re.compile(r"[\x21-\x7e]{1,512}")


class ConfigError(ValueError):
    """The process cannot start safely with the given environment."""


@dataclass(frozen=True, slots=True)
class DemoConfig:
    """Everything the WSGI app needs; immutable so request threads share it without locking.

    ``tool_secret`` is the HMAC key shared with the hub's tool provider (tool calls and spec fetches);
    ``client_token`` is the hub agent client's Client Token (approval webhooks in, decisions out);
    ``hub_url`` is where decisions go; ``decision_auth`` picks bearer or signed decisions.
    """

    tool_secret: str
    hub_url: str = ""
    client_token: str = ""
    decision_auth: str = "bearer"
    signature_tolerance_seconds: int = 300
    # Tool arguments here are a few short fields; anything larger is a client bug or an attack.
    # Also the limit for approval webhooks (the hub caps a decision body at the same 64 KiB).
    max_body_bytes: int = 64 * 1024
    # Bounded replay memory: oldest idempotency records are forgotten first.
    max_idempotency_records: int = 10_000
    # Bounded approval inbox: oldest requests are forgotten first (each is at most max_body_bytes).
    max_approval_records: int = 500
    # One decision post to the hub; the contract's own webhook timeout is the same 10 s.
    hub_timeout_seconds: float = 10.0
    # The approvals page asks the hub where each pending request stands (GET /approvals/<id>): each
    # question within this, and all of one page's within the budget, so a slow or absent hub delays
    # the page by seconds, not by minutes (what was not asked is shown as not checked).
    hub_state_timeout_seconds: float = 3.0
    hub_state_budget_seconds: float = 5.0

    def __post_init__(self) -> None:
        if not self.tool_secret:
            raise ConfigError("DEMO_TOOL_SECRET is required")
        if self.hub_url:
            parts = urlsplit(self.hub_url)
            if parts.scheme not in {"http", "https"} or not parts.netloc:
                raise ConfigError("DEMO_HUB_URL must be an http(s) URL")
            if parts.query or parts.fragment:
                raise ConfigError("DEMO_HUB_URL must not carry a query or fragment")
        if self.client_token and not _TOKEN_RE.fullmatch(self.client_token):
            raise ConfigError("DEMO_CLIENT_TOKEN must be printable ASCII without spaces")
        if self.decision_auth not in DECISION_AUTH_MODES:
            raise ConfigError("DEMO_DECISION_AUTH must be 'bearer' or 'signed'")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DemoConfig:
        env = os.environ if environ is None else environ
        return cls(
            tool_secret=env.get("DEMO_TOOL_SECRET", ""),
            hub_url=env.get("DEMO_HUB_URL", "").rstrip("/"),
            client_token=env.get("DEMO_CLIENT_TOKEN", ""),
            decision_auth=env.get("DEMO_DECISION_AUTH", "").strip().lower() or "bearer",
        )
