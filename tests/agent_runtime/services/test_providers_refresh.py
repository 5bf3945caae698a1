"""Tool provider refresh over real HTTP: the Demo Shop process and small local spec servers.

Covers the access policies and their negative probes, every failure keeping the last good spec,
inline recompiles, the command's output and exit status, the one-refresh-at-a-time rule and that
the provider secret never leaks into rows, audit data, output or errors.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import override_settings

from agent_runtime.models import ProviderTool, Route, ToolProvider
from agent_runtime.services.providers import (
    SPEC_MAX_BYTES,
    provider_refresh,
    provider_secret_open,
    provider_set_secret,
)
from bailing import signing
from bailing.audit.actor import Actor
from bailing.audit.models import AuditEvent
from bailing.management.commands import bailing_demo
from demo_business.spec import SPEC_PATH, build_spec
from tests.support.demo_business import running_demo_business
from tests.support.outbound import RawRequest, drip_body, drip_headers, fixed, raw_http_server, routes
from tests.support.threaded_server import serving

ACTOR = Actor.system("tests")
SECRET = "provider-secret-" + "k" * 24
# The authorization probe the Demo Shop spec (build_spec) declares, and its synthetic subject.
AUTHZ_PATH = "/.well-known/bailing/authz-probe"
NOBODY = "__bailing_authz_probe__:nobody"
AUTHZ_KEYS = {"status", "http", "tool", "mode", "requires_subject", "reason", "at"}
DEMO_TOOLS = {
    "list_orders",
    "get_order",
    "create_ticket",
    "cancel_order",
    "request_refund",
    "demo_failure_probe",
}


# --- Local spec servers -------------------------------------------------------------------------------
@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    method: str = "GET"
    body: bytes = b""


@dataclass
class SpecServer:
    """A tiny HTTP server on an OS-assigned loopback port; ``respond`` decides every answer."""

    respond: Callable[[Seen], tuple[int, dict[str, str], bytes | Iterable[bytes]]]
    seen: list[Seen] = field(default_factory=list)
    base_url: str = ""


@contextlib.contextmanager
def spec_server(respond) -> Iterator[SpecServer]:
    state = SpecServer(respond=respond)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self._answer()

        def do_POST(self):
            self._answer()

        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            request = Seen(
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                method=self.command,
                body=self.rfile.read(length) if length else b"",
            )
            state.seen.append(request)
            answer = state.respond(request)
            if answer is None:  # hang up without an answer
                self.close_connection = True
                return
            status, headers, body = answer
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if isinstance(body, bytes):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            # HTTP/1.0: a body given as chunks has no Content-Length and ends when the connection
            # closes.
            for chunk in [body] if isinstance(body, bytes) else body:
                self.wfile.write(chunk)
                self.wfile.flush()

        def log_message(self, format, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):
            # The hub hangs up on oversized or slow answers; that is expected here.
            pass

    server = Server(("127.0.0.1", 0), Handler)
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield state


def _spec_bytes(spec: dict | None = None) -> bytes:
    return json.dumps(build_spec() if spec is None else spec).encode("utf-8")


def serve_public(body: bytes, status: int = 200, headers: dict | None = None):
    return lambda seen: (status, {"Content-Type": "application/json", **(headers or {})}, body)


def serve_signed(secret: str, body: bytes, refused: int = 401):
    """Serve ``body`` to correctly signed requests; refuse everything else with ``refused``."""

    def respond(seen: Seen):
        verified = signing.verify_tool_request(
            secret=secret, headers=seen.headers, method="GET", path_with_query=seen.path, body=b""
        )
        if verified:
            return 200, {"Content-Type": "application/json", "Cache-Control": "private, no-store"}, body
        return refused, {"Content-Type": "application/json"}, b'{"error":"invalid_signature"}'

    return respond


@pytest.fixture(scope="module")
def shop():
    with running_demo_business(secret=SECRET) as business:
        yield business


def make_provider(base_url: str, *, secret: str | None = SECRET, **fields) -> ToolProvider:
    provider = ToolProvider.objects.create(
        name=fields.pop("name", "shop"),
        base_url=base_url,
        timeout_ms=fields.pop("timeout_ms", 5000),
        **fields,
    )
    if secret is not None:
        provider_set_secret(provider=provider, secret=secret, actor=ACTOR)
    return provider


def _tools(provider: ToolProvider) -> dict[str, ProviderTool]:
    return {tool.name: tool for tool in ProviderTool.objects.filter(provider=provider)}


def _kept(provider: ToolProvider, before: tuple) -> bool:
    provider.refresh_from_db()
    return (provider.spec_sha256, sorted(_tools(provider))) == before


def _good_state(provider: ToolProvider) -> tuple:
    provider.refresh_from_db()
    assert provider.spec_json is not None
    return provider.spec_sha256, sorted(_tools(provider))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- The Demo Shop (signed_required) ------------------------------------------------------------------
@pytest.mark.django_db
def test_refresh_from_the_demo_shop_compiles_six_governed_tools(shop):
    provider = make_provider(shop.base_url)
    outcome = provider_refresh(provider=provider, actor=ACTOR)

    assert outcome.ok, outcome
    assert (outcome.error, outcome.tools, outcome.warnings) == ("", 6, 0)
    assert sorted(outcome.added) == sorted(DEMO_TOOLS)
    assert outcome.removed == outcome.changed == []
    tools = _tools(provider)
    assert set(tools) == DEMO_TOOLS
    flags = {
        name: (tool.risk, tool.readonly, tool.approval_required, tool.requires_subject)
        for name, tool in tools.items()
    }
    assert flags["list_orders"] == ("low", True, False, True)
    assert flags["get_order"] == ("low", True, False, True)
    assert flags["create_ticket"] == ("medium", False, False, True)
    assert flags["cancel_order"] == ("high", False, True, True)
    assert flags["request_refund"][:3] == ("medium", False, True)
    assert flags["demo_failure_probe"] == ("low", True, False, False)
    assert tools["cancel_order"].compiled["approval"]["required"] is True
    refund_rules = tools["request_refund"].compiled["approval"]
    assert refund_rules["required"] is False
    assert refund_rules["when"][0]["param"] == "amount"

    provider.refresh_from_db()
    assert provider.last_refresh_status == "ok"
    assert provider.last_refresh_error == ""
    assert provider.spec_json == build_spec()
    probe = provider.access_probe
    assert probe["status"] == "protected"
    assert (probe["signed_http"], probe["unsigned_http"], probe["invalid_http"]) == (200, 401, 401)
    assert set(probe) == {"status", "signed_http", "unsigned_http", "invalid_http", "reason", "at"}
    assert outcome.probe == probe
    stored = AuditEvent.objects.filter(action="agent_runtime.provider.spec_stored", target_id="shop")
    assert stored.count() == 1

    # Refreshing the same spec again changes no tool.
    again = provider_refresh(provider=provider, actor=ACTOR)
    assert again.ok and again.added == again.removed == again.changed == []


@pytest.mark.django_db
def test_wrong_secret_fails_and_keeps_the_last_good_spec(shop):
    provider = make_provider(shop.base_url)
    assert provider_refresh(provider=provider, actor=ACTOR).ok
    before = _good_state(provider)
    provider_set_secret(provider=provider, secret="not-the-shop-secret", actor=ACTOR)

    outcome = provider_refresh(provider=provider, actor=ACTOR)

    assert (outcome.status, outcome.error) == ("failed", "spec_http_status")
    assert _kept(provider, before)
    assert provider.last_refresh_status == "failed"
    assert provider.last_refresh_error.startswith("spec_http_status: ")
    assert provider.access_probe["status"] == "inconclusive"
    assert provider.access_probe["signed_http"] == 401
    assert "unsigned_http" not in provider.access_probe  # no probes after a refused signed request
    failed = AuditEvent.objects.get(action="agent_runtime.provider.refresh_failed")
    assert failed.data["error"] == "spec_http_status"
    assert failed.data["access_probe"]["signed_http"] == 401


@pytest.mark.django_db
def test_protected_endpoint_under_public_allowed_is_inconclusive(shop):
    provider = make_provider(shop.base_url, spec_access_policy="public_allowed")
    outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert (outcome.status, outcome.error) == ("failed", "spec_probe_inconclusive")
    provider.refresh_from_db()
    assert provider.spec_json is None
    assert provider.access_probe["status"] == "inconclusive"
    assert provider.access_probe["unsigned_http"] == 401
    assert "signed_http" not in provider.access_probe


@pytest.mark.django_db
def test_public_allowed_never_retries_with_a_signature():
    with spec_server(serve_signed(SECRET, _spec_bytes(), refused=403)) as server:
        provider = make_provider(server.base_url, spec_access_policy="public_allowed")
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert (outcome.error, outcome.probe["status"], outcome.probe["unsigned_http"]) == (
        "spec_probe_inconclusive",
        "inconclusive",
        403,
    )
    assert len(server.seen) == 1
    assert signing.SIGNATURE_HEADER.lower() not in server.seen[0].headers


# --- Public spec servers ------------------------------------------------------------------------------
@pytest.mark.django_db
def test_a_public_spec_under_signed_required_is_refused_and_the_old_spec_kept():
    with spec_server(serve_signed(SECRET, _spec_bytes())) as server:
        provider = make_provider(server.base_url)
        assert provider_refresh(provider=provider, actor=ACTOR).ok
        before = _good_state(provider)
        server.respond = serve_public(_spec_bytes({**build_spec(), "info": {"title": "x", "version": "2"}}))
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert (outcome.status, outcome.error) == ("failed", "spec_not_protected")
    assert _kept(provider, before)
    probe = provider.access_probe
    assert (probe["status"], probe["signed_http"], probe["unsigned_http"], probe["invalid_http"]) == (
        "public",
        200,
        200,
        200,
    )
    # Signed fetch, then the unsigned probe, then the invalid-signature probe.
    signed, unsigned, invalid = server.seen[-3:]
    assert signing.verify_tool_request(
        secret=SECRET, headers=signed.headers, method="GET", path_with_query=SPEC_PATH, body=b""
    )
    assert signing.SIGNATURE_HEADER.lower() not in unsigned.headers
    assert invalid.headers[signing.SIGNATURE_HEADER.lower()].startswith("sha256=")
    assert not signing.verify_tool_request(
        secret=SECRET, headers=invalid.headers, method="GET", path_with_query=SPEC_PATH, body=b""
    )


@pytest.mark.django_db
def test_only_the_invalid_signature_probe_being_served_is_also_not_protected():
    def respond(seen: Seen):
        if signing.SIGNATURE_HEADER.lower() in seen.headers:
            return 200, {}, _spec_bytes()  # accepts any signature, even a wrong one
        return 401, {}, b""

    with spec_server(respond) as server:
        outcome = provider_refresh(provider=make_provider(server.base_url), actor=ACTOR)
    assert outcome.error == "spec_not_protected"
    assert (outcome.probe["unsigned_http"], outcome.probe["invalid_http"]) == (401, 200)


@pytest.mark.parametrize("negative_status", [404, 403])
@pytest.mark.django_db
def test_404_and_403_count_as_protected(negative_status):
    with spec_server(serve_signed(SECRET, _spec_bytes(), refused=negative_status)) as server:
        outcome = provider_refresh(provider=make_provider(server.base_url), actor=ACTOR)
    assert outcome.ok
    assert outcome.probe["status"] == "protected"
    assert outcome.probe["unsigned_http"] == outcome.probe["invalid_http"] == negative_status


@pytest.mark.django_db
def test_a_negative_probe_with_an_unexpected_answer_is_inconclusive():
    with spec_server(serve_signed(SECRET, _spec_bytes(), refused=500)) as server:
        provider = make_provider(server.base_url)
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.error == "spec_probe_inconclusive"
    assert outcome.probe["status"] == "inconclusive"
    provider.refresh_from_db()
    assert provider.spec_json is None
    assert not _tools(provider)


@pytest.mark.django_db
def test_a_public_spec_under_public_allowed_is_stored_as_public():
    with spec_server(serve_public(_spec_bytes())) as server:
        provider = make_provider(server.base_url, spec_access_policy="public_allowed", secret=None)
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.ok and outcome.tools == 6
    assert len(server.seen) == 1
    assert signing.SIGNATURE_HEADER.lower() not in server.seen[0].headers
    provider.refresh_from_db()
    assert provider.access_probe["status"] == "public"
    assert provider.access_probe["unsigned_http"] == 200
    assert "signed_http" not in provider.access_probe


@pytest.mark.django_db
def test_yaml_specs_and_custom_spec_paths_with_a_query_are_signed_as_requested():
    path = "/bailing/tools.yaml?v=2"
    body = yaml.safe_dump(build_spec()).encode("utf-8")
    with spec_server(serve_signed(SECRET, body)) as server:
        provider = make_provider(server.base_url + "/ignored-prefix", spec_url=path)
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.ok and outcome.tools == 6
    # The spec three times (signed, unsigned, wrong signature), then the spec's authorization probe.
    assert [seen.path for seen in server.seen] == [path, path, path, AUTHZ_PATH]


# --- Failures keep the last good spec -----------------------------------------------------------------
def _fail_after_success(server: SpecServer, respond, **fields) -> tuple[ToolProvider, object, bool]:
    provider = make_provider(server.base_url, **fields)
    assert provider_refresh(provider=provider, actor=ACTOR).ok
    before = _good_state(provider)
    server.respond = respond
    outcome = provider_refresh(provider=provider, actor=ACTOR)
    return provider, outcome, _kept(provider, before)


BIG = SPEC_MAX_BYTES + 1


@pytest.mark.parametrize(
    ("respond", "code"),
    [
        (serve_signed(SECRET, b"\x00\xff not a spec"), "spec_unparseable"),
        (serve_signed(SECRET, b"<html><body>Maintenance</body></html>\n: ["), "spec_unparseable"),
        (serve_signed(SECRET, b"[1, 2, 3]"), "spec_unparseable"),
        (serve_signed(SECRET, b'{"swagger": "2.0", "paths": {}}'), "spec_invalid"),
        (serve_signed(SECRET, b'{"openapi": "3.1.0", "paths": []}'), "spec_invalid"),
        (serve_signed(SECRET, b"{" + b" " * BIG + b"}"), "spec_too_large"),
        (serve_signed(SECRET, [b"{", *[b" " * 65536] * (BIG // 65536 + 1), b"}"]), "spec_too_large"),
        (serve_public(b"", status=500), "spec_http_status"),
        (
            serve_public(b"", status=302, headers={"Location": "http://127.0.0.1:1/elsewhere"}),
            "spec_http_status",
        ),
    ],
    ids=[
        "binary",
        "html",
        "json-list",
        "swagger-2",
        "paths-not-object",
        "oversized-declared",
        "oversized-streamed",
        "server-error",
        "redirect-not-followed",
    ],
)
@pytest.mark.django_db
def test_bad_answers_fail_and_keep_the_last_good_spec(respond, code):
    with spec_server(serve_signed(SECRET, _spec_bytes())) as server:
        provider, outcome, kept = _fail_after_success(server, respond)
    assert (outcome.status, outcome.error) == ("failed", code)
    assert kept
    assert provider.last_refresh_status == "failed"
    assert provider.last_refresh_error.startswith(f"{code}: ")
    assert provider.spec_refreshed_at < provider.last_refresh_at
    assert server.seen[-1].path == SPEC_PATH  # the redirect target was never requested


@pytest.mark.django_db
def test_unreachable_provider_fails_and_keeps_the_last_good_spec():
    with spec_server(serve_signed(SECRET, _spec_bytes())) as server:
        provider = make_provider(server.base_url)
        assert provider_refresh(provider=provider, actor=ACTOR).ok
        before = _good_state(provider)
    ToolProvider.objects.filter(pk=provider.pk).update(base_url=f"http://127.0.0.1:{_free_port()}")
    outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert (outcome.status, outcome.error) == ("failed", "spec_unreachable")
    assert _kept(provider, before)
    assert provider.access_probe["status"] == "inconclusive"
    assert "signed_http" not in provider.access_probe


@pytest.mark.django_db
def test_a_slow_provider_times_out():
    release = threading.Event()

    def slow(seen: Seen):
        release.wait(10)
        return 200, {}, _spec_bytes()

    with spec_server(slow) as server:
        provider = make_provider(server.base_url, timeout_ms=1000)
        outcome = provider_refresh(provider=provider, actor=ACTOR)
        release.set()
    assert outcome.error == "spec_timeout"


@pytest.mark.django_db
def test_a_slow_drip_is_cut_at_the_deadline():
    def drip():
        yield b"{"
        for _ in range(30):
            time.sleep(0.1)
            yield b" "

    def respond(seen: Seen):
        return 200, {}, drip()

    with spec_server(respond) as server:
        # Each byte arrives well within the per-read timeout, the whole body does not.
        outcome = provider_refresh(provider=make_provider(server.base_url, timeout_ms=1000), actor=ACTOR)
    assert outcome.error == "spec_timeout"


# --- Secrets, disabled providers, inline specs --------------------------------------------------------
@pytest.mark.django_db
def test_signed_required_without_a_secret_fails_without_network():
    with spec_server(serve_public(_spec_bytes())) as server:
        provider = make_provider(server.base_url, secret=None)
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert (outcome.status, outcome.error, outcome.probe) == ("failed", "secret_missing", {})
    assert server.seen == []
    provider.refresh_from_db()
    assert provider.last_refresh_error.startswith("secret_missing: ")
    assert provider.access_probe == {}


@pytest.mark.django_db
def test_a_secret_sealed_under_another_key_is_unreadable():
    with spec_server(serve_signed(SECRET, _spec_bytes())) as server:
        provider = make_provider(server.base_url)
        with override_settings(SECRET_KEY="rotated-" + "z" * 60):
            outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.error == "secret_unreadable"
    assert server.seen == []


@pytest.mark.django_db
def test_a_disabled_provider_is_refused_without_any_write():
    with spec_server(serve_signed(SECRET, _spec_bytes())) as server:
        provider = make_provider(server.base_url, enabled=False)
        events = AuditEvent.objects.count()
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert (outcome.status, outcome.error) == ("failed", "provider_disabled")
    assert server.seen == []
    provider.refresh_from_db()
    assert (provider.last_refresh_status, provider.last_refresh_at) == ("never", None)
    assert AuditEvent.objects.count() == events


@pytest.mark.django_db
def test_inline_providers_are_recompiled_without_network():
    provider = ToolProvider.objects.create(
        name="inline-shop",
        base_url="https://shop.example.com",
        spec_source="inline",
        spec_inline=build_spec(),
    )
    outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.ok and outcome.tools == 6
    assert outcome.probe["status"] == "skipped"
    assert outcome.probe["reason"] == "inline_spec"
    provider.refresh_from_db()
    assert provider.spec_json == build_spec()

    ToolProvider.objects.filter(pk=provider.pk).update(spec_inline={"openapi": "3.1.0", "paths": []})
    before = _good_state(provider)
    outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.error == "spec_invalid"
    assert _kept(provider, before)

    ToolProvider.objects.filter(pk=provider.pk).update(spec_inline=None)
    assert provider_refresh(provider=provider, actor=ACTOR).error == "spec_missing"


# --- Authorization probe ------------------------------------------------------------------------------
def _probed_spec(declaration=None, **root) -> dict:
    spec = build_spec()
    spec.pop("x-bailing-authz-probe", None)
    if declaration is not None:
        spec["x-bailing-authz-probe"] = declaration
    spec.update(root)
    return spec


def serve_spec_and_probe(spec: dict, probe):
    """The signed spec at SPEC_PATH; every other request (the probe) is answered by ``probe``."""
    spec_answer = serve_signed(SECRET, _spec_bytes(spec))

    def respond(seen: Seen):
        if seen.method == "GET" and seen.path == SPEC_PATH:
            return spec_answer(seen)
        return probe(seen)

    return respond


def probe_answer(status: int, body: bytes = b"", headers: dict | None = None):
    return lambda seen: (status, {"Content-Type": "application/json", **(headers or {})}, body)


def _probes(server: SpecServer) -> list[Seen]:
    return [seen for seen in server.seen if seen.path != SPEC_PATH]


def _authz_events(provider: ToolProvider) -> list[dict]:
    events = AuditEvent.objects.filter(action="agent_runtime.provider.authz_probe", target_id=provider.name)
    return list(events.order_by("id").values_list("data", flat=True))


@pytest.mark.django_db
def test_the_demo_shop_refuses_the_nobody_subject_so_its_probe_passes(shop):
    provider = make_provider(shop.base_url)
    outcome = provider_refresh(provider=provider, actor=ACTOR)

    assert outcome.ok
    provider.refresh_from_db()
    probe = provider.authz_probe
    assert set(probe) == AUTHZ_KEYS
    assert {key: probe[key] for key in AUTHZ_KEYS - {"at"}} == {
        "status": "pass",
        "http": 403,
        "tool": "authz_probe",
        "mode": "dedicated",
        "requires_subject": True,
        "reason": "nobody_refused",
    }
    assert outcome.authz_probe == probe
    assert _authz_events(provider) == [probe]
    event = AuditEvent.objects.get(action="agent_runtime.provider.authz_probe")
    assert (event.actor_type, event.target_type) == ("system", "tool_provider")


@pytest.mark.django_db
def test_the_probe_is_signed_like_a_tool_call_for_the_nobody_subject():
    spec = _probed_spec({"method": "POST", "path": AUTHZ_PATH, "operationId": "check_authz"})
    with spec_server(serve_spec_and_probe(spec, probe_answer(403))) as server:
        provider = make_provider(server.base_url + "/api/v1")  # requested on the origin, like spec_url
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    [probe] = _probes(server)
    assert (probe.method, probe.path) == ("POST", AUTHZ_PATH)
    assert json.loads(probe.body) == {"subject": NOBODY, "reason": "bailing-authz-probe", "expect": "deny"}
    verified = signing.verify_tool_request(
        secret=SECRET, headers=probe.headers, method="POST", path_with_query=AUTHZ_PATH, body=probe.body
    )
    assert verified and (verified.on_behalf_of, verified.job_id) == (NOBODY, "probe")
    assert probe.headers["content-type"] == "application/json"
    assert probe.headers["x-bailing-client"] == "__probe__"
    assert probe.headers["x-bailing-tool-scope"] == "__probe__.authz"
    assert (outcome.authz_probe["status"], outcome.authz_probe["tool"]) == ("pass", "check_authz")


@pytest.mark.django_db
def test_an_operation_marked_as_the_probe_is_requested_with_its_method():
    spec = _probed_spec()
    spec["paths"]["/authz-check"] = {"get": {"operationId": "authzCheck", "x-bailing-authz-probe": True}}
    with spec_server(serve_spec_and_probe(spec, probe_answer(401))) as server:
        outcome = provider_refresh(provider=make_provider(server.base_url), actor=ACTOR)
    [probe] = _probes(server)
    assert (probe.method, probe.path, probe.body) == ("GET", "/authz-check", b"")
    assert signing.verify_tool_request(
        secret=SECRET, headers=probe.headers, method="GET", path_with_query="/authz-check", body=b""
    )
    assert {k: outcome.authz_probe[k] for k in ("status", "http", "tool", "reason")} == {
        "status": "pass",
        "http": 401,
        "tool": "authzCheck",
        "reason": "nobody_refused",
    }


@pytest.mark.parametrize(
    ("answer", "status", "reason", "http"),
    [
        (probe_answer(401), "pass", "nobody_refused", 401),
        (probe_answer(403, b'{"error":"forbidden"}'), "pass", "nobody_refused", 403),
        (probe_answer(200, b'{"authorized":false,"subject":"x"}'), "pass", "nobody_denied", 200),
        (probe_answer(200, b'{"allow":true}'), "suspect", "nobody_authorized", 200),
        (probe_answer(200, b'{"orders":[]}'), "suspect", "nobody_served", 200),
        (probe_answer(204), "suspect", "nobody_served", 204),
        (probe_answer(200, b"not json"), "suspect", "nobody_served", 200),
        (probe_answer(404), "inconclusive", "unexpected_status", 404),
        (probe_answer(500), "inconclusive", "unexpected_status", 500),
        (probe_answer(302, headers={"Location": "/elsewhere"}), "inconclusive", "unexpected_status", 302),
        (lambda seen: None, "inconclusive", "no_answer", None),
    ],
    ids=[
        "401",
        "403",
        "2xx-denied-in-body",
        "2xx-allowed-in-body",
        "2xx-served",
        "204",
        "2xx-not-json",
        "404",
        "500",
        "redirect-not-followed",
        "hang-up",
    ],
)
@pytest.mark.django_db
def test_probe_answers_are_classified_and_never_fail_the_refresh(answer, status, reason, http):
    spec = _probed_spec({"path": AUTHZ_PATH})  # method defaults to POST
    with spec_server(serve_spec_and_probe(spec, answer)) as server:
        provider = make_provider(server.base_url)
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.ok and outcome.tools == 6
    provider.refresh_from_db()
    assert (provider.last_refresh_status, provider.spec_json) == ("ok", spec)
    probe = provider.authz_probe
    assert (probe["status"], probe["reason"], probe.get("http")) == (status, reason, http)
    assert (probe["mode"], probe["tool"], probe["requires_subject"]) == ("dedicated", "authz_probe", True)
    assert [seen.path for seen in _probes(server)] == [AUTHZ_PATH]  # one request, no redirect followed
    assert _authz_events(provider) == [probe]


@pytest.mark.django_db
def test_a_slow_probe_is_inconclusive_at_the_provider_timeout():
    release = threading.Event()

    def slow(seen: Seen):
        release.wait(10)
        return 403, {}, b""

    with spec_server(serve_spec_and_probe(_probed_spec({"path": AUTHZ_PATH}), slow)) as server:
        provider = make_provider(server.base_url, timeout_ms=1000)
        started = time.monotonic()
        outcome = provider_refresh(provider=provider, actor=ACTOR)
        elapsed = time.monotonic() - started
        release.set()
    assert outcome.ok
    assert (outcome.authz_probe["status"], outcome.authz_probe["reason"]) == ("inconclusive", "timeout")
    assert "http" not in outcome.authz_probe
    assert elapsed < 5


@pytest.mark.django_db
def test_the_probe_ignores_proxy_settings(monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{_free_port()}")
    monkeypatch.setenv("NO_PROXY", "")
    with spec_server(serve_spec_and_probe(_probed_spec({"path": AUTHZ_PATH}), probe_answer(403))) as server:
        outcome = provider_refresh(provider=make_provider(server.base_url), actor=ACTOR)
    assert outcome.authz_probe["status"] == "pass"


@pytest.mark.django_db(transaction=True)
def test_the_probe_runs_outside_any_transaction(monkeypatch):
    from agent_runtime.services import authz_probe

    seen_atomic = []
    send = authz_probe._send

    def recording_send(*args, **kwargs):
        seen_atomic.append(connection.in_atomic_block)
        return send(*args, **kwargs)

    monkeypatch.setattr(authz_probe, "_send", recording_send)
    with spec_server(serve_spec_and_probe(_probed_spec({"path": AUTHZ_PATH}), probe_answer(403))) as server:
        outcome = provider_refresh(provider=make_provider(server.base_url), actor=ACTOR)
    assert outcome.authz_probe["status"] == "pass"
    assert seen_atomic == [False]


@pytest.mark.parametrize(
    "declaration",
    [
        {"path": "https://elsewhere.example/authz"},
        {"path": "//elsewhere.example/authz"},
        {"path": "/a/../authz"},
        {"path": "/authz probe"},
        {"path": "/" + "a" * 512},
        {"method": "PUT", "path": AUTHZ_PATH},
        {"method": 1, "path": AUTHZ_PATH},
        {"method": "POST"},
        "/.well-known/bailing/authz-probe",
        True,
    ],
    ids=[
        "absolute",
        "scheme-relative",
        "dot-segment",
        "space",
        "too-long",
        "put",
        "method-type",
        "no-path",
        "string",
        "true-at-root",
    ],
)
@pytest.mark.django_db
def test_an_unusable_declaration_is_skipped_without_a_request(declaration):
    spec = _probed_spec(declaration)
    with spec_server(serve_spec_and_probe(spec, probe_answer(200, b'{"authorized":true}'))) as server:
        outcome = provider_refresh(provider=make_provider(server.base_url), actor=ACTOR)
    assert outcome.ok
    assert {k: outcome.authz_probe[k] for k in ("status", "reason")} == {
        "status": "skipped",
        "reason": "declaration_invalid",
    }
    assert _probes(server) == []


@pytest.mark.django_db
def test_a_marked_operation_with_path_variables_is_an_unusable_declaration():
    spec = _probed_spec()
    spec["paths"]["/authz/{who}"] = {"post": {"operationId": "authz", "x-bailing-authz-probe": True}}
    with spec_server(serve_spec_and_probe(spec, probe_answer(403))) as server:
        outcome = provider_refresh(provider=make_provider(server.base_url), actor=ACTOR)
    assert outcome.authz_probe["reason"] == "declaration_invalid"
    assert _probes(server) == []


@pytest.mark.django_db
def test_a_spec_without_a_declaration_is_skipped_and_audited():
    with spec_server(serve_spec_and_probe(_probed_spec(), probe_answer(200))) as server:
        provider = make_provider(server.base_url)
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.ok
    assert set(outcome.authz_probe) == {"status", "reason", "at"}
    assert (outcome.authz_probe["status"], outcome.authz_probe["reason"]) == ("skipped", "not_declared")
    assert _probes(server) == []
    assert _authz_events(provider) == [outcome.authz_probe]


@pytest.mark.django_db
def test_a_public_spec_without_a_secret_cannot_sign_the_probe():
    spec = _probed_spec({"path": AUTHZ_PATH})
    with spec_server(serve_public(_spec_bytes(spec))) as server:
        provider = make_provider(server.base_url, spec_access_policy="public_allowed", secret=None)
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.ok
    assert outcome.authz_probe["status"] == "skipped"
    assert (outcome.authz_probe["reason"], outcome.authz_probe["tool"]) == ("secret_missing", "authz_probe")
    assert len(server.seen) == 1  # the spec only


@pytest.mark.django_db
def test_an_inline_spec_is_never_probed():
    provider = ToolProvider.objects.create(
        name="inline-shop",
        base_url="https://shop.example.com",
        spec_source="inline",
        spec_inline=build_spec(),
    )
    outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.ok
    provider.refresh_from_db()
    assert (provider.authz_probe["status"], provider.authz_probe["reason"]) == ("skipped", "inline_spec")


@pytest.mark.django_db
def test_a_failed_refresh_runs_no_probe_and_keeps_the_last_outcome(shop):
    provider = make_provider(shop.base_url)
    assert provider_refresh(provider=provider, actor=ACTOR).ok
    provider.refresh_from_db()
    before = provider.authz_probe
    provider_set_secret(provider=provider, secret="not-the-shop-secret", actor=ACTOR)

    outcome = provider_refresh(provider=provider, actor=ACTOR)

    assert outcome.error == "spec_http_status"
    assert outcome.authz_probe == {}
    provider.refresh_from_db()
    assert provider.authz_probe == before
    assert len(_authz_events(provider)) == 1


# --- Command ------------------------------------------------------------------------------------------
def _command(*args: str) -> tuple[list[str], CommandError | None]:
    out = io.StringIO()
    error = None
    try:
        call_command("bailing_provider_refresh", *args, stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        error = exc
    return out.getvalue().splitlines(), error


@pytest.mark.django_db
def test_command_prints_one_line_per_provider_and_fails_when_any_failed(shop):
    make_provider(shop.base_url, name="demo-shop")
    make_provider(f"http://127.0.0.1:{_free_port()}", name="gone-shop")
    ToolProvider.objects.create(
        name="inline-shop", base_url="https://x.example", spec_source="inline", spec_inline=build_spec()
    )
    make_provider(shop.base_url, name="off-shop", enabled=False)

    lines, error = _command("demo-shop")
    assert lines == ["[1/1] demo-shop: ok (6 tools, 0 warnings)"]
    assert error is None

    lines, error = _command("--all")
    assert lines[0] == "[1/3] demo-shop: ok (6 tools, 0 warnings)"
    assert lines[1].startswith("[2/3] gone-shop: failed: spec_unreachable (")
    assert lines[2] == "[3/3] inline-shop: ok (6 tools, 0 warnings)"
    assert str(error) == "1 of 3 refreshes failed; the last good specs were kept"

    lines, error = _command("off-shop", "demo-shop")
    assert lines[0].startswith("[1/2] off-shop: failed: provider_disabled (")
    assert error is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "name one or more providers, or pass --all (not both)"),
        (("--all", "x1"), "name one or more providers, or pass --all (not both)"),
        (("nope", "BAD\nNAME"), "unknown tool providers: nope, (invalid name)"),
    ],
)
@pytest.mark.django_db
def test_command_argument_errors(args, message):
    lines, error = _command(*args)
    assert str(error) == message
    assert lines == []


# --- The secret never leaks ---------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_secret_appears_nowhere_but_sealed(shop):
    provider = make_provider(shop.base_url, name="demo-shop")
    provider_refresh(provider=provider, actor=ACTOR)
    provider_set_secret(provider=provider, secret=SECRET + "-wrong", actor=ACTOR)
    lines, _ = _command("demo-shop")
    provider_set_secret(provider=provider, secret=SECRET, actor=ACTOR)
    provider_refresh(provider=provider, actor=ACTOR)
    with override_settings(SECRET_KEY="rotated-" + "z" * 60):
        unreadable = provider_refresh(provider=provider, actor=ACTOR)
    with pytest.raises(ValueError) as bad_secret:
        provider_set_secret(provider=provider, secret=SECRET + "\n", actor=ACTOR)

    provider.refresh_from_db()
    assert provider.secret_encrypted.startswith("v1.")
    assert provider_secret_open(provider=provider) == SECRET
    texts = [
        "\n".join(lines),
        str(bad_secret.value),
        repr(unreadable),
        json.dumps(ToolProvider.objects.values().get(), default=str).replace(provider.secret_encrypted, ""),
        json.dumps(list(ProviderTool.objects.values()), default=str),
        json.dumps(list(AuditEvent.objects.values("action", "actor", "target_id", "data"))),
    ]
    for text in texts:
        assert SECRET not in text
        assert "-wrong" not in text
    actions = list(AuditEvent.objects.values_list("action", "data"))
    assert ("agent_runtime.provider.secret_changed", {"previous": "set"}) in actions
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM bailing_auditevent WHERE data::text LIKE %s", [f"%{SECRET}%"])
        assert cursor.fetchone()[0] == 0


@pytest.mark.django_db
def test_setting_the_same_secret_is_a_no_op_and_bad_secrets_are_refused():
    provider = make_provider("https://shop.example.com")
    sealed = provider.secret_encrypted
    events = AuditEvent.objects.count()
    assert provider_set_secret(provider=provider, secret=SECRET, actor=ACTOR) is False
    provider.refresh_from_db()
    assert provider.secret_encrypted == sealed
    assert AuditEvent.objects.count() == events
    for bad in ["", "x" * 4097, "tab\there", "\ud800"]:
        with pytest.raises(ValueError):
            provider_set_secret(provider=provider, secret=bad, actor=ACTOR)
    # A secret sealed under an old key is replaced even by the same plaintext.
    with override_settings(SECRET_KEY="rotated-" + "z" * 60):
        assert provider_set_secret(provider=provider, secret=SECRET, actor=ACTOR) is True
        event = AuditEvent.objects.order_by("-id").first()
        assert event.data == {"previous": "unreadable"}
        assert provider_secret_open(provider=provider) == SECRET


# --- One refresh per provider at a time ---------------------------------------------------------------
@contextlib.contextmanager
def _blocked_first_request(secret: str):
    """A signed-only spec server whose first request waits until ``release`` is set."""
    arrived, release = threading.Event(), threading.Event()
    inner = serve_signed(secret, _spec_bytes())

    def respond(seen: Seen):
        if not arrived.is_set():
            arrived.set()
            release.wait(20)
        return inner(seen)

    with spec_server(respond) as server:
        yield server, arrived, release


def _refresh_in_thread(provider_pk: int, outcomes: list) -> threading.Thread:
    def run():
        try:
            outcomes.append(provider_refresh(provider=ToolProvider.objects.get(pk=provider_pk), actor=ACTOR))
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_second_refresh_while_one_is_running_is_refused_without_writes():
    with _blocked_first_request(SECRET) as (server, arrived, release):
        provider = make_provider(server.base_url)
        outcomes: list = []
        thread = _refresh_in_thread(provider.pk, outcomes)
        try:
            assert arrived.wait(10)
            events = AuditEvent.objects.count()
            second = provider_refresh(provider=provider, actor=ACTOR)
            assert (second.status, second.error) == ("failed", "refresh_in_progress")
            provider.refresh_from_db()
            assert provider.last_refresh_status == "never"
            assert AuditEvent.objects.count() == events
        finally:
            release.set()
            thread.join(20)
    assert outcomes[0].ok
    provider.refresh_from_db()
    assert provider.last_refresh_status == "ok"
    # The lock is released: a later refresh runs (and fails only because the server is gone).
    assert provider_refresh(provider=provider, actor=ACTOR).error == "spec_unreachable"


@pytest.mark.django_db(transaction=True)
def test_a_fetch_made_with_outdated_settings_is_not_stored():
    with _blocked_first_request(SECRET) as (server, arrived, release):
        provider = make_provider(server.base_url)
        outcomes: list = []
        thread = _refresh_in_thread(provider.pk, outcomes)
        try:
            assert arrived.wait(10)
            # The operator rotates the secret while the old-secret fetch is in flight.
            provider_set_secret(provider=provider, secret=SECRET + "-rotated", actor=ACTOR)
        finally:
            release.set()
            thread.join(20)
    assert (outcomes[0].status, outcomes[0].error) == ("failed", "provider_changed")
    provider.refresh_from_db()
    assert provider.spec_json is None
    assert not _tools(provider)
    assert provider.last_refresh_error.startswith("provider_changed: ")
    assert provider.access_probe == {}
    assert not AuditEvent.objects.filter(action="agent_runtime.provider.spec_stored").exists()


# --- The demo seed ------------------------------------------------------------------------------------
def _demo_config(tmp_path, base_url: str):
    document = yaml.safe_load(bailing_demo.DEMO_CONFIG.read_text(encoding="utf-8"))
    [provider] = document["tool_providers"]
    assert (provider["name"], provider["secret_file"]) == ("demo-shop", "var/demo-tool-secret")
    assert provider["base_url"] == "http://127.0.0.1:8100"
    provider["base_url"] = base_url
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


@pytest.mark.django_db
def test_the_demo_seed_refreshes_the_demo_shop_and_reports_its_tools(tmp_path, monkeypatch):
    secret, _ = bailing_demo._ensure_private_file(bailing_demo.DEMO_TOOL_SECRET, lambda: "unused-" + SECRET)
    with running_demo_business(secret=secret) as business:
        monkeypatch.setattr(bailing_demo, "DEMO_CONFIG", _demo_config(tmp_path, business.base_url))
        out = io.StringIO()
        call_command("bailing_demo", stdout=out)
    assert (
        "  Demo Shop tools: 6 compiled (0 warnings), spec access probe: protected, authorization probe: pass."
        in out.getvalue()
    )
    assert secret not in out.getvalue()
    provider = ToolProvider.objects.get(name="demo-shop")
    assert set(_tools(provider)) == DEMO_TOOLS
    assert provider_secret_open(provider=provider) == secret


@pytest.mark.django_db
def test_the_demo_seed_survives_a_missing_demo_shop(tmp_path, monkeypatch):
    monkeypatch.setattr(
        bailing_demo, "DEMO_CONFIG", _demo_config(tmp_path, f"http://127.0.0.1:{_free_port()}")
    )
    out = io.StringIO()
    call_command("bailing_demo", stdout=out)
    text = out.getvalue()
    assert "  Demo Shop tools: refresh failed: spec_unreachable (" in text
    assert "bailing_provider_refresh demo-shop" in text
    assert Route.objects.filter(route_key="demo").exists()


@pytest.mark.django_db
def test_a_deferred_instance_is_refreshed_in_full(shop):
    make_provider(shop.base_url)
    deferred = ToolProvider.objects.defer("secret_encrypted", "spec_json", "spec_inline").get(name="shop")
    outcome = provider_refresh(provider=deferred, actor=ACTOR)
    assert outcome.ok and outcome.tools == 6
    assert deferred.last_refresh_status == "ok"


# --- One deadline per request, outbound targets (raw-socket business systems) ---------------------------
def _raw_signed_spec(spec: dict):
    """A raw-server answer: the spec to correctly signed requests, 401 to everything else."""
    body = _spec_bytes(spec)

    def answer(request: RawRequest, peer):
        verified = signing.verify_tool_request(
            secret=SECRET, headers=request.headers, method="GET", path_with_query=request.target, body=b""
        )
        if verified:
            fixed(200, body)(request, peer)
        else:
            fixed(401, b'{"error":"invalid_signature"}')(request, peer)

    return answer


# The provider timeout of these tests, and what "by the deadline" allows for on a loaded machine.
DEADLINE_MS = 1000
MARGIN = 2.0


@pytest.mark.django_db
def test_a_spec_whose_headers_drip_fails_at_the_provider_timeout():
    with raw_http_server(routes({SPEC_PATH: drip_headers()})) as server:
        provider = make_provider(server.base_url, timeout_ms=DEADLINE_MS)
        started = time.monotonic()
        outcome = provider_refresh(provider=provider, actor=ACTOR)
        elapsed = time.monotonic() - started
    assert outcome.error == "spec_timeout"
    assert elapsed < DEADLINE_MS / 1000 + MARGIN
    assert [request.target for request in server.requests] == [SPEC_PATH]


@pytest.mark.parametrize("drip", [drip_headers, drip_body], ids=["headers", "body"])
@pytest.mark.django_db
def test_a_probe_whose_answer_drips_is_inconclusive_at_the_provider_timeout(drip):
    spec = _probed_spec({"path": AUTHZ_PATH})
    with raw_http_server(routes({SPEC_PATH: _raw_signed_spec(spec), AUTHZ_PATH: drip()})) as server:
        provider = make_provider(server.base_url, timeout_ms=DEADLINE_MS)
        started = time.monotonic()
        outcome = provider_refresh(provider=provider, actor=ACTOR)
        elapsed = time.monotonic() - started
    assert outcome.ok, outcome
    assert (outcome.authz_probe["status"], outcome.authz_probe["reason"]) == ("inconclusive", "timeout")
    assert elapsed < DEADLINE_MS / 1000 + MARGIN  # the spec requests answer at once
    assert [request.target for request in server.requests].count(AUTHZ_PATH) == 1


@pytest.mark.django_db
def test_a_provider_name_resolving_to_a_denied_address_fails_without_connecting(
    stand_in_resolver, loopback_only
):
    resolver = stand_in_resolver({"metadata.test": [["169.254.169.254"]]})
    provider = make_provider("https://metadata.test", timeout_ms=DEADLINE_MS)
    outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.error == "target_forbidden"
    assert outcome.probe["reason"] == "target_forbidden"
    provider.refresh_from_db()
    assert provider.last_refresh_error.startswith("target_forbidden: ")
    assert resolver.calls == ["metadata.test"]
    assert loopback_only == []


@pytest.mark.django_db
def test_a_probe_whose_host_now_resolves_to_a_denied_address_is_not_sent(stand_in_resolver, loopback_only):
    spec = _probed_spec({"path": AUTHZ_PATH})
    with raw_http_server(routes({SPEC_PATH: _raw_signed_spec(spec), AUTHZ_PATH: fixed(403)})) as server:
        # The three spec requests connect to loopback; the name then rebinds to link-local.
        resolver = stand_in_resolver({"shop.test": [["127.0.0.1"]] * 3 + [["169.254.169.254"]]})
        provider = make_provider(f"http://shop.test:{server.port}", timeout_ms=DEADLINE_MS)
        outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.ok, outcome
    assert (outcome.authz_probe["status"], outcome.authz_probe["reason"]) == (
        "inconclusive",
        "target_forbidden",
    )
    assert [request.target for request in server.requests] == [SPEC_PATH] * 3
    assert len(resolver.calls) == 4
    assert loopback_only == ["127.0.0.1"] * 3
