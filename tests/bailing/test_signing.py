import hmac

import h11
import httpx
import pytest

from bailing import signing

SECRET = "bailing-test-secret"

# Frozen vectors published with BailingHub's signature verification examples (docs/protocol.md "Signatures").
TOOL_CALL_SIGNATURE = "sha256=6deb8dbd54268eee4631129b442acbc9797431642473326a10a5b0826431aae5"
SPEC_FETCH_SIGNATURE = "sha256=505ab99763cd20b50ba4066ee2ac315fe6af12a8638e7dabef63508abddedc74"
CALLBACK_SIGNATURE = "sha256=ca81d247422d926be3066f065a8c92a1beaffc6f37f01ef7d3e2c47b46f63210"

TOOL_BODY = b'{"title":"test","price":9.9}'
CALLBACK_BODY = b'{"kind":"delivery","job_id":"job-test-001","status":"done"}'
TS = 1718000000


def tool_call_headers(**overrides):
    kwargs = {
        "secret": SECRET,
        "method": "POST",
        "path_with_query": "/goods/create",
        "body": TOOL_BODY,
        "on_behalf_of": "179:1",
        "job_id": "job-test-001",
        "timestamp": TS,
    }
    kwargs.update(overrides)
    return signing.sign_tool_request(**kwargs)


def verify_tool_call(headers, **overrides):
    kwargs = {
        "secret": SECRET,
        "headers": headers,
        "method": "POST",
        "path_with_query": "/goods/create",
        "body": TOOL_BODY,
        "now": TS,
    }
    kwargs.update(overrides)
    return signing.verify_tool_request(**kwargs)


# --- frozen vectors -------------------------------------------------------------------------------


def test_tool_call_vector():
    headers = tool_call_headers()
    assert headers == {
        "X-Bailing-Signature": TOOL_CALL_SIGNATURE,
        "X-Bailing-Timestamp": "1718000000",
        "X-Bailing-On-Behalf-Of": "179:1",
        "X-Bailing-Job-Id": "job-test-001",
    }


def test_spec_fetch_vector_omits_empty_subject_and_job_headers():
    headers = signing.sign_spec_fetch(secret=SECRET, path_with_query="/bailing/tools.json", timestamp=TS)
    assert headers == {"X-Bailing-Signature": SPEC_FETCH_SIGNATURE, "X-Bailing-Timestamp": "1718000000"}
    same = signing.sign_tool_request(
        secret=SECRET, method="get", path_with_query="/bailing/tools.json", body=b"", timestamp=TS
    )
    assert same == headers


def test_callback_vector():
    headers = signing.sign_callback(secret=SECRET, body=CALLBACK_BODY, timestamp_ms=1718000000000)
    assert headers == {"X-Bailing-Signature": CALLBACK_SIGNATURE, "X-Bailing-Timestamp": "1718000000000"}


def test_frozen_vectors_verify():
    tool = verify_tool_call(
        {
            "x-bailing-signature": TOOL_CALL_SIGNATURE,
            "x-bailing-timestamp": "1718000000",
            "x-bailing-on-behalf-of": "179:1",
            "x-bailing-job-id": "job-test-001",
        }
    )
    assert tool.ok and bool(tool)
    assert (tool.on_behalf_of, tool.job_id, tool.timestamp) == ("179:1", "job-test-001", TS)

    spec = signing.verify_tool_request(
        secret=SECRET,
        headers={"X-Bailing-Signature": SPEC_FETCH_SIGNATURE, "X-Bailing-Timestamp": "1718000000"},
        method="GET",
        path_with_query="/bailing/tools.json",
        body=b"",
        now=TS + 299,
    )
    assert spec.ok and (spec.on_behalf_of, spec.job_id) == ("", "")

    callback = signing.verify_callback(
        secret=SECRET,
        headers={"X-Bailing-Signature": CALLBACK_SIGNATURE, "X-Bailing-Timestamp": "1718000000000"},
        body=CALLBACK_BODY,
        now_ms=1718000000000,
    )
    assert callback.ok


def test_str_body_and_bytes_secret_sign_like_bytes():
    assert tool_call_headers(body=TOOL_BODY.decode(), secret=SECRET.encode()) == tool_call_headers()


