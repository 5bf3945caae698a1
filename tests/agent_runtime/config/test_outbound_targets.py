"""Outbound targets at config time (docs/protocol.md "Outbound targets"): a provider's ``base_url`` and
an approval webhook ``url`` are https, or plain http only to loopback, and a host written as an IP
address must be one the hub may call — refused by the validation ``bailing_apply`` runs, naming the
field and never the value."""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from agent_runtime.config import ConfigError, validate_document
from agent_runtime.models import Route, ToolProvider

PROVIDER = {"name": "shop", "base_url": "https://shop.example.com"}
DENIED_HOSTS = [
    "169.254.169.254",  # cloud metadata
    "169.254.0.1",
    "[fe80::1]",
    "[::ffff:169.254.169.254]",  # IPv4-mapped: judged as the IPv4 address
    "[::ffff:a9fe:a9fe]",
    "[64:ff9b::a9fe:a9fe]",  # NAT64 of it
    "0251.0376.0251.0376",  # legacy spellings resolvers accept
    "2852039166",
    "0xa9fea9fe",
    "0.0.0.0",
    "[::]",
    "224.0.0.1",
    "[ff02::1]",
    "255.255.255.255",
    "240.0.0.1",
    "192.0.2.10",
    "[2001:db8::1]",
    "10.0.0.5",  # private ranges: only with BAILING_OUTBOUND_ALLOWED_NETWORKS
    "172.16.3.4",
    "192.168.1.10",
    "100.64.0.1",
    "[fd00::1]",
    "[::ffff:10.0.0.5]",
]


def _provider_error(base_url: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        validate_document({"tool_providers": [{**PROVIDER, "base_url": base_url}]})
    return info.value


def _route(url: str) -> dict:
    return {
        "route_key": "shop",
        "name": "Shop",
        "tools": {"approval": {"type": "business_webhook", "url": url}},
    }


def _webhook_error(url: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        validate_document({"routes": [_route(url)]})
    return info.value


@pytest.mark.parametrize("host", DENIED_HOSTS)
def test_a_provider_base_url_with_a_denied_address_is_refused(host):
    error = _provider_error(f"https://{host}:8443/api")
    assert error.path == "tool_providers[0].base_url"
    assert host.strip("[]") not in str(error)


@pytest.mark.parametrize("host", DENIED_HOSTS)
def test_an_approval_webhook_with_a_denied_address_is_refused(host):
    error = _webhook_error(f"https://{host}/approvals")
    assert error.path == "routes[0].tools.approval.url"
    assert host.strip("[]") not in str(error)


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/approvals",  # plain http beyond loopback
        "http://10.0.0.5/approvals",
        "http://[fd00::1]/approvals",
        "http://localhost.example.com/approvals",
    ],
)
def test_an_approval_webhook_over_plain_http_must_be_loopback(url):
    assert _webhook_error(url).path == "routes[0].tools.approval.url"


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/approvals",
        "http://127.0.0.1:8100/approvals",  # the Demo Shop
        "http://localhost:9000/hook",
        "http://[::1]:9000/hook",
        "https://93.184.216.34/hook",
    ],
)
def test_allowed_approval_webhooks(url):
    [route] = validate_document({"routes": [_route(url)]})["routes"]
    assert route["tools"]["approval"]["url"] == url


@pytest.mark.parametrize(
    "base_url",
    ["https://shop.example.com", "http://127.0.0.1:8100", "https://93.184.216.34", "https://[::1]"],
)
def test_allowed_provider_base_urls(base_url):
    [provider] = validate_document({"tool_providers": [{**PROVIDER, "base_url": base_url}]})["tool_providers"]
    assert provider["base_url"] == base_url


def test_a_private_network_is_allowed_once_listed_but_never_over_plain_http():
    with override_settings(BAILING_OUTBOUND_ALLOWED_NETWORKS=["10.0.0.0/8", "fd00::/8"]):
        for url in ("https://10.0.0.5:8443", "https://[fd00::1]", "https://[::ffff:10.0.0.5]"):
            [provider] = validate_document({"tool_providers": [{**PROVIDER, "base_url": url}]})[
                "tool_providers"
            ]
            assert provider["base_url"] == url
        assert validate_document({"routes": [_route("https://10.1.2.3/approvals")]})["routes"]
        assert _provider_error("http://10.0.0.5:8100").path == "tool_providers[0].base_url"
        assert _provider_error("https://192.168.1.1").path == "tool_providers[0].base_url"  # not listed
        assert _provider_error("https://169.254.169.254").path == "tool_providers[0].base_url"


@pytest.mark.django_db
def test_bailing_apply_refuses_the_file_and_writes_nothing(tmp_path):
    path = tmp_path / "hub.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "tool_providers": [{**PROVIDER, "base_url": "https://169.254.169.254"}],
                "routes": [_route("https://hooks.example.com/approvals")],
            }
        ),
        encoding="utf-8",
    )
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("bailing_apply", str(path), stdout=io.StringIO(), stderr=err)
    assert "tool_providers[0].base_url" in err.getvalue()
    assert "169.254.169.254" not in err.getvalue()
    assert not ToolProvider.objects.exists()
    assert not Route.objects.exists()
