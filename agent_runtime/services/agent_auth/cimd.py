"""Client ID Metadata Documents: an MCP client whose ``client_id`` is an https URL (docs/protocol.md
"Client ID Metadata Documents"; draft-ietf-oauth-client-id-metadata-document, MCP authorization
"Client Registration").

The authorize endpoint hands such a ``client_id`` to :func:`oauth_client_from_metadata_document`,
which fetches the document (or takes it from the per-process cache), checks it and records the client
as an :class:`OAuthClient` with ``metadata_document`` set, so that authorizations, sessions and the
token endpoint treat it exactly as a registered client. The fetch goes through the hub's one outbound
layer (:func:`bailing.outbound.outbound_client`) with its own address policy: public addresses only,
unless ``BAILING_CIMD_ALLOW_PRIVATE`` also allows loopback and private ones; never link-local and the
other kinds no setting allows. It is bounded: ``BAILING_CIMD_TIMEOUT`` seconds in all (at most 5),
:data:`DOCUMENT_MAX_BYTES` of body, no redirect followed, no content coding.

Every refusal is a :class:`MetadataDocumentError` whose ``reason`` says which check failed; the
OAuth error is always ``invalid_client`` (the client cannot be identified), and the authorize endpoint
answers it on its own page, never by redirecting to a URI the document has not vouched for.
"""

from __future__ import annotations

import functools
import json
import re
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

import certifi
import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agent_runtime.models import OAuthClient
from agent_runtime.models.oauth import OAUTH_METADATA_URL_MAX
from agent_runtime.services.agent_auth.common import normalized_ip
from agent_runtime.services.agent_auth.oauth import OAuthError, mcp_sign_in_client
from agent_runtime.services.rate_limits import keyed_rate_consume
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from bailing.outbound import TargetForbidden, outbound_client
from bailing.outbound_targets import LOOPBACK, PRIVATE, PUBLIC, IPAddress, address_kind

DOCUMENT_MAX_BYTES = 5 * 1024
# Seconds a document is kept when its answer says nothing about caching, and the most it is kept
# whatever its max-age says (a changed document takes effect within that time at worst).
CACHE_DEFAULT_SECONDS = 300
CACHE_MAX_SECONDS = 3600
# Documents fetched (cache misses) per caller address and minute, across every worker; then 429.
FETCHES_PER_MINUTE = 30
_MAX_AGE_RE = re.compile(r"max-age\s*=\s*\"?(\d+)\"?", re.IGNORECASE)


class MetadataDocumentError(Exception):
    """A client metadata document that cannot identify its client. ``reason``:

    ``url_invalid`` (not an https URL with a path, or userinfo, a fragment, dot segments, over
    200 characters), ``target_forbidden`` (its host is or resolves to an address the policy denies),
    ``timeout``, ``fetch_failed`` (connection or TLS failure), ``redirect`` (a 3xx answer),
    ``http_status`` (anything but 200), ``content_type`` (not JSON, or a content coding),
    ``too_large`` (over 5 KiB), ``invalid_json``, ``client_id_mismatch``, ``invalid_metadata``
    (the metadata a registration would be refused for, or a client secret).
    """

    error = "invalid_client"

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class MetadataDocument:
    """A fetched, checked document: ``metadata`` is what the validator made of it."""

    url: str
    metadata: dict
    fetched_at: datetime


def is_metadata_document_id(client_id: object) -> bool:
    """Whether ``client_id`` is meant as a metadata document URL (any ``scheme://``): such ids are
    resolved (and refused when they are not https) rather than looked up as registrations."""
    return isinstance(client_id, str) and "://" in client_id


