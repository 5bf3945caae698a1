"""The outbound client (bailing/outbound.py) over real sockets: one absolute deadline per request,
and the outbound target policy (bailing/outbound_targets.py) — the address table, the allowed
networks, the check of every resolved address at connect time with no second lookup, and TLS still
verified against the host name."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
import time

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.test import override_settings

from bailing import outbound
from bailing.outbound import TargetForbidden, outbound_client
from bailing.outbound_targets import (
    BROADCAST,
    LINK_LOCAL,
    LOOPBACK,
    MULTICAST,
    PRIVATE,
    PUBLIC,
    RESERVED,
    UNSPECIFIED,
    address_kind,
    address_problem,
    literal_address,
    parse_allowed_networks,
)
from tests.support.outbound import drip_body, drip_headers, fixed, raw_http_server

BUDGET = 1.0
# What "by the deadline" allows for on a loaded two-core machine; the old per-read timeouts held
# these requests for the server's whole 30 s.
MARGIN = 2.0


# --- one deadline per request ------------------------------------------------------------------------
def test_a_server_that_drips_header_lines_is_cut_at_the_deadline():
    with raw_http_server(drip_headers()) as server, outbound_client(timeout=BUDGET) as client:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            client.get(server.base_url + "/x")
        elapsed = time.monotonic() - started
    assert BUDGET * 0.9 <= elapsed < BUDGET + MARGIN
    assert len(server.requests) == 1


def test_a_body_that_drips_after_its_headers_is_cut_at_the_deadline():
    with raw_http_server(drip_body()) as server, outbound_client(timeout=BUDGET) as client:
        started = time.monotonic()
        with client.stream("GET", server.base_url + "/x") as response:
            assert response.status_code == 200
            with pytest.raises(httpx.ReadTimeout):
                response.read()
        elapsed = time.monotonic() - started
    assert BUDGET * 0.9 <= elapsed < BUDGET + MARGIN


def test_a_name_lookup_that_never_finishes_is_cut_at_the_deadline(monkeypatch):
    release = threading.Event()

    def stuck(host, port):
        release.wait(10)
        return []

    monkeypatch.setattr(outbound, "resolve_addresses", stuck)
    try:
        with outbound_client(timeout=BUDGET) as client:
            started = time.monotonic()
            with pytest.raises(httpx.ConnectTimeout):
                client.get("http://slow-dns.test/")
            elapsed = time.monotonic() - started
    finally:
        release.set()
    assert elapsed < BUDGET + MARGIN


def test_a_tls_handshake_that_never_answers_is_cut_at_the_deadline():
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]))
    thread.start()
    try:
        with outbound_client(timeout=BUDGET) as client:
            started = time.monotonic()
            with pytest.raises(httpx.ConnectTimeout):
                client.get(f"https://127.0.0.1:{listener.getsockname()[1]}/")
            elapsed = time.monotonic() - started
    finally:
        thread.join(5)
        for sock in accepted:
            sock.close()
        listener.close()
    assert elapsed < BUDGET + MARGIN


def test_every_request_of_a_client_has_its_own_deadline():
    # The spec refresh sends three requests on one client: each gets the whole budget.
    with raw_http_server(fixed(200, b'{"ok":true}')) as server, outbound_client(timeout=0.5) as client:
        assert client.get(server.base_url + "/a").json() == {"ok": True}
        time.sleep(0.7)
        assert client.get(server.base_url + "/b").json() == {"ok": True}
    assert [request.target for request in server.requests] == ["/a", "/b"]


# --- the address table -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", LOOPBACK),
        ("127.255.255.254", LOOPBACK),
        ("::1", LOOPBACK),
        ("::ffff:127.0.0.1", LOOPBACK),
        ("8.8.8.8", PUBLIC),
        ("93.184.216.34", PUBLIC),
        ("172.15.255.255", PUBLIC),
        ("172.32.0.0", PUBLIC),
        ("100.63.255.255", PUBLIC),
        ("100.128.0.0", PUBLIC),
        ("2606:4700::1111", PUBLIC),
        ("::ffff:8.8.8.8", PUBLIC),
        ("64:ff9b::808:808", PUBLIC),  # NAT64 of 8.8.8.8
        ("2002:808:808::1", PUBLIC),  # 6to4 of 8.8.8.8
        ("10.0.0.1", PRIVATE),
        ("10.255.255.255", PRIVATE),
        ("172.16.0.1", PRIVATE),
        ("172.31.255.255", PRIVATE),
        ("192.168.1.1", PRIVATE),
        ("100.64.0.1", PRIVATE),
        ("100.127.255.255", PRIVATE),
        ("198.18.0.1", PRIVATE),
        ("fc00::1", PRIVATE),
        ("fd12:3456::1", PRIVATE),
        ("::ffff:10.0.0.1", PRIVATE),
        ("64:ff9b::a00:1", PRIVATE),  # NAT64 of 10.0.0.1
        ("2002:a00:1::", PRIVATE),  # 6to4 of 10.0.0.1
        ("169.254.169.254", LINK_LOCAL),
        ("169.254.0.1", LINK_LOCAL),
        ("fe80::1", LINK_LOCAL),
        ("fe80::1%2", LINK_LOCAL),
        ("febf::1", LINK_LOCAL),
        ("::ffff:169.254.169.254", LINK_LOCAL),
        ("::ffff:a9fe:a9fe", LINK_LOCAL),
        ("64:ff9b::a9fe:a9fe", LINK_LOCAL),
        ("2002:a9fe:a9fe::1", LINK_LOCAL),
        ("0.0.0.0", UNSPECIFIED),
        ("0.1.2.3", UNSPECIFIED),
        ("::", UNSPECIFIED),
        ("::ffff:0.0.0.0", UNSPECIFIED),
        ("224.0.0.1", MULTICAST),
        ("239.255.255.250", MULTICAST),
        ("ff02::1", MULTICAST),
        ("255.255.255.255", BROADCAST),
        ("::ffff:255.255.255.255", BROADCAST),
        ("240.0.0.1", RESERVED),
        ("192.0.2.1", RESERVED),
        ("198.51.100.7", RESERVED),
        ("203.0.113.9", RESERVED),
        ("192.0.0.8", RESERVED),
        ("192.88.99.1", RESERVED),
        ("2001:db8::1", RESERVED),
        ("3fff::1", RESERVED),
        ("2001::1", RESERVED),  # Teredo
        ("fec0::1", RESERVED),
        ("100::1", RESERVED),  # discard-only
        ("::169.254.169.254", RESERVED),  # IPv4-compatible (deprecated)
        ("64:ff9b:1::1", RESERVED),
        ("4000::1", RESERVED),  # outside 2000::/3, unassigned
        ("5f00::1", RESERVED),
    ],
)
def test_address_kinds(address, kind):
    assert address_kind(address) == kind
    assert address_kind(ipaddress.ip_address(address)) == kind


def test_only_loopback_and_public_addresses_are_allowed_by_default():
    assert address_problem("127.0.0.1") is None
    assert address_problem("8.8.8.8") is None
    assert address_problem("10.0.0.1") == PRIVATE
    assert address_problem("::ffff:169.254.169.254") == LINK_LOCAL


def test_allowed_networks_open_private_addresses_and_nothing_else():
    allowed = parse_allowed_networks(["10.20.0.0/16", "fd00:1::/64", " 192.168.5.7 ", ""])
    assert address_problem("10.20.3.4", allowed) is None
    assert address_problem("::ffff:10.20.3.4", allowed) is None  # judged as the IPv4 address
    assert address_problem("fd00:1::9", allowed) is None
    assert address_problem("192.168.5.7", allowed) is None
    assert address_problem("192.168.5.8", allowed) == PRIVATE
    assert address_problem("10.21.0.1", allowed) == PRIVATE
    assert address_problem("fd00:2::1", allowed) == PRIVATE


@pytest.mark.parametrize(
    "entry",
    [
        "169.254.0.0/16",
        "169.254.169.254/32",
        "169.0.0.0/8",  # overlaps link-local
        "0.0.0.0/0",
        "fe80::/10",
        "fe80::1/128",
        "::/0",
        "224.0.0.0/4",
        "255.255.255.255/32",
        "240.0.0.0/8",
        "::ffff:10.0.0.0/104",  # write it as IPv4
        "64:ff9b::/96",
        "2001:db8::/32",
        "not-a-network",
        "10.0.0.0/33",
    ],
)
def test_allowed_networks_refuse_what_no_setting_may_allow(entry):
    with pytest.raises(ValueError, match=r"^'"):
        parse_allowed_networks([entry])


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("169.254.169.254", "169.254.169.254"),
        ("::ffff:169.254.169.254", "::ffff:169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),  # octal, as resolvers read it
        ("2852039166", "169.254.169.254"),  # one 32-bit number
        ("0xa9fea9fe", "169.254.169.254"),
        ("127.1", "127.0.0.1"),
        ("shop.example.com", None),
        ("1.example", None),
    ],
)
def test_literal_addresses_include_legacy_ipv4_spellings(host, address):
    assert literal_address(host) == (ipaddress.ip_address(address) if address else None)


# --- connect time --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://169.254.169.254/latest/meta-data/", LINK_LOCAL),
        ("http://[::ffff:169.254.169.254]/", LINK_LOCAL),
        ("http://[fe80::1]/", LINK_LOCAL),
        ("http://10.0.0.5:8080/", PRIVATE),
        ("https://100.64.0.1/", PRIVATE),
        ("http://0.0.0.0:8000/", UNSPECIFIED),
        ("http://[::]:8000/", UNSPECIFIED),
        ("http://224.0.0.1/", MULTICAST),
        ("http://255.255.255.255/", BROADCAST),
        ("http://240.0.0.1/", RESERVED),
    ],
)
def test_a_denied_literal_address_is_refused_without_connecting(loopback_only, url, kind):
    with outbound_client(timeout=BUDGET) as client, pytest.raises(TargetForbidden) as info:
        client.get(url)
    assert info.value.kind == kind
    assert isinstance(info.value, httpx.ConnectError)  # callers unaware of the policy: "unreachable"
    assert loopback_only == []


@pytest.mark.parametrize("denied", ["169.254.169.254", "::ffff:169.254.169.254", "10.1.2.3", "fe80::1"])
def test_a_name_with_any_denied_address_is_refused_without_connecting(
    loopback_only, stand_in_resolver, denied
):
    with raw_http_server(fixed()) as server:
        resolver = stand_in_resolver({"mixed.test": [["127.0.0.1", denied]]})
        with outbound_client(timeout=BUDGET) as client, pytest.raises(TargetForbidden):
            client.get(f"http://mixed.test:{server.port}/")
        assert server.accepted == 0
    assert resolver.calls == ["mixed.test"]
    assert loopback_only == []


def test_the_connection_goes_to_the_address_that_was_checked(loopback_only, stand_in_resolver):
    # A rebinding DNS server: an allowed address for the check, a denied one for any later lookup.
    resolver = stand_in_resolver({"rebind.test": [["127.0.0.1"], ["169.254.169.254"]]})
    with (
        raw_http_server(fixed(200, b'{"reached":true}')) as server,
        outbound_client(timeout=BUDGET) as client,
    ):
        response = client.get(f"http://rebind.test:{server.port}/x")
    assert response.json() == {"reached": True}
    assert resolver.calls == ["rebind.test"]  # resolved once, for this connection
    assert loopback_only == ["127.0.0.1"]
    [request] = server.requests
    assert request.headers["host"] == f"rebind.test:{server.port}"


def test_a_private_address_in_the_allowed_networks_is_connected_to(loopback_only, stand_in_resolver):
    stand_in_resolver({"intranet.test": [["10.1.2.3"]]})
    # The guard stops the connection itself (no traffic leaves loopback); reaching it proves the
    # policy let the address through, where without the setting it is refused before.
    with (
        override_settings(BAILING_OUTBOUND_ALLOWED_NETWORKS=["10.1.0.0/16"]),
        outbound_client(timeout=BUDGET) as client,
        pytest.raises(AssertionError, match="beyond loopback"),
    ):
        client.get("http://intranet.test/")
    assert loopback_only == ["10.1.2.3"]
    with outbound_client(timeout=BUDGET) as client, pytest.raises(TargetForbidden):
        client.get("http://intranet.test/")
    assert loopback_only == ["10.1.2.3"]


# --- TLS keeps verifying the host name ---------------------------------------------------------------
def _certificates(tmp_path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A CA, a server certificate for ``name`` signed by it: (server context, client context)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "outbound test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "server.pem", tmp_path / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_path, key_path)
    client = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode())
    return server, client


@pytest.mark.parametrize(("certified", "reached"), [("business.test", True), ("other.test", False)])
def test_tls_is_verified_against_the_host_name_not_the_checked_address(
    tmp_path, monkeypatch, loopback_only, stand_in_resolver, certified, reached
):
    server_context, client_context = _certificates(tmp_path, certified)
    monkeypatch.setattr(outbound, "tls_context", lambda: client_context)
    stand_in_resolver({"business.test": [["127.0.0.1"]]})
    with raw_http_server(fixed(200, b'{"tls":true}'), tls=server_context) as server:
        url = f"https://business.test:{server.port}/"
        with outbound_client(timeout=5) as client:
            if reached:
                assert client.get(url).json() == {"tls": True}
            else:
                with pytest.raises(httpx.ConnectError) as info:
                    client.get(url)
                assert not isinstance(info.value, TargetForbidden)
        assert server.server_names == ["business.test"]  # SNI names the host, not 127.0.0.1
    assert loopback_only == ["127.0.0.1"]
