"""Strict JSON parsing under a raw byte budget.

The body is read from the stream in chunks and reading stops as soon as the budget is passed, so an
oversized request costs at most one chunk beyond the limit; the 413 reports the bytes observed when
reading stopped (``observed_bytes``), which may be less than the full request. Parsing happens only
after the budget check, and rejects what ``json.loads`` would otherwise let through silently:
duplicate keys, ``NaN``/``Infinity``, numbers too large for a double (``1e999`` would become
``inf``, which no response, hash or JSON column can hold), lone UTF-16 surrogates, and nesting
deeper than :data:`MAX_JSON_DEPTH` (whether deeper input parses would otherwise depend on how much
of Python's recursion limit the request had already used, and every later step that walks the
value recursively — serializers, canonical hashing, ``jsonb`` encoding — would hit it again).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from django.conf import settings
from rest_framework.parsers import BaseParser

from bailing.api.errors import InvalidRequest, RequestBodyTooLarge
from bailing.api.text import has_lone_surrogate

_CHUNK = 64 * 1024
# Far beyond any real payload (business tool arguments are a few levels deep), far below the
# interpreter's recursion limit.
MAX_JSON_DEPTH = 128


def read_budgeted(stream, max_bytes: int) -> bytes:
    """Read ``stream`` to the end, or raise 413 as soon as more than ``max_bytes`` were seen.

    What the server's body reader raises becomes 400 ``invalid_request``, never a 500: a client that
    went away mid-body (gunicorn's ``NoMoreData`` is an ``OSError``, as a reset is; the answer then
    reaches nobody, and nothing is logged) or a chunked body whose framing the server refused (a
    chunk size that is not hex, a chunk without its CRLF: gunicorn's ``InvalidChunkSize``,
    ``ChunkMissingTerminator``...).
    """
    parts: list[bytes] = []
    seen = 0
    while True:
        try:
            chunk = stream.read(_CHUNK)
        except OSError:
            raise InvalidRequest("The request body ended early: the client closed the connection.") from None
        except Exception:
            # Only the server's de-chunker raises here: the stream is its body reader.
            raise InvalidRequest("The request body's chunked framing is malformed.") from None
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
            # The key is echoed as ``field`` only when it can be: a lone surrogate cannot be encoded.
            raise InvalidRequest(
                "The JSON body repeats an object key.", field="$" if has_lone_surrogate(key) else key
            )
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise InvalidRequest("NaN and Infinity are not JSON.")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidRequest("A number is too large.")
    return value


# The largest finite double, as an exact integer (compared exactly against integer literals).
_DOUBLE_MAX = int(sys.float_info.max)


def _check_value(value: Any) -> None:
    """Reject lone surrogates (in keys and strings), integers beyond a double and excessive nesting,
    without recursion."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                raise InvalidRequest("A string contains an unpaired UTF-16 surrogate.", field=path or "$")
            continue
        if isinstance(item, int) and not isinstance(item, bool) and not -_DOUBLE_MAX <= item <= _DOUBLE_MAX:
            # An integer literal beyond a double (309+ digits) is Infinity to a JavaScript peer:
            # refused like 1e999, naming where it is.
            raise InvalidRequest("A number is too large.", field=path or "$")
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_JSON_DEPTH:
            raise InvalidRequest("The JSON body is nested too deeply.", field=path or "$")
        if isinstance(item, dict):
            for key, child in item.items():
                if has_lone_surrogate(key):
                    raise InvalidRequest("A key contains an unpaired UTF-16 surrogate.", field=path or "$")
                stack.append((child, f"{path}.{key}" if path else key, depth + 1))
        else:
            for index, child in enumerate(item):
                stack.append((child, f"{path}[{index}]", depth + 1))


def parse_json_bytes(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest("The request body is not valid UTF-8.") from None
    try:
        value = json.loads(
            text,
            object_pairs_hook=_reject_duplicates,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
    except InvalidRequest:
        raise
    except (ValueError, RecursionError):
        raise InvalidRequest("The request body is not valid JSON.") from None
    _check_value(value)
    return value


class BudgetedJSONParser(BaseParser):
    """DRF parser for ``application/json`` honouring the view's ``body_max_bytes``."""

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        raw = self.read(stream, parser_context)
        if not raw.strip():
            return {}
        return parse_json_bytes(raw)

    @staticmethod
    def read(stream, parser_context) -> bytes:
        """The raw body, read under the view's byte budget (:func:`read_budgeted`)."""
        context = parser_context or {}
        raw = read_budgeted(stream, body_budget(context.get("view")))
        # Kept for endpoints whose body is signed (a business decision signs its raw bytes).
        request = context.get("request")
        if request is not None:
            request.raw_body = raw
        return raw


def declared_length(meta) -> int | None:
    """The request's ``Content-Length`` as a number (None when absent or not a number)."""
    try:
        return int(meta.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None


def path_body_budget(path: str) -> int:
    """The byte budget of the view ``path`` resolves to (the default budget when it resolves to none):
    what the front checks a declared ``Content-Length`` against before it reads the body."""
    from django.urls import Resolver404, resolve

    try:
        func = resolve(path).func
    except Resolver404:
        return settings.BAILING_JSON_BODY_MAX_BYTES
    return body_budget(getattr(func, "view_class", None) or getattr(func, "cls", None))


def body_budget(view: Any) -> int:
    """The raw byte budget of a view (class or instance): its ``body_max_bytes``, else
    ``BAILING_JSON_BODY_MAX_BYTES``."""
    return getattr(view, "body_max_bytes", None) or settings.BAILING_JSON_BODY_MAX_BYTES
