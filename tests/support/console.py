"""Console fixtures: role users, a pending hub-consent authorization, and headless Chromium.

Role groups are synced explicitly (``roles_sync``) rather than trusted to exist: it is idempotent,
and a transactional test's flush removes them.
"""

from __future__ import annotations

import http.server
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections
from django.test import Client as HttpClient
from playwright.sync_api import sync_playwright

from agent_client import pkce_pair
from agent_runtime.models import AgentAuthorization
from agent_runtime.services.agent_auth.authorizations import authorization_create
from bailing.roles import roles_sync
from tests.factories import ClientFactory, RouteFactory, UserFactory
from tests.support.threaded_server import serving

PASSWORD = "correct-horse-battery"
CHROMIUM = "/usr/bin/chromium-headless-shell"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Console tests create many users; production-strength PBKDF2 would dominate their run time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def console_roles(db):
    roles_sync()


@pytest.fixture
def administrator(console_roles):
    return UserFactory(username="ada", roles=["administrator"])


@pytest.fixture
def approver(console_roles):
    return UserFactory(username="april", roles=["approver"])


@pytest.fixture
def auditor(console_roles):
    return UserFactory(username="audrey", roles=["auditor"])


@pytest.fixture
def no_role_user(console_roles):
    return UserFactory(username="nobody")


def signed_in(user, *, enforce_csrf_checks: bool = False) -> HttpClient:
    client = HttpClient(enforce_csrf_checks=enforce_csrf_checks)
    client.force_login(user)
    return client


@pytest.fixture
def admin_http(administrator) -> HttpClient:
    return signed_in(administrator)


@dataclass
class PendingLogin:
    authorization: AgentAuthorization
    consent_url: str
    redirect_uri: str
    state: str
    code_verifier: str


@pytest.fixture
def start_hub_login(db):
    """Open a pending agent sign-in the way ``POST /agent-auth/v1/authorizations`` does."""

    def start(*, client=None, routes=("orders",), device_label="Ada's laptop", port=53682) -> PendingLogin:
        if client is None:
            for route in routes:
                RouteFactory(route_key=route)
            client = ClientFactory(app_id="desktop-agent", name="Desktop Agent", allowed_routes=list(routes))
        verifier, challenge = pkce_pair()
        redirect_uri = f"http://127.0.0.1:{port}/callback"
        state = "state-" + verifier[:16]
        authorization, url = authorization_create(
            client_app_id=client.app_id,
            redirect_uri=redirect_uri,
            state=state,
            requested_routes=list(routes),
            device_label=device_label,
            code_challenge=challenge,
            ip="127.0.0.1",
        )
        return PendingLogin(authorization, url, redirect_uri, state, verifier)

    return start


@pytest.fixture
def hub_server(live_server, settings):
    """pytest-django's live server, with the URLs the hub hands out (consent page) pointing at it."""
    settings.BAILING_PUBLIC_URL = live_server.url
    return live_server


# --- headless Chromium (Playwright sync API, Debian's browser; never a downloaded one) ------------------


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium per test session (per xdist worker); each test gets a fresh context.

    Starting Playwright's driver and the browser costs about 1.3 s, so they start once, on the first
    test that asks, and stop at the session's end. The sync Playwright API keeps an event loop
    running in this thread from then on, and Django refuses ORM calls while one runs: async-unsafe
    access is allowed for the rest of the session (no test relies on that refusal). Browser tests
    are collected last (``pytest_collection_modifyitems`` in tests/conftest.py), so in a worker
    nearly every test that runs after the browser started is a browser test itself; tests that run
    their own asyncio loop go through :func:`tests.support.asyncio_run.run_async`, which moves to a
    fresh thread while a loop is running here.
    """
    assert os.path.exists(CHROMIUM), "Debian chromium-headless-shell is required: run scripts/ensure-chromium"
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield browser
    finally:
        browser.close()
        playwright.stop()
        connections.close_all()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(autouse=True)
def _browser_contexts_closed(request):
    """A test that opened contexts of the session browser leaves none behind (the next test starts
    from a browser with no pages, cookies or storage of it)."""
    yield
    if "chromium" in request.fixturenames:
        browser = request.getfixturevalue("chromium")
        for context in list(browser.contexts):
            context.close()


def csp_violations(page) -> list[str]:
    """The Content-Security-Policy violations Chromium reports on ``page`` (it logs each one)."""
    violations: list[str] = []
    page.on(
        "console",
        lambda message: (
            violations.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    return violations


@pytest.fixture
def browser_page(chromium):
    """A page in a fresh context; any Content-Security-Policy violation on it fails the test."""
    context = chromium.new_context(viewport={"width": 1280, "height": 860}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(10_000)
    violations = csp_violations(page)
    yield page
    context.close()
    assert not violations, violations


@pytest.fixture
def screenshot():
    """``screenshot(page, "name")`` saves a full-page PNG under var/screenshots/ (gitignored) when
    ``BAILING_SCREENSHOTS=1`` is set (``make screenshots``): the pictures are for people to look at,
    no test reads them, and taking them (about 117 per run) cost 7 s of CPU and 12 s of a worker's
    wall time in every ``make test``."""
    wanted = os.environ.get("BAILING_SCREENSHOTS") == "1"
    if wanted:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        if wanted:
            page.screenshot(path=str(path), full_page=True)
        return path

    return take


class _Callback(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"signed in"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def loopback_callback():
    """An OAuth client's loopback redirect listener, as a native MCP client runs one: a real HTTP server
    on a free loopback port answering every GET with 200. Yields its ``http://localhost:<port>/callback``
    (the browser follows the hub's redirect to it; Chromium's headless shell does not let a route
    stand in for the target of a redirect)."""
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Callback)) as server:
        yield f"http://localhost:{server.server_address[1]}/callback"
