"""``python -m agent_client mcp-check``: the hub's MCP endpoint as a generic MCP client sees it.

Uses the official MCP SDK (``mcp`` on PyPI) and nothing of the hub: given only the endpoint URL it
signs in the standard way — OAuth protected-resource discovery, dynamic client registration, the
authorization code flow with PKCE in the browser (the hub's consent page), the code exchange — or,
with ``--tokens``, reuses an Agent Auth v1 bearer saved by ``login --save``. Then it lists the tools
and runs ``search_knowledge`` and ``ask_knowledge`` once, printing what an agent would read. Exit
status 0 means every step answered as the protocol says; anything else is reported and is 1.
"""

from __future__ import annotations

import asyncio
import threading
import webbrowser
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

_PAGE = b"<!doctype html><title>Signed in</title><p>The MCP client is signed in. You can close this tab.</p>"


class MemoryTokenStorage:
    """Tokens and the client registration for this run only (the SDK's ``TokenStorage``)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class LoopbackCallback:
    """A one-shot ``http://127.0.0.1:<port>/callback`` listener for the authorization redirect."""

    def __init__(self) -> None:
        self.result: dict[str, str] = {}
        self.done = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                parts = urlsplit(self.path)
                if parts.path != "/callback":
                    self.send_error(404)
                    return
                query = {key: values[0] for key, values in parse_qs(parts.query).items()}
                outer.result = query
                outer.done.set()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write(_PAGE)

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.redirect_uri = f"http://127.0.0.1:{self.server.server_address[1]}/callback"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    async def wait(self, timeout: float) -> AuthorizationCodeResult:
        if not await asyncio.to_thread(self.done.wait, timeout):
            raise TimeoutError("no authorization redirect arrived in time")
        if "error" in self.result:
            raise PermissionError(f"the sign-in was refused: {self.result['error']}")
        # iss (RFC 9207) goes on to the SDK, which checks it against the server's issuer.
        return AuthorizationCodeResult(
            code=self.result.get("code", ""), state=self.result.get("state"), iss=self.result.get("iss")
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def oauth_provider(
    url: str,
    callback: LoopbackCallback,
    *,
    open_browser,
    timeout: float,
    client_metadata_url: str | None = None,
) -> OAuthClientProvider:
    """The SDK's OAuth client for ``url``: registers itself dynamically with a loopback redirect, or,
    with ``client_metadata_url`` (the https URL of a client metadata document listing
    ``callback.redirect_uri``), uses that URL as its ``client_id`` where the server supports it."""

    async def redirect(authorization_url: str) -> None:
        open_browser(authorization_url)

    async def wait_for_code() -> AuthorizationCodeResult:
        return await callback.wait(timeout)

    metadata = OAuthClientMetadata(
        client_name="reference agent client (mcp-check)",
        redirect_uris=[callback.redirect_uri],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope="knowledge:read",
    )
    return OAuthClientProvider(
        server_url=url,
        client_metadata=metadata,
        storage=MemoryTokenStorage(),
        redirect_handler=redirect,
        callback_handler=wait_for_code,
        client_metadata_url=client_metadata_url,
    )


async def check(url: str, *, auth: Any = None, bearer: str | None = None, query: str) -> dict[str, Any]:
    """Connect, list the tools, run both knowledge tools; return what was seen."""
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else None
    http = httpx2.AsyncClient(auth=auth, headers=headers, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        tools = await client.list_tools()
        search = await client.call_tool("search_knowledge", {"query": query, "limit": 3})
        ask = await client.call_tool("ask_knowledge", {"query": query})
        return {
            "protocol_version": client.protocol_version,
            "tools": [tool.name for tool in tools.tools],
            "search": {"is_error": search.is_error, "text": search.content[0].text},
            "ask": {"is_error": ask.is_error, "text": ask.content[0].text},
        }


def run(args: Any, *, bearer: str | None = None, hub: str | None = None) -> int:
    """The ``mcp-check`` command (arguments parsed by :func:`agent_client.main`, which with
    ``--tokens`` passes the saved session's checked, if need be refreshed, access token and hub)."""
    url = args.url
    if args.tokens and url is None:
        url = f"{(hub or '').rstrip('/')}/mcp/{args.workspace}"
    if url is None:
        print("mcp-check: give --url (the workspace's MCP endpoint, e.g. http://127.0.0.1:8000/mcp/demo)")
        return 2
    callback = None
    auth = None
    if bearer is None:
        callback = LoopbackCallback()

        def open_browser(authorization_url: str) -> None:
            print(f"Open this page to approve the sign-in:\n  {authorization_url}", flush=True)
            if not args.no_browser:
                webbrowser.open(authorization_url)

        auth = oauth_provider(url, callback, open_browser=open_browser, timeout=args.timeout)
    try:
        seen = asyncio.run(check(url, auth=auth, bearer=bearer, query=args.query))
    except Exception as exc:
        print(f"mcp-check failed: {type(exc).__name__}: {exc}")
        return 1
    finally:
        if callback is not None:
            callback.close()
    print(f"Connected to {url} (MCP {seen['protocol_version']}).")
    print(f"Tools ({len(seen['tools'])}): {', '.join(seen['tools'])}")
    print(f"--- search_knowledge {args.query!r}\n{seen['search']['text']}")
    print(f"--- ask_knowledge {args.query!r}\n{seen['ask']['text']}")
    ok = (
        "search_knowledge" in seen["tools"]
        and "ask_knowledge" in seen["tools"]
        and not seen["search"]["is_error"]
        and not seen["ask"]["is_error"]
    )
    print("mcp-check: ok" if ok else "mcp-check: a knowledge tool failed")
    return 0 if ok else 1
