"""Strict input serializers: every request body of the agent and business surfaces goes through these.

DRF's stock fields coerce (``5`` → ``"5"``, ``"true"`` → ``True``, trimmed whitespace); the protocol
says invalid input is rejected, never normalized. These fields accept exactly one JSON type, count
characters as the spec says, reject control characters and lone surrogates, and
:class:`StrictSerializer` rejects unknown keys at every nesting level. A failure becomes
``400 invalid_request`` with ``field`` naming the path of the first bad field.
"""

from __future__ import annotations

import math
import re
from typing import Any

from rest_framework import serializers

from bailing.api.limits import compact_json_utf8_bytes, utf16_length
from bailing.api.text import has_control_chars, has_lone_surrogate


class StrictCharField(serializers.CharField):
    """A JSON string, never coerced or trimmed.

    ``length_unit`` is ``"utf16"`` (JavaScript ``.length``, the default for client text; see
    docs/protocol.md "Counting characters") or ``"codepoints"``. ``multiline`` allows TAB/LF/CR; other
    control characters are always rejected. ``display`` marks text the console or a consent page
    shows: bidirectional controls are rejected too, as control characters.
    """

    default_error_messages = {
        "type": "Must be a string.",
        "control": "Contains control characters.",
        "surrogate": "Contains an unpaired surrogate.",
        "pattern": "Does not match the required pattern.",
        "too_long": "Too long.",
        "too_short": "Too short.",
    }

    def __init__(
        self,
        *,
        pattern: str | None = None,
        multiline: bool = False,
        display: bool = False,
        length_unit: str = "utf16",
        **kwargs: Any,
    ):
        self.max_len = kwargs.pop("max_length", None)
        self.min_len = kwargs.pop("min_length", None)
        kwargs.setdefault("trim_whitespace", False)
        self.pattern = re.compile(pattern) if pattern else None
        self.multiline = multiline
        self.display = display
        self.length_unit = length_unit
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("type")
        if has_lone_surrogate(data):
            self.fail("surrogate")
        if has_control_chars(data, multiline=self.multiline, display=self.display):
            self.fail("control")
        if data == "" and not self.allow_blank:
            self.fail("blank")
        length = utf16_length(data) if self.length_unit == "utf16" else len(data)
        if self.max_len is not None and length > self.max_len:
            self.fail("too_long")
        if self.min_len is not None and length < self.min_len:
            self.fail("too_short")
        if self.pattern is not None and not self.pattern.fullmatch(data):
            self.fail("pattern")
        return data


class StrictIntegerField(serializers.Field):
    default_error_messages = {"type": "Must be an integer.", "range": "Out of range."}

    def __init__(self, *, min_value: int | None = None, max_value: int | None = None, **kwargs: Any):
        self.min_value = min_value
        self.max_value = max_value
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("type")
        if (self.min_value is not None and data < self.min_value) or (
            self.max_value is not None and data > self.max_value
        ):
            self.fail("range")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class StrictNumberField(StrictIntegerField):
    default_error_messages = {"type": "Must be a number.", "range": "Out of range."}

    def to_internal_value(self, data: Any) -> int | float:
        if isinstance(data, bool) or not isinstance(data, int | float) or not math.isfinite(data):
            self.fail("type")
        if (self.min_value is not None and data < self.min_value) or (
            self.max_value is not None and data > self.max_value
        ):
            self.fail("range")
        return data


class StrictListField(serializers.ListField):
    """A JSON array; ``unique=True`` rejects duplicates instead of dropping them."""

    default_error_messages = {"type": "Must be an array.", "duplicate": "Contains duplicates."}

    def __init__(self, *, unique: bool = False, **kwargs: Any):
        self.unique = unique
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list:
        if not isinstance(data, list):
            self.fail("type")
        value = super().to_internal_value(data)
        if self.unique:
            seen = set()
            for item in value:
                key = repr(item)
                if key in seen:
                    self.fail("duplicate")
                seen.add(key)
        return value


class JSONObjectField(serializers.Field):
    """Any JSON object (kept as sent), optionally bounded in compact UTF-8 bytes."""

    default_error_messages = {"type": "Must be an object.", "too_large": "Too large."}

    def __init__(self, *, max_bytes: int | None = None, **kwargs: Any):
        self.max_bytes = max_bytes
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> dict:
        if not isinstance(data, dict):
            self.fail("type")
        if self.max_bytes is not None and compact_json_utf8_bytes(data) > self.max_bytes:
            self.fail("too_large")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class StrictSerializer(serializers.Serializer):
    """Rejects anything that is not a JSON object, and unknown keys, at every nesting level."""

    default_error_messages = {"unknown": "Unknown field.", "type": "Must be an object."}

    def to_internal_value(self, data: Any) -> dict:
        if not isinstance(data, dict):
            raise serializers.ValidationError({"$": [self.error_messages["type"]]})
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({unknown[0]: [self.error_messages["unknown"]]})
        return super().to_internal_value(data)


def first_error_path(detail: Any, prefix: str = "") -> str:
    """Dotted path of the first failing field in a DRF ValidationError detail."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            if key in ("non_field_errors", "$"):
                return prefix or "$"
            part = f"[{key}]" if isinstance(key, int) else (f".{key}" if prefix else str(key))
            return first_error_path(value, prefix + part)
    if isinstance(detail, list) and detail and not isinstance(detail[0], str | serializers.ErrorDetail):
        for index, value in enumerate(detail):
            if value:
                return first_error_path(value, f"{prefix}[{index}]")
    return prefix or "$"


def validate_strict(serializer_class: type[serializers.Serializer], data: Any) -> dict:
    """Validate ``data`` with a strict serializer; raise ``invalid_request`` naming the bad field."""
    from bailing.api.errors import InvalidRequest

    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        raise InvalidRequest(field=first_error_path(serializer.errors))
    return serializer.validated_data
