"""The loopback redirect rules compare the URL's authority exactly: ``urlsplit`` drops what follows
``]`` from the host (``http://[::1]evil.com:8503/`` has hostname ``::1``), so a host check alone
passes authorities that a browser would never read as loopback."""

from __future__ import annotations

import pytest

from agent_runtime.validation import authorize_url_problem, loopback_redirect_problem, oauth_redirect_problem

HOSTILE = [
    "http://[::1]evil.com:8503/cb",
    "http://[::1]evil.com:8503/",
    "http://[::1]x:8503/cb",
    "http://[::1]]:8503/cb",
    "http://[::1]:8503evil.com/cb",
    "http://[::1]@evil.com:8503/cb",
    "http://127.0.0.1@evil.com:8503/cb",
    "http://127.0.0.1:8503@evil.com/cb",
    "http://user@127.0.0.1:8503/cb",
    "http://user:pw@[::1]:8503/cb",
    "http://:@127.0.0.1:8503/cb",
    "http://127.0.0.1.evil.com:8503/cb",
    "http://localhost.evil.com:8503/cb",
    "http://127.0.0.1:0/cb",
    "http://[::1]:0/cb",
    "http://127.0.0.1:65536/cb",
    "http://[::1]:99999/cb",
    "http://127.0.0.1/cb",
    "http://127.0.0.1:/cb",
    "http://[::1]/cb",
    "http://[::1]:/cb",
    "http://127.0.0.1:08503/cb",
    "http://127.0.0.1:+8503/cb",
    "http://[0:0:0:0:0:0:0:1]:8503/cb",
    "http://127.1:8503/cb",
    "http://[::ffff:127.0.0.1]:8503/cb",
]


@pytest.mark.parametrize("uri", HOSTILE)
def test_agent_auth_loopback_rule_refuses_hostile_authorities(uri):
    assert loopback_redirect_problem(uri) is not None


@pytest.mark.parametrize("uri", [*HOSTILE, "http://LOCALHOST:8503/cb", "http://localhost:08503/cb"])
def test_oauth_registration_rule_refuses_hostile_authorities(uri):
    assert oauth_redirect_problem(uri) is not None


@pytest.mark.parametrize(
    "uri",
    [
        "http://127.0.0.1:8503/cb",
        "http://127.0.0.1:1/",
        "http://[::1]:65535/cb",
        "http://127.0.0.1:8503",
        "http://127.0.0.1:8503/cb?x=1",
    ],
)
def test_both_rules_accept_loopback_redirects(uri):
    assert loopback_redirect_problem(uri) is None
    assert oauth_redirect_problem(uri) is None


def test_only_oauth_registrations_may_name_localhost():
    assert loopback_redirect_problem("http://localhost:8503/cb") is not None
    assert oauth_redirect_problem("http://localhost:8503/cb") is None


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1]evil.com:8080/agent/authorize",
        "https://[::1]evil.com/agent/authorize",
        "http://[::1]@evil.com:8080/agent/authorize",
        "http://127.0.0.1.evil.com:8080/agent/authorize",
        "http://127.0.0.1:08080/agent/authorize",
        "http://127.0.0.1/agent/authorize",
        "http://127.0.0.1:65536/agent/authorize",
    ],
)
def test_business_consent_page_urls_refuse_hostile_authorities(url):
    assert authorize_url_problem(url) is not None


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/agent/authorize",
        "http://[::1]:8080/agent/authorize",
        "http://localhost:8080/agent/authorize",
        "https://shop.example.com/agent/authorize",
        "https://Shop.Example.com:8443/agent/authorize?x=1",
    ],
)
def test_business_consent_page_urls_accept_https_and_loopback(url):
    assert authorize_url_problem(url) is None
