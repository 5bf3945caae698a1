"""A reference Agent Auth v1 client, written from the wire behaviour of BailingHub's agent SDK.

Also a small command line for trying the hub by hand::

    python -m agent_client login --hub http://127.0.0.1:8000 --client demo-agent --workspace demo

opens the consent page, waits for the loopback redirect, exchanges the code and prints the
workspace profile; ``--save FILE`` (opt-in) writes the tokens to a 0600 file. With it::

    RUN=$(python -m agent_client turn --tokens FILE --workspace demo "Where is my order?")
    python -m agent_client invoke --tokens FILE --workspace demo --run $RUN list_orders '{}'

start a conversation turn and make a governed call in it (the README's "Demo walk-through" has the
whole sequence: approvals, resume, receipts).

It does what a local agent host does (docs/protocol.md "Agent sign-in and consent"): pick a random
``state`` and a PKCE verifier, listen on a random loopback port, create the authorization, wait for
the browser to land on the listener, check ``state``, exchange the code, then call ``/session``,
rotate and revoke tokens. It talks real HTTP (httpx) to a running hub, so tests can drive the whole
flow against pytest-django's ``live_server``; the test plays the consent page (business backend or
hub console) and the browser.

Usage::

    agent = ReferenceAgentClient(live_server.url, "my-client", ["orders"])
    url = agent.start_login()              # POST /authorizations; returns the consent page URL
    ...                                    # approve, then the "browser" visits the redirect URI
    agent.wait_for_redirect()              # what the listener received (code or error, state)
    agent.exchange()                       # POST /token (authorization_code)
    agent.session_info(); agent.refresh(); agent.revoke()
    agent.close()

Every call made with the access token goes through :meth:`ReferenceAgentClient._authed`: a 401
``unauthorized`` (the hub refused the bearer before running anything) is answered by one refresh with
the saved refresh token and one retry; a refused refresh (``invalid_grant``: the session was revoked,
expired, or its refresh token replayed) raises :class:`SessionGone`. With a :class:`TokenFile` the
rotated pair is written back at once (temp file + rename, mode 0600) under a lock, so two commands
sharing one file never present the same refresh token twice (which would revoke the session). Nothing
else is ever retried: a business call whose answer was lost stays unknown (resume it by its id).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import secrets
import shlex
import tempfile
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx


class AgentAuthError(Exception):
    """A hub answer other than the expected status; ``code`` is the envelope's ``error``."""

    def __init__(self, status: int, code: str | None, body: Any = None):
        super().__init__(f"HTTP {status} {code}")
        self.status = status
        self.code = code
        self.body = body


class SessionGone(Exception):
    """The session behind the saved tokens cannot be used any more: sign in again.

    ``reason`` is what the hub answered (``invalid_grant`` for a revoked or expired session or a
    replayed refresh token, ``unauthorized`` when even a fresh access token was refused) or
    ``no_refresh_token`` when nothing was saved to refresh with.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class TokenFileError(Exception):
    """The token file is missing, unreadable or not what ``login --save`` writes."""


# A 401 with this code means the bearer was refused (missing, unknown, expired, revoked session,
# disabled client): the hub authenticates before it runs anything, so the request did not happen.
BEARER_REFUSED = "unauthorized"


class TokenFile:
    """The tokens ``login --save`` writes: ``{hub, client_app_id, access_token, refresh_token,
    session_id, ...}``. Rewrites are atomic (a 0600 temp file in the same directory, then rename) and
    refreshes hold an exclusive lock on ``FILE.lock`` (where ``fcntl`` exists)."""

    REQUIRED = ("hub", "client_app_id", "access_token")

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)

    def read(self) -> dict:
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            raise TokenFileError(f"no token file at {self.path}") from None
        except (OSError, ValueError) as exc:
            raise TokenFileError(f"cannot read the token file {self.path}: {type(exc).__name__}") from None
        missing = [key for key in self.REQUIRED if not isinstance(data, dict) or not data.get(key)]
        if missing:
            raise TokenFileError(f"the token file {self.path} lacks {', '.join(missing)}")
        return data

    def write(self, data: dict) -> None:
        write_token_file(self.path, data)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        try:
            import fcntl
        except ImportError:  # not POSIX: no cross-process lock, the rename is still atomic
            yield
            return
        fd = os.open(self.path + ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock


def write_token_file(path: str | os.PathLike, data: dict) -> None:
    """Write ``data`` as JSON to ``path`` atomically with mode 0600: readers see the old file or the
    new one, never half of one, and the secret is never readable by others, not even for a moment."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".agent-tokens-", suffix=".tmp", dir=directory)  # 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


