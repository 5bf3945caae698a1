"""Request and response hardening every surface shares (docs/architecture.md "Plumbing: bailing").

``ContentSecurityPolicyMiddleware``: every HTML response (console pages, the consent page, error
pages) carries ``CONTENT_SECURITY_POLICY``, beside the X-Frame-Options, nosniff, COOP and
Referrer-Policy headers Django's own middleware sets from the settings. The console has no script
and no inline style at all (``tests/bailing/test_security_headers.py`` scans the templates), so the
policy allows only the hub's own stylesheet: no script of any origin, no inline style, no plugins,
no framing. ``form-action`` is deliberately absent: approving on the consent page answers a redirect
to the agent's loopback listener (any port) or an OAuth client's registered https redirect, and a
browser checks ``form-action`` against where a form's redirects lead as well.

``TrustedProxyMiddleware`` (first in ``MIDDLEWARE``): proxy headers are believed only from the
reverse proxies ``BAILING_TRUSTED_PROXIES`` names (addresses or networks; empty by default). From
any other peer ``X-Forwarded-Proto`` and ``X-Forwarded-For`` are removed before anything reads them,
so a client talking to the hub directly cannot claim HTTPS (``SECURE_PROXY_SSL_HEADER``, which the
settings set only when proxies are named) or another address. From a named proxy, ``REMOTE_ADDR``
becomes the client it forwarded for: the rightmost ``X-Forwarded-For`` entry that is not itself a
named proxy (what the proxy saw, not what the client wrote on the left), so the per-IP throttles
count clients rather than the proxy. An entry that is not an IP address names nobody: the proxy's
own address stays. Behind the front (``BAILING_BEHIND_FRONT``, set by its launcher) the front has
applied the same rule with the same list at the edge, so the middleware leaves the request as it is.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings

_PROXY_HEADERS = ("HTTP_X_FORWARDED_PROTO", "HTTP_X_FORWARDED_FOR")
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def trusted_networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _trusted(address, networks: tuple[Network, ...]) -> bool:
    return address is not None and any(address in network for network in networks)


def forwarded_client(peer: str, forwarded_for: str, networks: tuple[Network, ...]) -> str:
    """The client a trusted proxy at ``peer`` forwarded for, from its ``X-Forwarded-For``."""
    client = peer
    for entry in reversed(forwarded_for.split(",")):
        address = _address(entry)
        if address is None:
            return client
        client = str(address)
        if not _trusted(address, networks):
            return client
    return client


class TrustedProxyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        meta = request.META
        if settings.BAILING_BEHIND_FRONT:
            # The front (front/) applied this very rule at the edge: what reaches gunicorn
            # through it carries forwarding headers only from a listed proxy, and the client's
            # address is already REMOTE_ADDR.
            return self.get_response(request)
        networks = trusted_networks(tuple(settings.BAILING_TRUSTED_PROXIES))
        peer = meta.get("REMOTE_ADDR") or ""
        if not _trusted(_address(peer), networks):
            for header in _PROXY_HEADERS:
                meta.pop(header, None)
        elif meta.get("HTTP_X_FORWARDED_FOR"):
            meta["REMOTE_ADDR"] = forwarded_client(peer, meta["HTTP_X_FORWARDED_FOR"], networks)
        return self.get_response(request)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html"):
            response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response
