"""Strict JSON parsing under a raw byte budget.

The body is read from the stream in chunks and reading stops as soon as the budget is passed, so an
oversized request costs at most one chunk beyond the limit; the 413 reports the bytes observed when
reading stopped (``observed_bytes``), which may be less than the full request. Parsing happens only
after the budget check, and rejects what ``json.loads`` would otherwise let through silently:
duplicate keys, ``NaN``/``Infinity`` and lone UTF-16 surrogates.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework.parsers import BaseParser

from bailing.api.errors import InvalidRequest, RequestBodyTooLarge
from bailing.api.text import has_lone_surrogate

_CHUNK = 64 * 1024


def read_budgeted(stream, max_bytes: int) -> bytes:
    """Read ``stream`` to the end, or raise 413 as soon as more than ``max_bytes`` were seen."""
    parts: list[bytes] = []
    seen = 0
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            break
        seen += len(chunk)
        if seen > max_bytes:
            raise RequestBodyTooLarge(max_bytes=max_bytes, observed_bytes=seen)
        parts.append(chunk)
    return b"".join(parts)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidRequest("The JSON body repeats an object key.", field=key)
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise InvalidRequest("NaN and Infinity are not JSON.")


def _check_strings(value: Any, path: str = "") -> None:
    if isinstance(value, str):
        if has_lone_surrogate(value):
            raise InvalidRequest("A string contains an unpaired UTF-16 surrogate.", field=path or "$")
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if has_lone_surrogate(key):
                raise InvalidRequest("A key contains an unpaired UTF-16 surrogate.", field=path or "$")
            _check_strings(item, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_strings(item, f"{path}[{index}]")


def parse_json_bytes(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("The request body is not valid UTF-8.") from None
    try:
        value = json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except InvalidRequest:
        raise
    except (ValueError, RecursionError):
        raise InvalidRequest("The request body is not valid JSON.") from None
    _check_strings(value)
    return value


class BudgetedJSONParser(BaseParser):
    """DRF parser for ``application/json`` honouring the view's ``body_max_bytes``."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        view = (parser_context or {}).get("view")
        max_bytes = getattr(view, "body_max_bytes", None) or settings.BAILING_JSON_BODY_MAX_BYTES
        raw = read_budgeted(stream, max_bytes)
        if not raw.strip():
            return {}
        return parse_json_bytes(raw)
