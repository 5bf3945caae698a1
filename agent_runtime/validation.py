"""Small validators shared by config validation and Agent Auth v1."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def authorize_url_problem(url: str) -> str | None:
    """Why ``url`` is not a valid business consent page URL, or None.

    HTTPS, or plain HTTP only to a loopback host with an explicit port (development); never
    userinfo or a fragment (docs/protocol.md "Agent sign-in and consent").
    """
    if not isinstance(url, str) or not url or len(url) > 2048:
        return "must be a URL of at most 2048 characters"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "is not a valid URL"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "must not contain userinfo"
    if parts.fragment or url.endswith("#"):
        return "must not contain a fragment"
    host = parts.hostname or ""
    if not host:
        return "must have a host"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http" and is_loopback_host(host) and port is not None:
        return None
    return "must be https, or http to a loopback host with an explicit port"


def loopback_redirect_problem(uri: str) -> str | None:
    """Why ``uri`` is not an acceptable agent loopback redirect, or None.

    ``http``, host ``127.0.0.1`` or ``[::1]``, explicit port 1–65535, no userinfo or fragment,
    at most 2048 characters (docs/protocol.md "Agent sign-in and consent").
    """
    if not isinstance(uri, str) or not uri or len(uri) > 2048:
        return "length"
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return "syntax"
    if parts.scheme != "http":
        return "scheme"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "userinfo"
    if parts.fragment or "#" in uri:
        return "fragment"
    if parts.hostname not in ("127.0.0.1", "::1"):
        return "host"
    if parts.hostname == "::1" and not parts.netloc.startswith("[::1]"):
        return "host"
    if port is None or not (1 <= port <= 65535):
        return "port"
    return None
