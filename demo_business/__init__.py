"""Demo Shop: a small, real business system that exposes governed tools to the hub.

It stands in for a customer's backend in integration tests and demos: a separate WSGI process (stdlib
only, no Django) that serves an OpenAPI 3.1 catalog with ``x-agent-capability`` declarations behind
signature checks, verifies every hub call with the business-contract HMAC, authorises by the signed
``X-Bailing-On-Behalf-Of`` subject, and deduplicates side effects by ``X-Bailing-Idempotency-Key``.

Run it with ``DEMO_TOOL_SECRET=... python -m demo_business --port 8100``.
"""

from demo_business.app import make_app
from demo_business.config import DemoConfig

__all__ = ["DemoConfig", "make_app"]
