"""Tool providers: the sealed HMAC secret and refreshing the compiled spec.

**Secret.** A provider's secret signs tool calls and spec fetches, so the hub needs its plaintext;
it is stored sealed (``agent_runtime.secrets_box``, purpose ``tool_provider.secret``, context = the
provider name) and only ever opened to sign. It is never returned by a view, logged, written to an
audit event (the ledger records only *that* it changed) or put in an error.

**Refresh** (:func:`provider_refresh`) follows the business contract's "Tool Provider Spec":

* ``spec_source: url`` + ``signed_required`` (default): a signed ``GET`` of ``spec_url`` on
  ``base_url``'s origin, then two negative probes, an unsigned ``GET`` and one signed with a wrong
  secret. Both must answer 401, 403 or 404; a 2xx means the catalog is public
  (``spec_not_protected``), anything else (5xx, redirect, no answer) is ``spec_probe_inconclusive``.
  Either way the refresh fails and the last good spec is kept.
* ``spec_source: url`` + ``public_allowed``: one unsigned ``GET``; a 2xx records ``public``, a
  401/403 means the endpoint is protected after all, which records ``inconclusive`` and fails. It
  never retries with a signature.
* ``spec_source: inline``: recompiles the stored inline spec (useful after a compiler upgrade).

Every request has the provider's ``timeout_ms`` as one absolute deadline for connecting, sending,
the response headers and the body together (``bailing.outbound``), follows no redirects (a signed
request must not be replayed to another host), ignores proxy environment variables, connects only to
addresses the outbound target policy allows (``target_forbidden`` otherwise), and reads at most
:data:`SPEC_MAX_BYTES` of body. The text is JSON or YAML (``parse_spec_text``) and
must compile without a fatal warning; only then does :func:`provider_spec_store` replace the tools.

**Authorization probe.** After a successful refresh of a URL spec that declares
``x-bailing-authz-probe``, one signed request with the synthetic nobody subject checks that the
business refuses a subject it does not know (``agent_runtime.services.authz_probe``); its outcome is
``authz_probe`` on the provider. It runs after the spec is stored and never fails the refresh;
inline specs and specs without a declaration record ``skipped``.

The network is never used inside a transaction or under a row lock: fetch and compile first, then
one short transaction re-reads the provider under ``select_for_update`` and stores. A failure is
recorded in ``last_refresh_*`` as ``"<code>: <fixed text>"`` (no bodies, secrets or URLs) with the
audit event ``agent_runtime.provider.refresh_failed``; ``access_probe`` records the evidence of the
latest attempt that reached the network.

**Concurrency.** One refresh per provider at a time: the whole refresh, network included, runs under
a PostgreSQL advisory lock keyed by the provider id, taken with ``pg_try_advisory_xact_lock`` in a
transaction of its own on a second connection (:func:`bailing.db.locks.advisory_lock`, safe behind a
transaction-pooling PgBouncer). A second refresh of the same provider meanwhile does not wait: it
returns ``refresh_in_progress`` at once and writes nothing, so the result recorded is the running
one's. This is not a row lock, and the refresh's own work runs in no open transaction; other writers
of the provider row are never blocked. Config changes made while a fetch is in flight
(``bailing_apply``, the console) are caught at store time: if the settings the fetch used (source,
URLs, policy, inline spec, secret, enabled) no longer match the row, the fetched spec is discarded
(``provider_changed``) instead of overwriting the newer configuration with a spec read under the old
one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets as stdlib_secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.db import transaction
from django.utils import timezone

from agent_runtime.config import PROVIDER_SPEC_MAX_BYTES
from agent_runtime.models import ToolProvider
from agent_runtime.secrets_box import SealedKind, SealedSecretError
from agent_runtime.services.authz_probe import (
    DeclarationInvalid,
    authz_probe_run,
    authz_probe_skipped,
    authz_probe_store,
    authz_probe_target,
)
from agent_runtime.services.tool_specs import provider_spec_store
from agent_runtime.tools.compiler import CompileResult, SpecParseError, compile_spec, parse_spec_text
from bailing.api.hashing import constant_time_equals
from bailing.api.text import has_control_chars, has_lone_surrogate
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from bailing.db.locks import advisory_lock
from bailing.outbound import TargetForbidden, outbound_client
from bailing.signing import sign_spec_fetch

__all__ = [
    "SECRET_PURPOSE",
    "SPEC_MAX_BYTES",
    "RefreshOutcome",
    "provider_refresh",
    "provider_secret_matches",
    "provider_secret_open",
    "provider_secret_problem",
    "provider_set_secret",
]

SECRET_PURPOSE = "tool_provider.secret"
SPEC_MAX_BYTES = PROVIDER_SPEC_MAX_BYTES
SECRET_MAX_CHARS = 4096
# A sealed provider secret (context: the provider name): at most SECRET_MAX_CHARS characters of up
# to four UTF-8 bytes each.
PROVIDER_SECRET = SealedKind(SECRET_PURPOSE, max_plaintext_bytes=4 * SECRET_MAX_CHARS)
# Two-key advisory lock space (distinct from the single-bigint space of the audit chain lock):
# class "bhrp" (Bailing Hub refresh provider), object = provider id.
_REFRESH_LOCK_CLASS = 0x62687270
_NEGATIVE_OK = frozenset({401, 403, 404})
_USER_AGENT = "bailing-hub-spec-fetch/1"

# Stable refresh error codes (``RefreshOutcome.error`` and the prefix of ``last_refresh_error``).
PROVIDER_DISABLED = "provider_disabled"
REFRESH_IN_PROGRESS = "refresh_in_progress"
PROVIDER_CHANGED = "provider_changed"
SECRET_MISSING = "secret_missing"
SECRET_UNREADABLE = "secret_unreadable"
SPEC_MISSING = "spec_missing"
SPEC_UNREACHABLE = "spec_unreachable"
SPEC_TIMEOUT = "spec_timeout"
SPEC_HTTP_STATUS = "spec_http_status"
SPEC_TOO_LARGE = "spec_too_large"
SPEC_UNPARSEABLE = "spec_unparseable"
SPEC_INVALID = "spec_invalid"
SPEC_NOT_PROTECTED = "spec_not_protected"
SPEC_PROBE_INCONCLUSIVE = "spec_probe_inconclusive"
TARGET_FORBIDDEN = "target_forbidden"


@dataclass(frozen=True)
class RefreshOutcome:
    """What one refresh did: ``status`` ``ok`` or ``failed`` with a stable ``error`` code and safe
    ``message``, the access ``probe`` it observed, and on success the tool diff and counts and the
    ``authz_probe`` outcome (empty after a failure: no probe runs then)."""

    provider: str
    status: str
    error: str = ""
    message: str = ""
    probe: dict[str, Any] = field(default_factory=dict)
    authz_probe: dict[str, Any] = field(default_factory=dict)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    tools: int = 0
    warnings: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _RefreshFailed(Exception):
    def __init__(self, code: str, message: str, probe: dict[str, Any] | None = None):
        super().__init__(code)
        self.code = code
        self.message = message
        self.probe = probe


class _NoAnswer(Exception):
    """A request got no HTTP answer; ``timeout`` says whether the deadline passed, ``forbidden``
    whether the outbound target policy refused the address (nothing was sent then)."""

    def __init__(self, *, timeout: bool, forbidden: bool = False):
        super().__init__("forbidden" if forbidden else "timeout" if timeout else "unreachable")
        self.timeout = timeout
        self.forbidden = forbidden


@dataclass(frozen=True)
class _Fetched:
    spec: dict[str, Any]
    result: CompileResult
    probe: dict[str, Any]


# --- Secret -------------------------------------------------------------------------------------------
def provider_secret_problem(secret: Any) -> str | None:
    """Why ``secret`` cannot be a provider secret, or None. The text never contains the value."""
    if not isinstance(secret, str) or not secret:
        return "must not be empty"
    if len(secret) > SECRET_MAX_CHARS:
        return f"must be at most {SECRET_MAX_CHARS} characters"
    if has_lone_surrogate(secret) or has_control_chars(secret, multiline=False):
        return "must not contain control characters or unpaired surrogates"
    return None


def provider_secret_open(*, provider: ToolProvider) -> str | None:
    """The provider's plaintext secret, or None when none is set.

    Raises ``SealedSecretError`` when the stored value cannot be opened (``SECRET_KEY`` changed, or
    the row was tampered with): the secret must then be set again. Only signing code should call this.
    """
    if not provider.secret_encrypted:
        return None
    return PROVIDER_SECRET.open(provider.secret_encrypted, context=provider.name)


def provider_secret_matches(*, provider: ToolProvider, secret: str) -> bool:
    """Whether ``secret`` is the stored secret (constant time); an unreadable one matches nothing."""
    try:
        current = provider_secret_open(provider=provider)
    except SealedSecretError:
        return False
    return current is not None and constant_time_equals(current, secret)


def provider_set_secret(*, provider: ToolProvider, secret: str, actor: Actor) -> bool:
    """Seal ``secret`` as the provider's HMAC secret; return whether it changed.

    Setting the secret it already has is a no-op (no write, no audit event), which keeps re-applying
    a config file free of churn. The audit event ``agent_runtime.provider.secret_changed`` says only
    whether a previous secret existed. Raises ``ValueError`` (without the value) for an unusable
    secret.
    """
    problem = provider_secret_problem(secret)
    if problem:
        raise ValueError(f"provider secret {problem}")
    with transaction.atomic():
        locked = ToolProvider.objects.select_for_update().get(pk=provider.pk)
        if provider_secret_matches(provider=locked, secret=secret):
            return False
        if not locked.secret_encrypted:
            previous = "none"
        else:
            try:
                provider_secret_open(provider=locked)
            except SealedSecretError:
                previous = "unreadable"
            else:
                previous = "set"
        locked.secret_encrypted = PROVIDER_SECRET.seal(secret, context=locked.name)
        locked.secret_set_at = timezone.now()
        locked.save(update_fields=["secret_encrypted", "secret_set_at", "updated_at"])
        audit_record(
            action="agent_runtime.provider.secret_changed",
            actor=actor,
            target_type="tool_provider",
            target_id=locked.name,
            data={"previous": previous},
        )
    provider.refresh_from_db()
    return True


# --- HTTP ---------------------------------------------------------------------------------------------
def _spec_fetch_url(provider: ToolProvider) -> str:
    # spec_url is a path on base_url's origin (config validation refuses absolute URLs), so the
    # signed path is exactly the one requested.
    parts = urlsplit(provider.base_url)
    return f"{parts.scheme}://{parts.netloc}{provider.spec_url}"


def _get(
    client: httpx.Client, url: str, headers: dict[str, str], *, read_body: bool
) -> tuple[int, bytes | None]:
    """One GET: the status and, when asked and 2xx, the body (at most ``SPEC_MAX_BYTES``), all of it
    within the provider's timeout (the outbound client's deadline covers headers and body)."""
    try:
        with client.stream("GET", url, headers=headers) as response:
            status = response.status_code
            if not read_body or not 200 <= status < 300:
                return status, None
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > SPEC_MAX_BYTES:
                raise _RefreshFailed(SPEC_TOO_LARGE, f"the spec is larger than {SPEC_MAX_BYTES} bytes")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > SPEC_MAX_BYTES:
                    raise _RefreshFailed(SPEC_TOO_LARGE, f"the spec is larger than {SPEC_MAX_BYTES} bytes")
            return status, bytes(body)
    except TargetForbidden:
        raise _NoAnswer(timeout=False, forbidden=True) from None
    except httpx.TimeoutException:
        raise _NoAnswer(timeout=True) from None
    except httpx.HTTPError:
        raise _NoAnswer(timeout=False) from None


def _http_client(provider: ToolProvider) -> httpx.Client:
    return outbound_client(
        timeout=provider.timeout_ms / 1000,
        headers={
            "User-Agent": _USER_AGENT,
            "Accept": "application/json, application/yaml;q=0.9, */*;q=0.5",
            # Uncompressed, so the size cap applies to what the provider actually sends.
            "Accept-Encoding": "identity",
        },
    )


def _no_answer_failure(error: _NoAnswer, probe: dict[str, Any], what: str) -> _RefreshFailed:
    if error.forbidden:
        return _RefreshFailed(
            TARGET_FORBIDDEN,
            "the provider's address is not an allowed outbound target (BAILING_OUTBOUND_ALLOWED_NETWORKS)",
            probe,
        )
    if error.timeout:
        return _RefreshFailed(SPEC_TIMEOUT, f"the {what} did not complete within the provider timeout", probe)
    return _RefreshFailed(SPEC_UNREACHABLE, f"the provider could not be reached for the {what}", probe)


def _get_spec(
    client: httpx.Client, url: str, headers: dict[str, str], probe: dict[str, Any], *, kind: str, what: str
) -> tuple[int, bytes | None]:
    """The spec request (``kind`` ``signed`` or ``unsigned``): no answer, or a body over the cap,
    leaves the probe ``inconclusive`` (``<kind>_request_no_answer`` / ``_too_large``, or
    ``target_forbidden``) and fails the refresh with the probe attached."""
    try:
        return _get(client, url, headers, read_body=True)
    except _NoAnswer as error:
        reason = "target_forbidden" if error.forbidden else f"{kind}_request_no_answer"
        probe.update(status="inconclusive", reason=reason)
        raise _no_answer_failure(error, probe, what) from None
    except _RefreshFailed as failure:
        probe.update(status="inconclusive", reason=f"{kind}_request_too_large")
        failure.probe = probe
        raise


def _negative_class(status: int | None) -> str:
    if status in _NEGATIVE_OK:
        return "refused"
    if status is not None and 200 <= status < 300:
        return "served"
    return "unexpected"


def _negative_probe(client: httpx.Client, url: str, headers: dict[str, str]) -> int | None:
    try:
        status, _ = _get(client, url, headers, read_body=False)
    except _NoAnswer:
        return None
    return status


def _fetch_signed(provider: ToolProvider, secret: str, probe: dict[str, Any]) -> bytes:
    url = _spec_fetch_url(provider)
    with _http_client(provider) as client:
        headers = sign_spec_fetch(secret=secret, path_with_query=provider.spec_url)
        status, body = _get_spec(client, url, headers, probe, kind="signed", what="signed spec request")
        probe["signed_http"] = status
        if body is None:
            probe.update(status="inconclusive", reason="signed_request_refused")
            hint = " (check the provider secret)" if status in (401, 403) else ""
            raise _RefreshFailed(
                SPEC_HTTP_STATUS,
                f"the provider answered HTTP {status} to the signed spec request{hint}",
                probe,
            )
        unsigned = _negative_probe(client, url, {})
        # A well-formed signature made with a random secret: only a wrong HMAC tells it apart.
        wrong = sign_spec_fetch(secret=stdlib_secrets.token_hex(32), path_with_query=provider.spec_url)
        invalid = _negative_probe(client, url, wrong)
    if unsigned is not None:
        probe["unsigned_http"] = unsigned
    if invalid is not None:
        probe["invalid_http"] = invalid
    classes = {"unsigned": _negative_class(unsigned), "invalid_signature": _negative_class(invalid)}
    served = [name for name, kind in classes.items() if kind == "served"]
    unexpected = [name for name, kind in classes.items() if kind == "unexpected"]
    if served:
        probe.update(status="public", reason=f"{served[0]}_request_served")
        raise _RefreshFailed(
            SPEC_NOT_PROTECTED,
            "the spec was served without a valid signature; protect it or set spec_access_policy: "
            "public_allowed",
            probe,
        )
    if unexpected:
        probe.update(status="inconclusive", reason=f"{unexpected[0]}_probe_unexpected_answer")
        raise _RefreshFailed(
            SPEC_PROBE_INCONCLUSIVE,
            "a request without a valid signature was neither served nor refused with 401/403/404",
            probe,
        )
    probe.update(status="protected", reason="negative_probes_refused")
    return body


def _fetch_public(provider: ToolProvider, probe: dict[str, Any]) -> bytes:
    with _http_client(provider) as client:
        status, body = _get_spec(
            client, _spec_fetch_url(provider), {}, probe, kind="unsigned", what="spec request"
        )
    probe["unsigned_http"] = status
    if status in (401, 403):
        # Contract: never fall back to a signed request; the operator's expectation is wrong.
        probe.update(status="inconclusive", reason="unsigned_request_refused")
        raise _RefreshFailed(
            SPEC_PROBE_INCONCLUSIVE,
            f"the spec endpoint refused an unsigned request (HTTP {status}) although the policy is "
            "public_allowed; use signed_required",
            probe,
        )
    if body is None:
        probe.update(status="inconclusive", reason="unsigned_request_failed")
        raise _RefreshFailed(
            SPEC_HTTP_STATUS, f"the provider answered HTTP {status} to the spec request", probe
        )
    probe.update(status="public", reason="public_allowed")
    return body


def _compiled(spec: Any, provider: ToolProvider, probe: dict[str, Any]) -> _Fetched:
    result = compile_spec(spec, provider=provider.name)
    if result.fatal:
        raise _RefreshFailed(SPEC_INVALID, "the spec is not a usable OpenAPI 3.0/3.1 document", probe)
    return _Fetched(spec=spec, result=result, probe=probe)


def _attempt(provider: ToolProvider) -> _Fetched:
    """Fetch (or read) and compile, without touching the database. Raises ``_RefreshFailed``."""
    probe: dict[str, Any] = {"status": "skipped", "at": timezone.now().isoformat()}
    if provider.spec_source == ToolProvider.SpecSource.INLINE:
        probe["reason"] = "inline_spec"
        if provider.spec_inline is None:
            raise _RefreshFailed(SPEC_MISSING, "the provider has no inline spec", probe)
        return _compiled(provider.spec_inline, provider, probe)

    if provider.spec_access_policy == ToolProvider.AccessPolicy.SIGNED_REQUIRED:
        try:
            secret = provider_secret_open(provider=provider)
        except SealedSecretError:
            raise _RefreshFailed(
                SECRET_UNREADABLE, "the stored secret cannot be decrypted (was SECRET_KEY changed?)"
            ) from None
        if secret is None:
            raise _RefreshFailed(SECRET_MISSING, "the provider has no secret to sign the spec request")
        body = _fetch_signed(provider, secret, probe)
    else:
        body = _fetch_public(provider, probe)
    try:
        spec = parse_spec_text(body.decode("utf-8-sig"))
    except (UnicodeDecodeError, SpecParseError):
        raise _RefreshFailed(SPEC_UNPARSEABLE, "the spec is not a JSON or YAML object", probe) from None
    return _compiled(spec, provider, probe)


# --- Refresh ------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _refresh_lock(provider_id: int) -> Iterator[bool]:
    with advisory_lock(_REFRESH_LOCK_CLASS, int(provider_id) & 0x7FFFFFFF) as acquired:
        yield acquired


def _fetch_settings(provider: ToolProvider) -> tuple:
    """What a fetch depends on; if any of it changes while fetching, the result is stale."""
    return (
        provider.enabled,
        provider.base_url,
        provider.spec_source,
        provider.spec_url,
        provider.spec_access_policy,
        provider.spec_inline,
        provider.secret_encrypted,
    )


def _failed(
    provider: ToolProvider, code: str, message: str, probe: dict[str, Any] | None = None
) -> RefreshOutcome:
    return RefreshOutcome(
        provider=provider.name, status="failed", error=code, message=message, probe=probe or {}
    )


def _record_failure(*, provider: ToolProvider, failure: _RefreshFailed, actor: Actor) -> RefreshOutcome:
    with transaction.atomic():
        locked = ToolProvider.objects.select_for_update().get(pk=provider.pk)
        locked.last_refresh_at = timezone.now()
        locked.last_refresh_status = "failed"
        locked.last_refresh_error = f"{failure.code}: {failure.message}"[:500]
        update_fields = ["last_refresh_at", "last_refresh_status", "last_refresh_error", "updated_at"]
        if failure.probe is not None:
            locked.access_probe = failure.probe
            update_fields.append("access_probe")
        locked.save(update_fields=update_fields)
        audit_record(
            action="agent_runtime.provider.refresh_failed",
            actor=actor,
            target_type="tool_provider",
            target_id=locked.name,
            data={"error": failure.code, "access_probe": failure.probe or {}},
        )
    return _failed(provider, failure.code, failure.message, failure.probe)


def _store(*, provider: ToolProvider, settings: tuple, fetched: _Fetched, actor: Actor) -> RefreshOutcome:
    with transaction.atomic():
        locked = ToolProvider.objects.select_for_update().get(pk=provider.pk)
        if _fetch_settings(locked) != settings:
            raise _RefreshFailed(
                PROVIDER_CHANGED, "the provider's settings changed during the refresh; run it again"
            )
        diff = provider_spec_store(provider=locked, spec=fetched.spec, result=fetched.result, actor=actor)
        locked.access_probe = fetched.probe
        locked.save(update_fields=["access_probe", "updated_at"])
    return RefreshOutcome(
        provider=provider.name,
        status="ok",
        probe=fetched.probe,
        added=diff["added"],
        removed=diff["removed"],
        changed=diff["changed"],
        tools=len(fetched.result.tools),
        warnings=len(fetched.result.warnings),
    )


def _authz_probe(provider: ToolProvider, spec: dict[str, Any]) -> dict[str, Any]:
    """The authorization probe of a freshly stored ``spec`` (network only when one is declared)."""
    if provider.spec_source == ToolProvider.SpecSource.INLINE:
        return authz_probe_skipped("inline_spec")
    try:
        target = authz_probe_target(spec)
    except DeclarationInvalid:
        return authz_probe_skipped("declaration_invalid")
    if target is None:
        return authz_probe_skipped("not_declared")
    try:
        secret = provider_secret_open(provider=provider)
    except SealedSecretError:
        return authz_probe_skipped("secret_unreadable", target)
    if secret is None:  # public_allowed needs no secret for the spec, but a probe is signed
        return authz_probe_skipped("secret_missing", target)
    return authz_probe_run(provider=provider, target=target, secret=secret)


def provider_refresh(*, provider: ToolProvider, actor: Actor) -> RefreshOutcome:
    """Fetch (or recompile) the provider's spec and, if it is acceptable, make it the current spec.

    Never raises for a provider-side problem: the outcome says what happened. A disabled provider or
    a refresh already running for it is refused without any write; every other failure is recorded
    on the provider and audited, and the last good spec stays. A success runs the authorization
    probe afterwards (its outcome never turns the refresh into a failure). Must not be called inside a
    transaction (it uses the network); see the module docstring for the rules. ``provider`` is
    refreshed from the database afterwards (it may be a deferred instance: the refresh reads its
    own full copy of the row).
    """
    current = ToolProvider.objects.get(pk=provider.pk)
    if not current.enabled:
        return _failed(current, PROVIDER_DISABLED, "the provider is disabled; enable it to refresh")
    with _refresh_lock(current.pk) as acquired:
        if not acquired:
            return _failed(current, REFRESH_IN_PROGRESS, "another refresh of this provider is running")
        # Re-read under the lock: a refresh that just finished may have changed the row.
        current = ToolProvider.objects.get(pk=provider.pk)
        if not current.enabled:
            return _failed(current, PROVIDER_DISABLED, "the provider is disabled; enable it to refresh")
        settings = _fetch_settings(current)
        try:
            fetched = _attempt(current)
            outcome = _store(provider=current, settings=settings, fetched=fetched, actor=actor)
        except _RefreshFailed as failure:
            outcome = _record_failure(provider=current, failure=failure, actor=actor)
        else:
            # Still under the refresh lock, outside any transaction; the spec is already stored.
            authz = _authz_probe(current, fetched.spec)
            authz_probe_store(provider=current, outcome=authz, actor=actor)
            outcome = dataclasses.replace(outcome, authz_probe=authz)
    provider.refresh_from_db()
    return outcome
