"""``JSON.stringify`` byte-for-byte, for byte budgets (docs/protocol.md "Byte budgets").

Python's ``json.dumps`` and JavaScript's ``JSON.stringify`` agree on strings (with
``ensure_ascii=False``; lone surrogates are rejected before this point), literals, structure and key
order — but not on numbers: Python writes ``1.0``, ``1e-05`` and ``1e+16`` where JavaScript writes
``1``, ``0.00001`` and ``10000000000000000``, and integers beyond 2^53 are doubles in JavaScript.
This module renders numbers with ECMAScript's Number::toString rules so a budget measured here is
the budget a JavaScript client (BailingHub's agent SDK among them) measured.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

_SAFE_INTEGER = 2**53


def js_number(value: int | float) -> str:
    """ECMAScript Number::toString of ``value`` (as a double)."""
    if isinstance(value, bool):
        raise TypeError("booleans are not numbers")
    if isinstance(value, int) and -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
        return str(value)
    number = float(value)
    if not math.isfinite(number):
        return "null"  # what JSON.stringify writes for NaN and ±Infinity
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    # repr gives the shortest digits that round-trip, exactly the digits ECMAScript asks for.
    _, digits_tuple, exponent = Decimal(repr(abs(number))).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple))
    k = len(digits)
    n = exponent + k  # value = 0.digits × 10^n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + text


def _js_primitive(value: Any) -> str | None:
    """``null``, booleans and numbers as both ``JSON.stringify`` and ``String`` write them (the two
    agree on these); ``None`` for any other value."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return js_number(value)
    return None


def js_stringify(value: Any) -> str:
    """Compact ``JSON.stringify(value)`` for decoded JSON values (dict, list, str, numbers, bool, None)."""
    primitive = _js_primitive(value)
    if primitive is not None:
        return primitive
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "{" + ",".join(f"{js_stringify(str(k))}:{js_stringify(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_stringify(item) for item in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def js_canonical(value: Any) -> str:
    """Canonical JSON as BailingHub writes it for hashes: ``JSON.stringify`` with every object's keys
    sorted the way JavaScript's ``Array.prototype.sort`` sorts strings (by UTF-16 code units)."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda item: _utf16_key(str(item[0])))
        return "{" + ",".join(f"{js_stringify(str(k))}:{js_canonical(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_canonical(item) for item in value) + "]"
    return js_stringify(value)


def js_normalized(value: Any) -> Any:
    """``JSON.parse(JSON.stringify(value))``: the value a JavaScript peer holds — ``1.0`` is ``1``, an
    integer beyond 2^53 is the nearest double. Approval snapshots, hashes and the request sent must all
    be built from this one value."""
    return json.loads(js_stringify(value))


def js_string(value: Any) -> str:
    """JavaScript's ``String(value)`` for decoded JSON values."""
    primitive = _js_primitive(value)
    if primitive is not None:
        return primitive
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"
