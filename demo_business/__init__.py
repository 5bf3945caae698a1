"""Demo Shop: a small, real business system that exposes governed tools to the hub.

It stands in for a customer's backend in integration tests and demos: a separate WSGI process (stdlib
only, no Django) that serves an OpenAPI 3.1 catalog with ``x-agent-capability`` declarations behind
signature checks, verifies every hub call with the business-contract HMAC, authorises by the signed
``X-Bailing-On-Behalf-Of`` subject, and deduplicates side effects by ``X-Bailing-Idempotency-Key``.

It is also the business side of tool approvals: the hub's approval webhook (``POST /approvals``,
signed with the agent client's Client Token), an approver's inbox for loopback clients
(``GET /approvals``) and the decisions it posts back to the hub (``demo_business.approvals``).

Run it with ``DEMO_TOOL_SECRET=... python -m demo_business --port 8100``; approvals also need
``DEMO_CLIENT_TOKEN`` and ``DEMO_HUB_URL`` (all variables: ``demo_business.config``).
"""

from demo_business.app import make_app
from demo_business.config import DemoConfig

__all__ = ["DemoConfig", "make_app"]
