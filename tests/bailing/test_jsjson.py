"""Byte budgets measure JSON.stringify exactly; expected values are what V8 prints."""

import pytest

from bailing.api.jsjson import js_number, js_stringify


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (-1.5, "-1.5"),
        (9.9, "9.9"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e-5, "0.00001"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e21, "1e+21"),
        (1.2345e22, "1.2345e+22"),
        (1e16, "10000000000000000"),
        (2**53, "9007199254740992"),
        (2**53 + 1, "9007199254740992"),
        (12345678901234567890, "12345678901234567000"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (100, "100"),
    ],
)
def test_numbers_render_like_ecmascript(value, expected):
    assert js_number(value) == expected


def test_structures_render_compact_with_utf8_strings():
    value = {"a": [1.0, True, None, 'é\n"😀'], "b": {"c": 0.5}}
    assert js_stringify(value) == '{"a":[1,true,null,"é\\n\\"😀"],"b":{"c":0.5}}'