# --- tampering: every signed component matters -----------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"secret": "another-secret"},
        {"method": "PUT"},
        {"path_with_query": "/goods/create?x=1"},
        {"path_with_query": "/goods/Create"},
        {"body": b'{"title":"test","price":9.91}'},
        {"body": b'{"price":9.9,"title":"test"}'},
    ],
    ids=["secret", "method", "query", "path", "body", "body-key-order"],
)
def test_tool_call_tampered_request_fails(overrides):
    result = verify_tool_call(tool_call_headers(), **overrides)
    assert not result.ok and not result
    assert result.reason == signing.REASON_SIGNATURE_MISMATCH


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("X-Bailing-On-Behalf-Of", "179:2"),
        ("X-Bailing-Job-Id", "job-test-002"),
        ("X-Bailing-Timestamp", "1718000001"),
        ("X-Bailing-Signature", TOOL_CALL_SIGNATURE[:-1] + "4"),
    ],
)
def test_tool_call_tampered_header_fails(header, value):
    headers = tool_call_headers()
    headers[header] = value
    result = verify_tool_call(headers)
    assert result.reason == signing.REASON_SIGNATURE_MISMATCH
    assert TOOL_CALL_SIGNATURE not in repr(result)


@pytest.mark.parametrize("header", ["X-Bailing-On-Behalf-Of", "X-Bailing-Job-Id"])
def test_dropping_a_signed_header_fails(header):
    headers = tool_call_headers()
    del headers[header]
    assert verify_tool_call(headers).reason == signing.REASON_SIGNATURE_MISMATCH


def test_present_empty_header_signs_like_absent_header():
    headers = signing.sign_spec_fetch(secret=SECRET, path_with_query="/bailing/tools.json", timestamp=TS)
    headers["X-Bailing-On-Behalf-Of"] = ""
    headers["X-Bailing-Job-Id"] = ""
    result = signing.verify_tool_request(
        secret=SECRET, headers=headers, method="GET", path_with_query="/bailing/tools.json", body=b"", now=TS
    )
    assert result.ok


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"X-Bailing-Timestamp": "1718000000"}, signing.REASON_MISSING_SIGNATURE),
        ({"X-Bailing-Signature": TOOL_CALL_SIGNATURE}, signing.REASON_MISSING_TIMESTAMP),
        (
            {"X-Bailing-Signature": TOOL_CALL_SIGNATURE.upper(), "X-Bailing-Timestamp": "1718000000"},
            signing.REASON_MALFORMED_SIGNATURE,
        ),
        (
            {"X-Bailing-Signature": TOOL_CALL_SIGNATURE[7:], "X-Bailing-Timestamp": "1718000000"},
            signing.REASON_MALFORMED_SIGNATURE,
        ),
        (
            {"X-Bailing-Signature": "sha256=é" + "0" * 63, "X-Bailing-Timestamp": "1718000000"},
            signing.REASON_MALFORMED_SIGNATURE,
        ),
        (
            {"X-Bailing-Signature": TOOL_CALL_SIGNATURE, "X-Bailing-Timestamp": "-1718000000"},
            signing.REASON_MALFORMED_TIMESTAMP,
        ),
        (
            {"X-Bailing-Signature": TOOL_CALL_SIGNATURE, "X-Bailing-Timestamp": "1718000000.0"},
            signing.REASON_MALFORMED_TIMESTAMP,
        ),
        (
            {"X-Bailing-Signature": TOOL_CALL_SIGNATURE, "X-Bailing-Timestamp": "9" * 40},
            signing.REASON_MALFORMED_TIMESTAMP,
        ),
    ],
)
def test_missing_or_malformed_headers_fail_with_a_reason(headers, reason):
    result = verify_tool_call(headers)
    assert not result.ok
    assert result.reason == reason


# --- clock skew ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("offset", "ok"), [(-300, True), (300, True), (-301, False), (301, False)])
def test_tool_call_timestamp_window_is_300_seconds(offset, ok):
    result = verify_tool_call(tool_call_headers(), now=TS + offset)
    assert result.ok is ok
    if not ok:
        assert result.reason == signing.REASON_TIMESTAMP_SKEW


def test_tool_call_custom_tolerance():
    assert verify_tool_call(tool_call_headers(), now=TS + 31, tolerance_seconds=30).reason == (
        signing.REASON_TIMESTAMP_SKEW
    )


def test_default_clock_is_now():
    headers = signing.sign_tool_request(secret=SECRET, method="GET", path_with_query="/orders", body=b"")
    fresh = signing.verify_tool_request(
        secret=SECRET, headers=headers, method="GET", path_with_query="/orders", body=b""
    )
    assert fresh.ok
    stale = signing.sign_tool_request(
        secret=SECRET, method="GET", path_with_query="/orders", body=b"", timestamp=TS
    )
    assert (
        signing.verify_tool_request(
            secret=SECRET, headers=stale, method="GET", path_with_query="/orders", body=b""
        ).reason
        == signing.REASON_TIMESTAMP_SKEW
    )


