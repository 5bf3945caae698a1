"""Small validators shared by config validation, Agent Auth v1 and the standard OAuth sign-in."""

from __future__ import annotations

import ipaddress
import re
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

    HTTPS, or plain HTTP only to a loopback host with an explicit port (development); the authority
    exactly as its host and port parse; never userinfo or a fragment (docs/protocol.md "Agent
    sign-in and consent").
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
    # The authority exactly as host and port parse (case aside): "[::1]evil.com:8080" has hostname
    # "::1" for urlsplit, and is no loopback address to a browser.
    if parts.netloc.lower() != _netloc(host, port):
        return "is not a valid URL"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http" and is_loopback_host(host) and port is not None:
        return None
    return "must be https, or http to a loopback host with an explicit port"


def loopback_redirect_problem(uri: str) -> str | None:
    """Why ``uri`` is not an acceptable agent loopback redirect, or None.

    ``http``, the authority exactly ``127.0.0.1:<port>`` or ``[::1]:<port>`` with a port 1–65535
    written without leading zeros, no userinfo or fragment, at most 2048 characters
    (docs/protocol.md "Agent sign-in and consent").
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
    if port is None or not (1 <= port <= 65535):
        return "port"
    # The whole authority, exactly: urlsplit drops what follows "]" from the host, so
    # "[::1]evil.com:8503" has hostname "::1"; ports are compared as written (no "08503").
    if parts.netloc not in (f"127.0.0.1:{port}", f"[::1]:{port}"):
        return "host"
    return None


# The loopback hosts an OAuth redirect may name, as they must be written in the URL's authority.
_OAUTH_LOOPBACK_HOSTS = {"127.0.0.1": "127.0.0.1", "::1": "[::1]", "localhost": "localhost"}
_DNS_NAME_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*")


def _netloc(host: str, port: int | None) -> str:
    written = f"[{host}]" if ":" in host else host
    return written if port is None else f"{written}:{port}"


def oauth_redirect_problem(uri: str) -> str | None:
    """Why ``uri`` is not an acceptable redirect URI of an OAuth client (standard MCP sign-in), or None.

    Either a loopback ``http`` URI to ``127.0.0.1``, ``[::1]`` or ``localhost`` with an explicit port
    (RFC 8252 §7.3), or an absolute ``https`` URI. Printable ASCII, at most 2048 characters, no
    userinfo or fragment, and the authority exactly as the host and port parse (a netloc such as
    ``[::1]evil.com:8503``, an upper-case host or a port with a leading zero is refused, never
    normalized). docs/protocol.md "Standard OAuth sign-in for MCP clients".
    """
    if not isinstance(uri, str) or not uri or len(uri) > 2048:
        return "length"
    if not uri.isascii() or not uri.isprintable() or " " in uri:
        return "characters"
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return "syntax"
    if "@" in parts.netloc:
        return "userinfo"
    if parts.fragment or "#" in uri:
        return "fragment"
    host = parts.hostname or ""
    if not host:
        return "host"
    if parts.netloc != _netloc(host, port):
        return "host"
    if parts.path and not parts.path.startswith("/"):
        return "syntax"
    if parts.scheme == "http":
        if host not in _OAUTH_LOOPBACK_HOSTS:
            return "scheme"
        if port is None or not (1 <= port <= 65535):
            return "port"
        return None
    if parts.scheme != "https":
        return "scheme"
    if port is not None and not (1 <= port <= 65535):
        return "port"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if len(host) > 253 or not _DNS_NAME_RE.fullmatch(host):
            return "host"
    return None


def oauth_redirect_matches(registered: str, presented: str) -> bool:
    """Whether ``presented`` is the registered redirect URI ``registered``: byte for byte, except that
    a loopback ``http`` redirect may use any port (RFC 8252 §7.3). Both must be valid OAuth redirects.
    """
    if oauth_redirect_problem(registered) is not None or oauth_redirect_problem(presented) is not None:
        return False
    if registered == presented:
        return True
    mine, theirs = urlsplit(registered), urlsplit(presented)
    if mine.scheme != "http" or theirs.scheme != "http" or mine.hostname != theirs.hostname:
        return False
    return (mine.path, mine.query) == (theirs.path, theirs.query)