class AuthorizationDenied(Exception):
    """The consent page sent the browser back with ``error=…`` instead of a code."""

    def __init__(self, error: str):
        super().__init__(error)
        self.error = error


def pkce_pair() -> tuple[str, str]:
    """A fresh (verifier, S256 challenge), as BailingHub's agent SDK makes them (64 random bytes)."""
    verifier = base64.urlsafe_b64encode(secrets.token_bytes(64)).rstrip(b"=").decode("ascii")
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def browser_visit(url: str) -> httpx.Response:
    """What the user's browser does with a redirect URI: a plain GET, no redirects followed."""
    with httpx.Client(trust_env=False, timeout=10) as browser:
        return browser.get(url)


class LoopbackListener:
    """One-shot ``http://127.0.0.1:<random port>/callback`` receiver.

    A request whose ``state`` differs from the expected one is answered 400 and ignored (a stray or
    forged redirect must not end the login); the first matching request settles the result and
    any later one gets 409.
    """

    def __init__(self, expected_state: str):
        self.expected_state = expected_state
        self.params: dict[str, str] | None = None
        self._settled = threading.Event()
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                parts = urlsplit(self.path)
                if parts.path != "/callback":
                    self._reply(404, "Not found.")
                    return
                query = {key: values[0] for key, values in parse_qs(parts.query).items()}
                if query.get("state") != listener.expected_state:
                    self._reply(400, "Invalid authorization state.")
                    return
                if listener._settled.is_set():
                    self._reply(409, "Already completed.")
                    return
                listener.params = query
                listener._settled.set()
                if "error" in query:
                    self._reply(403, "Authorization was not approved. You can close this window.")
                else:
                    self._reply(200, "Authorization completed. You can close this window.")

            def _reply(self, status: int, text: str) -> None:
                body = text.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # Looks for the stop every 20 ms (serve_forever's default is 0.5 s, a pause after every sign-in).
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="agent-loopback",
            daemon=True,
        )
        self._thread.start()

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/callback"

    def wait(self, timeout: float) -> dict[str, str]:
        if not self._settled.wait(timeout):
            raise TimeoutError("no authorization redirect reached the loopback listener")
        return dict(self.params or {})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class ReferenceAgentClient:
    """One local agent connection: a client app id, the workspaces it asks for, its tokens."""

    def __init__(
        self,
        base_url: str,
        client_app_id: str,
        routes: list[str],
        *,
        device_label: str = "pytest reference agent",
        timeout: float = 10.0,
        token_file: TokenFile | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.client_app_id = client_app_id
        self.routes = list(routes)
        self.device_label = device_label
        self.http = httpx.Client(base_url=self.base_url, trust_env=False, timeout=timeout)
        self.listener: LoopbackListener | None = None
        self.state: str | None = None
        self.code_verifier: str | None = None
        self.authorization_id: str | None = None
        self.authorization_url: str | None = None
        self.code: str | None = None
        self.access_token: str | None = None
        self.refresh_token: str | None = None
        self.session_id: str | None = None
        self.last_token_response: dict | None = None
        # Where rotated tokens are written back (None: kept in memory only).
        self.token_file = token_file
        self.refreshes = 0

    @classmethod
    def from_token_file(cls, token_file: TokenFile, routes: list[str] | None = None, **kwargs):
        """A client resuming the session saved in ``token_file`` (raises :class:`TokenFileError`)."""
        saved = token_file.read()
        agent = cls(saved["hub"], saved["client_app_id"], list(routes or []), token_file=token_file, **kwargs)
        agent.access_token = saved["access_token"]
        agent.refresh_token = saved.get("refresh_token")
        agent.session_id = saved.get("session_id")
        return agent

    # -- plumbing --------------------------------------------------------------------------------------

    def _call(
        self, method: str, path: str, *, expect: int, json: Any = None, bearer: str | None = None
    ) -> Any:
        headers = {"Accept": "application/json"}
        if bearer:
            headers["Authorization"] = f"Bearer {bearer}"
        response = self.http.request(method, path, json=json, headers=headers)
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code != expect:
            code = body.get("error") if isinstance(body, dict) else None
            raise AgentAuthError(response.status_code, code, body)
        return body

    def _authed(self, method: str, path: str, *, expect: int, json: Any = None) -> Any:
        """A call with the access token. A 401 ``unauthorized`` means the hub refused the bearer
        before running anything, so — and only then — the session is refreshed once and the call
        sent once more. Any other failure (a lost answer included) is raised as it is."""
        try:
            return self._call(method, path, expect=expect, json=json, bearer=self.access_token)
        except AgentAuthError as exc:
            if exc.status != 401 or exc.code != BEARER_REFUSED:
                raise
        self.refresh_session()
        try:
            return self._call(method, path, expect=expect, json=json, bearer=self.access_token)
        except AgentAuthError as exc:
            if exc.status == 401 and exc.code == BEARER_REFUSED:
                raise SessionGone(BEARER_REFUSED) from None
            raise

    def refresh_session(self) -> None:
        """Get a new access token with the refresh token (rotating it), or raise :class:`SessionGone`.

        With a token file: under its lock, a pair another process already rotated is taken from the
        file instead of presenting our (now used) refresh token again, and a fresh pair is written
        back before the lock is released."""
        if self.token_file is None:
            self._refresh_or_gone()
            return
        with self.token_file.locked():
            try:
                saved = self.token_file.read()
            except TokenFileError:
                saved = {}
            newer = saved.get("refresh_token")
            if newer and newer != self.refresh_token and saved.get("session_id") == self.session_id:
                self.access_token = saved["access_token"]
                self.refresh_token = newer
                return
            self._refresh_or_gone()
            base = saved or {"hub": self.base_url, "client_app_id": self.client_app_id}
            self.token_file.write({**base, **(self.last_token_response or {})})

    def _refresh_or_gone(self) -> None:
        if not self.refresh_token:
            raise SessionGone("no_refresh_token")
        try:
            self.refresh()
        except AgentAuthError as exc:
            if exc.status == 400 and exc.code == "invalid_grant":
                raise SessionGone("invalid_grant") from None
            raise
        self.refreshes += 1

    @property
    def redirect_uri(self) -> str:
        assert self.listener is not None, "start_login() first"
        return self.listener.redirect_uri

    # -- login -----------------------------------------------------------------------------------------

    def start_login(self) -> str:
        """Open the listener and create the authorization; returns the consent page URL."""
        self.state = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")
        self.code_verifier, challenge = pkce_pair()
        if self.listener is not None:
            self.listener.close()
        self.listener = LoopbackListener(self.state)
        body = self._call(
            "POST",
            "/agent-auth/v1/authorizations",
            expect=201,
            json={
                "client_app_id": self.client_app_id,
                "redirect_uri": self.listener.redirect_uri,
                "state": self.state,
                "requested_routes": self.routes,
                "device_label": self.device_label,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            },
        )
        self.authorization_id = body["authorization_id"]
        self.authorization_url = body["authorization_url"]
        return self.authorization_url

    def wait_for_redirect(self, timeout: float = 10.0) -> dict[str, str]:
        """Block until the browser reached the listener; return the query it carried.

        Raises :class:`AuthorizationDenied` when the consent page sent an ``error`` back.
        """
        assert self.listener is not None, "start_login() first"
        params = self.listener.wait(timeout)
        if params.get("state") != self.state:
            raise AssertionError("the listener accepted a redirect with a foreign state")
        if "error" in params:
            raise AuthorizationDenied(params["error"])
        self.code = params["code"]
        return params

    def exchange(self) -> dict:
        """Exchange the received code (with the PKCE verifier) for the first token pair."""
        assert self.code is not None, "wait_for_redirect() first"
        body = self._call(
            "POST",
            "/agent-auth/v1/token",
            expect=200,
            json={
                "grant_type": "authorization_code",
                "client_app_id": self.client_app_id,
                "code": self.code,
                "redirect_uri": self.redirect_uri,
                "code_verifier": self.code_verifier,
            },
        )
        if body.get("token_type") != "Bearer" or body.get("client_app_id") != self.client_app_id:
            raise AssertionError("unexpected token response")
        self._store(body)
        return body

    # -- session ---------------------------------------------------------------------------------------

    def _store(self, body: dict) -> None:
        self.last_token_response = body
        self.access_token = body["access_token"]
        self.refresh_token = body["refresh_token"]
        self.session_id = body["session_id"]

    def refresh(self) -> dict:
        """Rotate the refresh token; the previous access and refresh tokens are dropped."""
        body = self._call(
            "POST",
            "/agent-auth/v1/token",
            expect=200,
            json={
                "grant_type": "refresh_token",
                "client_app_id": self.client_app_id,
                "refresh_token": self.refresh_token,
            },
        )
        if self.session_id is not None and body.get("session_id") != self.session_id:
            raise AssertionError("refresh returned another session")
        self._store(body)
        return body

    def session_info(self, access_token: str | None = None) -> dict:
        if access_token is not None:
            return self._call("GET", "/agent-auth/v1/session", expect=200, bearer=access_token)
        return self._authed("GET", "/agent-auth/v1/session", expect=200)

    def revoke(self, *, with_bearer: bool = True) -> dict:
        """Log out: the SDK sends the refresh token in the body, and the access token when it has one."""
        return self._call(
            "POST",
            "/agent-auth/v1/revoke",
            expect=200,
            json={"client_app_id": self.client_app_id, "refresh_token": self.refresh_token},
            bearer=self.access_token if with_bearer else None,
        )

    # -- knowledge (bailing.agent-knowledge.v1) ------------------------------------------------------
    # What a host's two knowledge tools call: search returns hints (reference-only provenance), read
    # follows next_cursor with the same run and the original reference until the chain ends.

    def knowledge_search(
        self, route: str, query: str, *, limit: int | None = None, run_id: str | None = None
    ) -> dict:
        body: dict[str, Any] = {"query": query}
        if limit is not None:
            body["limit"] = limit
        if run_id is not None:
            body["run_id"] = run_id
        result = self._authed(
            "POST", f"/agent-api/v1/workspaces/{route}/knowledge/search", expect=200, json=body
        )
        if result.get("schema_version") != "bailing.agent-knowledge-search.v1":
            raise AssertionError("unknown knowledge search schema")  # never pretend success
        return result

    def knowledge_read(
        self, route: str, ref: str, *, run_id: str | None = None, max_bytes: int | None = None
    ) -> tuple[str, list[dict]]:
        """Read a referenced document page by page; return the text and every page's response.

        The last page says whether the chain stopped at the 128 KiB budget (``budget_exhausted``).
        """
        pages: list[dict] = []
        cursor: str | None = None
        while True:
            body: dict[str, Any] = {"ref": ref}
            for key, value in (("run_id", run_id), ("cursor", cursor), ("max_bytes", max_bytes)):
                if value is not None:
                    body[key] = value
            page = self._authed(
                "POST", f"/agent-api/v1/workspaces/{route}/knowledge/read", expect=200, json=body
            )
            if page.get("schema_version") != "bailing.agent-knowledge-read.v1":
                raise AssertionError("unknown knowledge read schema")
            pages.append(page)
            cursor = page["next_cursor"]
            if cursor is None:
                return "".join(p["content"] for p in pages), pages

    # -- conversation turns (bailing.agent-turn-context.v1) ------------------------------------------
    # A turn freezes what the hub tells the agent for one user message (instructions, memory,
    # knowledge, active tools) under a run id; the calls the agent makes for that message name the run
    # (``agent_run_id``), which is how the console links a conversation turn to its tool calls.

    def turn(
        self,
        route: str,
        user_input: str,
        *,
        conversation_id: str,
        turn_id: str,
        message_id: str,
        page_context: dict[str, Any] | None = None,
        renderers: list[str] | None = None,
        knowledge_delivery: str | None = None,
    ) -> dict:
        """Prepare (or, with the same ids and payload, replay) one turn; returns the frozen context."""
        body: dict[str, Any] = {
            "client_conversation_id": conversation_id,
            "client_turn_id": turn_id,
            "user_message_id": message_id,
            "user_input": user_input,
        }
        for key, value in (
            ("page_context", page_context),
            ("renderers", renderers),
            ("knowledge_delivery", knowledge_delivery),
        ):
            if value is not None:
                body[key] = value
        result = self._authed("POST", f"/agent-api/v1/workspaces/{route}/turns", expect=200, json=body)
        if not isinstance(result, dict) or result.get("schema_version") != "bailing.agent-turn-context.v1":
            raise AssertionError("unknown turn context schema")  # never pretend success
        return result

    # -- governed tool invocations (bailing.agent-tool-invocation.v1) --------------------------------
    # An invocation id names one call forever: a host keeps it and resumes the same call (after an
    # approval, or when the outcome was not learnt) instead of sending a replacement write.

    def capability_revision(self, route: str) -> str:
        profile = self._authed("GET", f"/agent-api/v1/workspaces/{route}/bootstrap", expect=200)
        return profile["capabilities"]["revision"]

    def invoke(
        self,
        route: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        capability_revision: str | None = None,
        invocation_id: str | None = None,
        run_id: str | None = None,
    ) -> dict:
        """Call ``tool`` once; the result says ``executed``, ``awaiting_approval``, … (never raises for
        a result state; HTTP errors raise :class:`AgentAuthError` with the error code)."""
        body: dict[str, Any] = {
            "invocation_id": invocation_id or secrets.token_hex(32),
            "route": route,
            "tool": tool,
            "arguments": arguments,
            "capability_revision": capability_revision or self.capability_revision(route),
        }
        if run_id is not None:
            body["agent_run_id"] = run_id
        return self._invocation_result(
            self._authed("POST", "/agent-api/v1/tool-invocations", expect=200, json=body)
        )

    def resume(self, invocation_id: str) -> dict:
        return self._invocation_result(
            self._authed(
                "POST", f"/agent-api/v1/tool-invocations/{invocation_id}/resume", expect=200, json={}
            )
        )

    def receipt(self, invocation_id: str) -> dict:
        """The read-only receipt; refuses a hub that does not advertise the inspection contract."""
        capabilities = self._authed(
            "GET", "/agent-api/v1/tool-invocations/inspection-capabilities", expect=200
        )
        if capabilities.get(
            "receipt_schema"
        ) != "bailing.agent-invocation-receipt.v1" or not capabilities.get("read_only"):
            raise AssertionError("the hub does not offer read-only invocation receipts")
        receipt = self._authed("GET", f"/agent-api/v1/tool-invocations/{invocation_id}/receipt", expect=200)
        if receipt.get("schema_version") != "bailing.agent-invocation-receipt.v1":
            raise AssertionError("unknown receipt schema")
        return receipt

    @staticmethod
    def _invocation_result(result: Any) -> dict:
        if not isinstance(result, dict) or result.get("schema_version") != "bailing.agent-tool-invocation.v1":
            raise AssertionError("unknown invocation result schema")  # never pretend success
        return result

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        self.http.close()

    def __enter__(self) -> ReferenceAgentClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _print_json(label: str, value: Any) -> None:
    print(f"--- {label}")
    print(json.dumps(value, indent=2, ensure_ascii=False))


# Exit statuses of the command line: 0 done, 1 the hub refused or could not be reached, 2 bad usage
# or an unreadable token file, 3 the saved session has ended (sign in again).
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_SIGN_IN_AGAIN = 3

PROG = "python -m agent_client"


_INVOCATION_ID_RE = re.compile(r"[0-9a-f]{64}")
_CLIENT_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


def _invocation_id(value: str) -> str:
    """64 lowercase hex digits, as the hub requires (an empty shell variable is caught here)."""
    import argparse

    if not _INVOCATION_ID_RE.fullmatch(value):
        raise argparse.ArgumentTypeError(f"not an invocation id (64 lowercase hex digits): {value!r}")
    return value


def _run_id(value: str) -> str:
    import argparse

    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a run id (the UUID turn prints): {value!r}") from None


def _client_id(value: str) -> str:
    import argparse

    if not _CLIENT_ID_RE.fullmatch(value):
        raise argparse.ArgumentTypeError(f"ids are letters, digits and _.:- (at most 128): {value!r}")
    return value


def new_client_id(prefix: str) -> str:
    """A fresh conversation, turn or message id of the reference client (``cli-conv-…``)."""
    return f"cli-{prefix}-{secrets.token_hex(6)}"


def build_parser():
    """The command line's argument parser (every argument described: tests/test_help_texts.py)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog=PROG,
        description=main.__doc__,
        epilog="Exit status: 0 done, 1 the hub refused the request or could not be reached, 2 bad usage "
        "or an unreadable token file, 3 the saved session has ended (sign in again with login --save).",
    )
    sub = parser.add_subparsers(dest="command", required=True, help="what to do")
    login = sub.add_parser("login", help="sign an agent in through the browser")
    login.add_argument("--hub", required=True, help="hub base URL, e.g. http://127.0.0.1:8000")
    login.add_argument("--client", required=True, help="client app_id, e.g. demo-agent")
    login.add_argument("--workspace", required=True, help="workspace (route key), e.g. demo")
    login.add_argument("--device", default="reference agent client", help="device label shown on consent")
    login.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the browser")
    login.add_argument("--no-browser", action="store_true", help="print the URL instead of opening it")
    login.add_argument("--save", metavar="FILE", help="write the tokens to FILE (mode 0600)")
    tokens_help = "tokens saved by login --save (rewritten when the access token is refreshed)"
    turn = sub.add_parser(
        "turn",
        help="start a conversation turn; prints its run id on stdout (for invoke --run), a summary on stderr",
    )
    turn.add_argument("--tokens", required=True, metavar="FILE", help=tokens_help)
    turn.add_argument("--workspace", required=True, help="workspace (route key)")
    turn.add_argument(
        "--conversation",
        type=_client_id,
        metavar="ID",
        help="your conversation id (default: a new one); the same id again continues that conversation",
    )
    turn.add_argument("--turn", type=_client_id, metavar="ID", help="your turn id (default: a new one)")
    turn.add_argument(
        "--message", type=_client_id, metavar="ID", help="the user message's id (default: a new one)"
    )
    turn.add_argument("--json", action="store_true", help="print the whole frozen context instead of the id")
    turn.add_argument("user_input", help="what the user said in this turn")
    invoke = sub.add_parser("invoke", help="call a workspace tool through the hub (governed)")
    invoke.add_argument("--tokens", required=True, metavar="FILE", help=tokens_help)
    invoke.add_argument("--workspace", required=True, help="workspace (route key)")
    invoke.add_argument(
        "--id", type=_invocation_id, metavar="HEX64", help="invocation id (default: a new random one)"
    )
    invoke.add_argument(
        "--run",
        type=_run_id,
        metavar="RUN_ID",
        help="the run id printed by turn: the call is made in that turn (and listed with it)",
    )
    invoke.add_argument("tool", help="tool name, e.g. list_orders")
    invoke.add_argument("arguments", nargs="?", default="{}", help="arguments as a JSON object")
    workspace_help = "accepted so every command takes the same options; the call keeps its own workspace"
    resume = sub.add_parser("resume", help="resume an invocation (after an approval)")
    resume.add_argument("--tokens", required=True, metavar="FILE", help=tokens_help)
    resume.add_argument("--workspace", help=workspace_help)
    resume.add_argument("invocation_id", type=_invocation_id, help="the invocation id printed by invoke")
    receipt = sub.add_parser("receipt", help="read an invocation's receipt (read-only)")
    receipt.add_argument("--tokens", required=True, metavar="FILE", help=tokens_help)
    receipt.add_argument("--workspace", help=workspace_help)
    receipt.add_argument("invocation_id", type=_invocation_id, help="the invocation id printed by invoke")
    sub.add_parser(
        "new-id",
        help="print a fresh invocation id (64 hex digits) to give invoke --id, and resume the call by it",
    )
    knowledge = sub.add_parser("knowledge", help="search a workspace's knowledge and read the best hit")
    knowledge.add_argument("--tokens", required=True, metavar="FILE", help=tokens_help)
    knowledge.add_argument("--workspace", required=True, help="workspace (route key)")
    knowledge.add_argument("query", help="what to search for")
    check = sub.add_parser(
        "mcp-check", help="sign in to a workspace's MCP endpoint as a generic MCP client and try it"
    )
    check.add_argument("--url", help="the MCP endpoint, e.g. http://127.0.0.1:8000/mcp/demo")
    check.add_argument("--tokens", metavar="FILE", help="use tokens saved by login --save instead of OAuth")
    check.add_argument("--workspace", help="with --tokens and no --url: the workspace (route key)")
    check.add_argument("--query", default="How long does a refund take?", help="what to ask the knowledge")
    check.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the browser")
    check.add_argument("--no-browser", action="store_true", help="print the URL instead of opening it")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``login``: sign in through the browser, then show the workspaces and the bootstrap profile.
    ``knowledge``: with tokens saved by ``login --save``, search a workspace's knowledge and read the
    best hit. ``turn``: start a conversation turn (its run id on stdout, for ``invoke --run``).
    ``invoke`` / ``resume`` / ``receipt``: call a workspace tool through the hub's governed path,
    continue it after an approval, read its receipt; ``new-id`` prints an invocation id to call and
    resume by. ``mcp-check``: sign in to a workspace's MCP endpoint knowing only its URL (standard
    OAuth) and try its knowledge tools. Commands that use saved tokens refresh an expired access
    token themselves and save the rotated pair."""
    args = build_parser().parse_args(argv)
    if args.command == "new-id":
        print(secrets.token_hex(32))
        return 0
    if args.command == "mcp-check":
        return _mcp_check_command(args)
    if args.command == "knowledge":
        return _with_saved_session(args, _knowledge_command)
    if args.command == "turn":
        return _with_saved_session(args, _turn_command)
    if args.command in ("invoke", "resume", "receipt"):
        return _with_saved_session(args, _invocation_command)
    return _login_command(args)


def _login_command(args: Any) -> int:
    import webbrowser

    agent = ReferenceAgentClient(args.hub, args.client, [args.workspace], device_label=args.device)
    try:
        url = agent.start_login()
        print(f"Open this page to approve the sign-in:\n  {url}")
        if not args.no_browser:
            webbrowser.open(url)
        agent.wait_for_redirect(timeout=args.timeout)
        tokens = agent.exchange()
        print(f"Signed in: session {tokens['session_id']}")
        access = tokens["access_token"]
        headers = {"Authorization": f"Bearer {access}"}
        workspaces = agent.http.get("/agent-api/v1/workspaces", headers=headers).json()
        _print_json("GET /agent-api/v1/workspaces", workspaces)
        profile = agent.http.get(f"/agent-api/v1/workspaces/{args.workspace}/bootstrap", headers=headers)
        _print_json(f"GET /agent-api/v1/workspaces/{args.workspace}/bootstrap", profile.json())
        if args.save:
            write_token_file(args.save, {"hub": args.hub, "client_app_id": args.client, **tokens})
            print(f"Tokens written to {args.save} (mode 0600).")
    except (AgentAuthError, AuthorizationDenied, TimeoutError) as exc:
        print(f"sign-in failed: {exc}")
        return EXIT_FAILED
    except httpx.TransportError as exc:
        print(f"sign-in failed: cannot reach the hub at {args.hub} ({type(exc).__name__})")
        return EXIT_FAILED
    finally:
        agent.close()
    return 0


def sign_in_again_message(reason: str, path: str, hub: str | None = None, client: str | None = None) -> str:
    """One line telling the user the saved session has ended and how to start a new one."""
    why = {
        "invalid_grant": "the hub refused its refresh token (session revoked, expired or replayed)",
        "unauthorized": "the hub refused even a freshly refreshed access token",
        "no_refresh_token": "the access token was refused and the file holds no refresh token",
    }.get(reason, reason)
    login = f"{PROG} login --hub {hub or 'URL'} --client {client or 'APP_ID'} --workspace ROUTE --save {path}"
    return f"agent_client: the saved session in {path} has ended: {why}. Sign in again: {login}"


def _with_saved_session(args: Any, command) -> int:
    """Run ``command(args, agent)`` with the session saved in ``args.tokens``; a session that has
    ended, an unreadable file or an unreachable hub is one clear line on stderr, never a traceback."""
    import sys

    token_file = TokenFile(args.tokens)
    try:
        agent = ReferenceAgentClient.from_token_file(
            token_file, [args.workspace] if getattr(args, "workspace", None) else []
        )
    except TokenFileError as exc:
        print(f"agent_client: {exc}; sign in with: {PROG} login ... --save {args.tokens}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return command(args, agent)
    except SessionGone as exc:
        print(
            sign_in_again_message(exc.reason, args.tokens, agent.base_url, agent.client_app_id),
            file=sys.stderr,
        )
        return EXIT_SIGN_IN_AGAIN
    except httpx.TransportError as exc:
        print(
            f"agent_client: cannot reach the hub at {agent.base_url} ({type(exc).__name__})", file=sys.stderr
        )
        return EXIT_FAILED
    finally:
        agent.close()


def _mcp_check_command(args: Any) -> int:
    """``mcp-check``: with ``--tokens``, the saved session is checked first (``GET /session``,
    refreshed like every other command's) and its access token handed to the MCP client."""
    from agent_client.mcp_check import run

    if not args.tokens:
        return run(args)
    if args.url is None and not args.workspace:
        print("mcp-check: give --url, or --workspace with --tokens")
        return EXIT_USAGE

    def checked(args: Any, agent: ReferenceAgentClient) -> int:
        try:
            agent.session_info()
        except AgentAuthError as exc:
            print(f"mcp-check failed: {exc}")
            return EXIT_FAILED
        return run(args, bearer=agent.access_token, hub=agent.base_url)

    return _with_saved_session(args, checked)


def _knowledge_command(args: Any, agent: ReferenceAgentClient) -> int:
    try:
        result = agent.knowledge_search(args.workspace, args.query)
        _print_json("POST knowledge/search", result)
        if result["hints"]:
            text, pages = agent.knowledge_read(args.workspace, result["hints"][0]["ref"])
            last = pages[-1]
            print(
                f"--- read {result['hints'][0]['title']!r}: {len(pages)} page(s), "
                f"{len(text.encode())} of {last['total_content_bytes']} bytes"
                f"{' (chain budget exhausted)' if last['budget_exhausted'] else ''}"
            )
            print(text)
    except AgentAuthError as exc:
        print(f"knowledge request failed: {exc}")
        return EXIT_FAILED
    return 0


def command_prefix() -> str:
    """How to run this client again, as this process was run: ``.venv/bin/python -m agent_client``
    from the checkout (the interpreter relative to the working directory when it is inside it)."""
    import sys

    interpreter = sys.executable or "python"
    relative = os.path.relpath(interpreter)
    if not relative.startswith(".."):
        interpreter = relative
    return f"{shlex.quote(interpreter)} -m agent_client"


def resume_command(args: Any, invocation_id: str) -> str:
    """The ``resume`` command line for this call, with the token file and workspace it was given,
    quoted for a POSIX shell: pasted as it is, it continues the same call."""
    words = ["resume", "--tokens", args.tokens]
    if getattr(args, "workspace", None):
        words += ["--workspace", args.workspace]
    return " ".join([command_prefix(), *(shlex.quote(word) for word in words), invocation_id])


def _turn_command(args: Any, agent: ReferenceAgentClient) -> int:
    """``turn``: the run id alone on stdout (so ``RUN=$(… turn …)`` keeps it), what was frozen on
    stderr; ``--json`` prints the whole context on stdout instead. Errors go to stderr."""
    import sys

    conversation = args.conversation or new_client_id("conv")
    turn_id = args.turn or new_client_id("turn")
    try:
        context = agent.turn(
            args.workspace,
            args.user_input,
            conversation_id=conversation,
            turn_id=turn_id,
            message_id=args.message or new_client_id("msg"),
        )
    except AgentAuthError as exc:
        print(f"turn request failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    run_id = context["run_id"]
    frozen = context.get("context") or {}
    tools = [tool.get("name", "") for tool in context.get("active_tools") or []]
    knowledge = len(frozen.get("knowledge") or [])
    memory = len((frozen.get("memory") or {}).get("recent") or [])
    invoke = (
        f"{command_prefix()} invoke --tokens {shlex.quote(args.tokens)} "
        f"--workspace {shlex.quote(args.workspace)} --run {run_id} TOOL '{{...}}'"
    )
    print(
        f"Turn ready: run {run_id}, conversation {conversation}, turn {turn_id}, "
        f"workspace {args.workspace}.\n"
        f"  Frozen for the agent: {len(tools)} active tool(s) ({', '.join(tools) or 'none'}), "
        f"{knowledge} knowledge excerpt(s), {memory} earlier message(s).\n"
        f"  Make calls in this turn with: {invoke}",
        file=sys.stderr,
    )
    if args.json:
        print(json.dumps(context, indent=2, ensure_ascii=False))
    else:
        print(run_id)
    return 0


def _invocation_command(args: Any, agent: ReferenceAgentClient) -> int:
    import sys

    try:
        if args.command == "invoke":
            try:
                arguments = json.loads(args.arguments)
            except ValueError:
                arguments = None
            if not isinstance(arguments, dict):
                print("arguments must be a JSON object")
                return EXIT_USAGE
            revision = agent.capability_revision(args.workspace)
            invocation_id = args.id or secrets.token_hex(32)
            try:
                result = agent.invoke(
                    args.workspace,
                    args.tool,
                    arguments,
                    capability_revision=revision,
                    invocation_id=invocation_id,
                    run_id=args.run,
                )
            except httpx.TransportError as exc:
                # The call may have run: never send it again as a new call; resume this id instead.
                print(
                    f"agent_client: no answer from the hub ({type(exc).__name__}); the outcome of invocation "
                    f"{invocation_id} is unknown. Continue it with: {resume_command(args, invocation_id)}",
                    file=sys.stderr,
                )
                return EXIT_FAILED
            _print_json(f"POST /agent-api/v1/tool-invocations ({args.tool})", result)
            if result["state"] in ("awaiting_approval", "reconciliation_required", "in_progress"):
                print(f"Resume later with: {resume_command(args, result['invocation_id'])}")
        elif args.command == "resume":
            _print_json("POST …/resume", agent.resume(args.invocation_id))
        else:
            _print_json("GET …/receipt", agent.receipt(args.invocation_id))
    except AgentAuthError as exc:
        print(f"invocation request failed: {exc}")
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