# --- callbacks -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"body": CALLBACK_BODY + b" "}, signing.REASON_SIGNATURE_MISMATCH),
        ({"secret": "another-secret"}, signing.REASON_SIGNATURE_MISMATCH),
        ({"now_ms": 1718000000000 + 300_001}, signing.REASON_TIMESTAMP_SKEW),
        ({"now_ms": 1718000000000 - 300_001}, signing.REASON_TIMESTAMP_SKEW),
    ],
)
def test_callback_tampering_and_skew_fail(overrides, reason):
    kwargs = {
        "secret": SECRET,
        "headers": {"X-Bailing-Signature": CALLBACK_SIGNATURE, "X-Bailing-Timestamp": "1718000000000"},
        "body": CALLBACK_BODY,
        "now_ms": 1718000000000,
    }
    kwargs.update(overrides)
    assert signing.verify_callback(**kwargs).reason == reason


def test_callback_timestamp_is_milliseconds():
    # The same instant in seconds is ~54 years away on the millisecond clock.
    headers = signing.sign_callback(secret=SECRET, body=CALLBACK_BODY, timestamp_ms=1718000000000)
    headers["X-Bailing-Timestamp"] = "1718000000"
    result = signing.verify_callback(secret=SECRET, headers=headers, body=CALLBACK_BODY, now_ms=1718000000000)
    assert result.reason == signing.REASON_TIMESTAMP_SKEW


def test_callback_signs_raw_bytes_not_decoded_text():
    body = '{"summary":"已完成"}'.encode()
    headers = signing.sign_callback(secret=SECRET, body=body, timestamp_ms=1)
    assert signing.verify_callback(secret=SECRET, headers=headers, body=body, now_ms=1).ok
    assert not signing.verify_callback(
        secret=SECRET, headers=headers, body='{"summary":"已完成"}'.encode("utf-16"), now_ms=1
    ).ok


# --- constant time, input hygiene ------------------------------------------------------------------


def test_signature_comparison_goes_through_compare_digest(monkeypatch):
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(signing.hmac, "compare_digest", spy)
    assert verify_tool_call(tool_call_headers()).ok
    bad = tool_call_headers(on_behalf_of="179:2")
    bad["X-Bailing-On-Behalf-Of"] = "179:1"
    assert not verify_tool_call(bad).ok
    callback_headers = signing.sign_callback(secret=SECRET, body=CALLBACK_BODY, timestamp_ms=5)
    assert signing.verify_callback(secret=SECRET, headers=callback_headers, body=CALLBACK_BODY, now_ms=5).ok
    assert len(calls) == 3
    assert all(isinstance(a, bytes) and isinstance(b, bytes) for a, b in calls)


@pytest.mark.parametrize(
    "overrides",
    [
        {"on_behalf_of": "alice\r\nX-Evil: 1"},
        {"job_id": "job\n1"},
        {"on_behalf_of": "渠道用户"},
        {"on_behalf_of": " alice"},
        {"job_id": "job-1 "},
        {"path_with_query": "goods/create"},
        {"secret": ""},
    ],
)
def test_signer_rejects_values_that_cannot_travel_in_headers(overrides):
    with pytest.raises(ValueError):
        tool_call_headers(**overrides)


def test_empty_secret_never_verifies():
    with pytest.raises(ValueError):
        verify_tool_call(tool_call_headers(), secret="")


@pytest.mark.parametrize(
    ("value", "sendable"),
    [
        ("", True),
        ("t1:alice", True),
        ("a b", True),
        ("~!@#$%^&*()_+{}|:<>?", True),
        (" alice", False),
        ("alice ", False),
        ("alice\t", False),
        ("al\x7fice", False),
        ("jos\u00e9", False),
        ("渠道用户", False),
        ("a\r\nX-Evil: 1", False),
        (None, False),
        (5, False),
    ],
)
def test_is_sendable_header_value_is_what_the_signer_and_http_accept(value, sendable):
    assert signing.is_sendable_header_value(value) is sendable
    if isinstance(value, str):
        if sendable:
            headers = tool_call_headers(on_behalf_of=value)
            # What the signer accepts, an HTTP client sends unchanged.
            httpx.Request("GET", "http://127.0.0.1/", headers=headers)
            h11.Connection(h11.CLIENT).send(
                h11.Request(method="GET", target="/", headers=[("Host", "x"), *headers.items()])
            )
        else:
            with pytest.raises(ValueError):
                tool_call_headers(on_behalf_of=value)
