import json

import pytest

from bailing.api.errors import InvalidRequest
from bailing.api.hashing import canonical_json, canonical_sha256
from bailing.api.limits import compact_json_utf8_bytes, truncate_utf8, utf16_length
from bailing.api.parsers import parse_json_bytes


def test_canonical_json_sorts_keys_and_keeps_utf8():
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()
    assert canonical_sha256({"a": 1, "b": 2}) == canonical_sha256({"b": 2, "a": 1})


def test_compact_json_bytes_match_javascript_stringify():
    # JSON.stringify({"k":"é😀\n"}) is {"k":"é😀\n"} with the newline escaped: 2+1+2+4+2 ...
    value = {"k": "é😀\n"}
    assert compact_json_utf8_bytes(value) == len('{"k":"é😀\\n"}'.encode())


def test_utf16_length_counts_astral_as_two():
    assert utf16_length("a😀") == 3
    assert len("a😀") == 2


def test_truncate_utf8_never_splits_a_character():
    assert truncate_utf8("é" * 3, 3) == "é"


@pytest.mark.parametrize(
    "raw",
    [b'{"a":1,"a":2}', b'{"a":NaN}', b'{"a":Infinity}', b'{"a":"\\ud800"}', b"\xff", b"{"],
)
def test_parser_rejects_what_json_loads_would_accept_silently(raw):
    with pytest.raises(InvalidRequest):
        parse_json_bytes(raw)


def test_parser_accepts_paired_surrogates():
    assert parse_json_bytes(b'{"a":"\\ud83d\\ude00"}') == {"a": "😀"}
    assert json.dumps(parse_json_bytes(b"[]")) == "[]"