def metadata_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a client metadata document URL, or None: https, a host, a path other
    than ``/``, no userinfo, no fragment, no ``.`` or ``..`` path segment, printable ASCII, at most
    200 characters (the draft's rules; the hub does not normalize)."""
    if len(url) > OAUTH_METADATA_URL_MAX or not url.isascii() or not url.isprintable() or " " in url:
        return "url_invalid"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return "url_invalid"
    if parts.scheme != "https" or not parts.hostname or "@" in parts.netloc:
        return "url_invalid"
    if "#" in url or parts.path in ("", "/"):
        return "url_invalid"
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        return "url_invalid"
    return None


def cimd_target_problem(address: IPAddress) -> str | None:
    """The address policy of document fetches: public addresses; loopback and private ones only with
    ``BAILING_CIMD_ALLOW_PRIVATE``; never the kinds no setting allows (link-local …)."""
    kind = address_kind(address)
    if kind == PUBLIC:
        return None
    if kind in (LOOPBACK, PRIVATE) and settings.BAILING_CIMD_ALLOW_PRIVATE:
        return None
    return kind


@functools.cache
def _tls_context(ca_file: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certifi.where())
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    return context


# --- cache ---------------------------------------------------------------------------------------------


def cache_clock() -> float:
    """The cache's clock (monotonic seconds)."""
    return time.monotonic()


class _Cache:
    """A size-capped LRU of checked documents by URL, each with its own expiry (monotonic clock)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, tuple[float, MetadataDocument]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, url: str) -> MetadataDocument | None:
        with self._lock:
            entry = self._entries.get(url)
            if entry is None:
                return None
            if entry[0] <= cache_clock():
                del self._entries[url]
                return None
            self._entries.move_to_end(url)
            return entry[1]

    def put(self, document: MetadataDocument, seconds: int) -> None:
        size = settings.BAILING_CIMD_CACHE_SIZE
        with self._lock:
            self._entries.pop(document.url, None)
            if seconds <= 0 or size <= 0:
                return
            self._entries[document.url] = (cache_clock() + seconds, document)
            while len(self._entries) > size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_cache = _Cache()


def cimd_cache_clear() -> None:
    """Forget every cached document (tests; a process that must see a changed document now)."""
    _cache.clear()


def cimd_cache_size() -> int:
    return len(_cache)


def cache_seconds(cache_control: str | None) -> int:
    """How long a document may be kept, from its ``Cache-Control``: 0 for ``no-store`` or
    ``no-cache`` (the hub does not revalidate), else ``max-age`` capped at :data:`CACHE_MAX_SECONDS`,
    else :data:`CACHE_DEFAULT_SECONDS`. ``Expires`` is not read."""
    if not cache_control:
        return CACHE_DEFAULT_SECONDS
    directives = {part.strip().split("=", 1)[0].lower() for part in cache_control.split(",")}
    if "no-store" in directives or "no-cache" in directives:
        return 0
    match = _MAX_AGE_RE.search(cache_control)
    if match is None:
        return CACHE_DEFAULT_SECONDS
    return min(int(match.group(1)), CACHE_MAX_SECONDS)


# --- fetch ---------------------------------------------------------------------------------------------


def _json_content_type(value: str | None) -> bool:
    media = (value or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _fetch(url: str) -> tuple[bytes, str | None]:
    """The document's bytes and its ``Cache-Control``; :class:`MetadataDocumentError` otherwise."""
    client = outbound_client(
        timeout=settings.BAILING_CIMD_TIMEOUT,
        keep_alive=False,
        policy=cimd_target_problem,
        ssl_context=_tls_context(settings.BAILING_CIMD_CA_FILE),
        headers={"Accept": "application/json", "Accept-Encoding": "identity"},
    )
    try:
        with client, client.stream("GET", url) as response:
            if response.is_redirect or 300 <= response.status_code < 400:
                raise MetadataDocumentError("redirect")
            if response.status_code != 200:
                raise MetadataDocumentError("http_status")
            if not _json_content_type(response.headers.get("content-type")) or response.headers.get(
                "content-encoding", "identity"
            ).strip().lower() not in ("", "identity"):
                raise MetadataDocumentError("content_type")
            declared = response.headers.get("content-length")
            if declared is not None and declared.strip().isdigit() and int(declared) > DOCUMENT_MAX_BYTES:
                raise MetadataDocumentError("too_large")
            body = bytearray()
            for chunk in response.iter_raw():
                body += chunk
                if len(body) > DOCUMENT_MAX_BYTES:
                    raise MetadataDocumentError("too_large")
            return bytes(body), response.headers.get("cache-control")
    except TargetForbidden:
        raise MetadataDocumentError("target_forbidden") from None
    except httpx.TimeoutException:
        raise MetadataDocumentError("timeout") from None
    except httpx.HTTPError:
        raise MetadataDocumentError("fetch_failed") from None


def _parse(body: bytes):
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise MetadataDocumentError("invalid_json") from None


def metadata_document_resolve(
    url: str, *, validate: Callable[[dict], dict], ip: str | None = None
) -> MetadataDocument:
    """The checked document at ``url``, from the cache or fetched now.

    A fetch counts against the caller's :data:`FETCHES_PER_MINUTE` (``RateLimited`` past it), so an
    authorize link cannot make the hub a fetcher of arbitrary URLs at the caller's pace.

    ``validate`` is the registration metadata check (it raises for metadata a registration would be
    refused for); on top of it the document must be a JSON object whose ``client_id`` is ``url``
    exactly and that holds no ``client_secret``. Only documents that pass are cached.
    """
    problem = metadata_url_problem(url)
    if problem is not None:
        raise MetadataDocumentError(problem)
    cached = _cache.get(url)
    if cached is not None:
        return cached
    keyed_rate_consume(key=f"cimd:{normalized_ip(ip) or '-'}", limit=FETCHES_PER_MINUTE)
    body, cache_control = _fetch(url)
    data = _parse(body)
    if not isinstance(data, dict):
        raise MetadataDocumentError("invalid_json")
    if data.get("client_id") != url:
        raise MetadataDocumentError("client_id_mismatch")
    if "client_secret" in data or "client_secret_expires_at" in data:
        raise MetadataDocumentError("invalid_metadata")
    try:
        metadata = validate(data)
    except OAuthError:
        raise MetadataDocumentError("invalid_metadata") from None
    document = MetadataDocument(url=url, metadata=metadata, fetched_at=timezone.now())
    _cache.put(document, cache_seconds(cache_control))
    return document


def oauth_client_from_metadata_document(
    url: str, *, validate: Callable[[dict], dict], ip: str | None = None
) -> OAuthClient | None:
    """The OAuth client of the metadata document at ``url``, its row created or brought up to date
    with the document (name, redirect URIs, application type) and bound to the current ``mcp_sign_in``
    client. None when MCP sign-in is off (nothing is fetched then). :class:`MetadataDocumentError`
    when the document cannot identify the client. The first time a URL is seen is audited as
    ``agent_auth.oauth_client.metadata_document``; ``RateLimited`` past the caller's fetches."""
    hub_client = mcp_sign_in_client()
    if hub_client is None:
        return None
    document = metadata_document_resolve(url, validate=validate, ip=ip)
    metadata = document.metadata
    now = timezone.now()
    values = {
        "hub_client_id": hub_client.pk,
        "client_name": metadata["client_name"],
        "redirect_uris": list(metadata["redirect_uris"]),
        "application_type": metadata.get("application_type") or "",
        "metadata_fetched_at": document.fetched_at,
    }
    with transaction.atomic():
        oauth_client, created = OAuthClient.objects.select_for_update().get_or_create(
            client_id=url, defaults={**values, "metadata_document": True, "created_at": now}
        )
        if not created:
            if not oauth_client.metadata_document:
                # A registration's id is never a URL; refuse rather than take it over.
                raise MetadataDocumentError("url_invalid")
            if oauth_client.signed_in_at is None:
                # Asked for again before its first sign-in: a fresh OAUTH_REGISTER_PENDING_TTL.
                values["created_at"] = now
            for name, value in values.items():
                setattr(oauth_client, name, value)
            oauth_client.save(update_fields=[name.removesuffix("_id") for name in values])
        else:
            audit_record(
                action="agent_auth.oauth_client.metadata_document",
                actor=Actor("agent", "unauthenticated"),
                client_app_id=hub_client.app_id,
                target_type="oauth_client",
                target_id=url,
                data={
                    "client_name": metadata["client_name"],
                    "metadata_host": urlsplit(url).netloc,
                    "redirect_hosts": sorted({urlsplit(uri).netloc for uri in metadata["redirect_uris"]}),
                },
            )
    oauth_client.hub_client = hub_client
    return oauth_client
