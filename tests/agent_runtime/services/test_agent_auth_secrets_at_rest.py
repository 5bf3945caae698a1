"""Secrets exist at rest only as SHA-256 digests: after a complete life of a client and its agents
(config apply, Client Token issued and rotated, sign-in, consent context, approval, code exchange,
refresh rotation, refresh replay, denial, self and business revocation), no table of the database
holds any Client Token, authorization code, access or refresh token, or PKCE verifier, in any column.

The scan reads every table the database has, not a list of models, so a new table or column that
stores a secret fails it.
"""

from __future__ import annotations

import io
import json
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from agent_client import pkce_pair
from agent_runtime.tokens import secret_hash
from tests.factories import RouteFactory

pytestmark = pytest.mark.django_db

BASE = "/agent-auth/v1"
REDIRECT = "http://127.0.0.1:53682/callback"


def database_text() -> str:
    """Every row of every table, each rendered by PostgreSQL as text (all columns, JSON included)."""
    rows = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            quoted = connection.ops.quote_name(table)
            cursor.execute(f"SELECT t::text FROM {quoted} t")  # table names come from the catalog
            rows.extend(row[0] for row in cursor.fetchall())
    return "\n".join(rows)


class Business:
    """The business backend and the local agent, over HTTP, collecting every secret handed out."""

    def __init__(self, token: str):
        self.http = APIClient()
        self.token = token
        self.secrets: list[str] = []

    def keep(self, *secrets: str) -> None:
        self.secrets.extend(secrets)

    def call(self, method: str, path: str, body=None, token: str | None = None):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
        if method == "get":
            return self.http.get(BASE + path, **headers)
        return self.http.post(BASE + path, body if body is not None else {}, format="json", **headers)

    def start(self) -> tuple[str, str]:
        verifier, challenge = pkce_pair()
        self.keep(verifier)
        response = self.call(
            "post",
            "/authorizations",
            {
                "client_app_id": "shop",
                "redirect_uri": REDIRECT,
                "state": "state-12345678",
                "requested_routes": ["orders"],
                "device_label": "laptop",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            },
        )
        assert response.status_code == 201, response.content
        authorization_id = response.json()["authorization_id"]
        assert self.call("get", f"/authorizations/{authorization_id}", token=self.token).status_code == 200
        return authorization_id, verifier

    def login(self) -> dict:
        authorization_id, verifier = self.start()
        response = self.call(
            "post",
            f"/authorizations/{authorization_id}/approve",
            {"principal": {"id": "alice"}, "on_behalf_of": "alice", "allowed_routes": ["orders"]},
            token=self.token,
        )
        assert response.status_code == 200, response.content
        code = parse_qs(urlsplit(response.json()["redirect_uri"]).query)["code"][0]
        self.keep(code)
        response = self.call(
            "post",
            "/token",
            {
                "grant_type": "authorization_code",
                "client_app_id": "shop",
                "code": code,
                "redirect_uri": REDIRECT,
                "code_verifier": verifier,
            },
        )
        assert response.status_code == 200, response.content
        tokens = response.json()
        self.keep(tokens["access_token"], tokens["refresh_token"])
        return tokens

    def refresh(self, refresh_token: str):
        response = self.call(
            "post",
            "/token",
            {"grant_type": "refresh_token", "client_app_id": "shop", "refresh_token": refresh_token},
        )
        if response.status_code == 200:
            tokens = response.json()
            self.keep(tokens["access_token"], tokens["refresh_token"])
        return response


def test_no_secret_is_stored_in_any_column_of_any_table(tmp_path):
    RouteFactory(route_key="orders")
    config = tmp_path / "hub.json"
    config.write_text(
        json.dumps(
            {
                "clients": [
                    {
                        "app_id": "shop",
                        "name": "Shop",
                        "allowed_routes": ["orders"],
                        "agent_authorize_url": "https://shop.example.com/agent/authorize",
                    }
                ]
            }
        )
    )
    call_command("bailing_apply", str(config), stdout=io.StringIO())
    tokens_out = io.StringIO()
    call_command("bailing_client_token", "shop", stdout=tokens_out, stderr=io.StringIO())
    first_client_token = tokens_out.getvalue().strip()
    tokens_out = io.StringIO()
    call_command("bailing_client_token", "shop", stdout=tokens_out, stderr=io.StringIO())
    client_token = tokens_out.getvalue().strip()
    assert client_token.startswith("bct_") and client_token != first_client_token

    agent = Business(client_token)
    agent.keep(first_client_token, client_token)
    # The rotated-away token is dead.
    assert agent.call("get", "/authorizations/x", token=first_client_token).status_code == 401

    # Login, refresh, then a replay of the first refresh token revokes the session.
    first = agent.login()
    rotated = agent.refresh(first["refresh_token"]).json()
    assert agent.call("get", "/session", token=rotated["access_token"]).status_code == 200
    assert agent.refresh(first["refresh_token"]).json()["error"] == "invalid_grant"
    assert agent.call("get", "/session", token=rotated["access_token"]).status_code == 401

    # A second login: refreshed, then ended by the agent with its refresh token.
    second = agent.login()
    again = agent.refresh(second["refresh_token"]).json()
    revoked = agent.call(
        "post", "/revoke", {"client_app_id": "shop", "refresh_token": again["refresh_token"]}
    )
    assert revoked.json() == {"revoked": True}

    # A third, ended by the business backend; and a denied sign-in.
    third = agent.login()
    path = f"/sessions/{third['session_id']}/revoke"
    assert agent.call("post", path, token=client_token).json() == {"revoked": True}
    authorization_id, _ = agent.start()
    assert (
        agent.call("post", f"/authorizations/{authorization_id}/deny", token=client_token).status_code == 200
    )

    dump = database_text()
    assert len(agent.secrets) >= 18
    for secret in agent.secrets:
        assert secret not in dump
        # The random part alone (a prefix-less copy, or one in another encoding) would be a leak too.
        body = secret[4:] if secret[3] == "_" else secret
        assert body not in dump
    # What is stored instead: the digests (the current Client Token's, the refresh-token ledger's;
    # access-token digests are replaced on refresh and cleared on revocation).
    for secret in (client_token, first["refresh_token"], rotated["refresh_token"], again["refresh_token"]):
        assert secret_hash(secret) in dump
