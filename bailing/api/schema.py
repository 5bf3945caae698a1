"""The OpenAPI view of the strict API surfaces (drf-spectacular; docs/api.md "API reference").

Views validate with ``StrictSerializer`` classes, by convention the view's ``InputSerializer`` (or the
classes a view names in ``schema_request_serializer`` / ``schema_query_serializer``): the body of a
write, the query string of a read. This schema class reads those, so the document shows exactly what
the views accept, and maps the strict fields to JSON Schema (patterns anchored, as the fields match
whole values). Responses are described as JSON objects; the shell's hooks add every error response
(``bailing.shell.schema``).
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

from bailing.api.serializers import (
    JSONObjectField,
    StrictCharField,
    StrictIntegerField,
    StrictListField,
    StrictNumberField,
    StrictSerializer,
)

_BODY_METHODS = {"POST", "PUT", "PATCH"}


def _input_serializer(view: Any) -> Any:
    return getattr(view, "schema_request_serializer", None) or getattr(view, "InputSerializer", None)


class BailingAutoSchema(AutoSchema):
    def get_request_serializer(self) -> Any:
        if self.method not in _BODY_METHODS:
            return None
        serializer = _input_serializer(self.view)
        if isinstance(serializer, tuple):
            # One body of several shapes (the token grants): oneOf the serializers.
            return PolymorphicProxySerializer(
                component_name=f"{type(self.view).__name__}Request",
                serializers=list(serializer),
                resource_type_field_name=None,
            )
        return serializer

    def get_override_parameters(self) -> list:
        params = list(super().get_override_parameters())
        if self.method == "GET":
            query = getattr(self.view, "schema_query_serializer", None) or getattr(
                self.view, "InputSerializer", None
            )
            if query is not None:
                params.append(query)
        return params

    def get_auth(self) -> list:
        # Security requirements are the shell's (bailing.shell.schema), per surface.
        return []

    def get_operation_id(self) -> str:
        name = re.sub(r"Api$", "", type(self.view).__name__)
        return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() + "_" + self.method.lower()

    def _get_serializer_name(self, serializer, direction, bypass_extensions=False) -> str:
        cls = serializer if isinstance(serializer, type) else type(serializer)
        if "." in cls.__qualname__ and "<locals>" not in cls.__qualname__:
            # ``SomeApi.InputSerializer`` is ``SomeApiInput``: every view names its own the same.
            return re.sub(r"Serializer$", "", cls.__qualname__.replace(".", ""))
        return super()._get_serializer_name(serializer, direction, bypass_extensions)

    def get_response_serializers(self) -> Any:
        # Success bodies are JSON objects whose shapes docs/protocol.md and docs/api.md describe.
        return {"type": "object", "additionalProperties": True}

    def _get_response_for_code(self, serializer, status_code, media_types=None, direction="response"):
        if isinstance(serializer, dict):
            return {
                "description": "Success.",
                "content": {"application/json": {"schema": serializer}},
            }
        return super()._get_response_for_code(serializer, status_code, media_types, direction)

    def get_response_status(self) -> str:
        created = getattr(self.view, "schema_created_status", False)
        return "201" if created and self.method == "POST" else "200"

    def _get_response_bodies(self, direction="response"):
        response = self._get_response_for_code(self.get_response_serializers(), self.get_response_status())
        return {self.get_response_status(): response}

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        if getattr(field, "openapi_schema", None) is not None:
            return self._nullable(field, dict(field.openapi_schema))
        if isinstance(field, StrictCharField):
            schema: dict[str, Any] = {"type": "string"}
            if field.pattern is not None:
                schema["pattern"] = f"^(?:{field.pattern.pattern})$"
            if field.max_len is not None:
                schema["maxLength"] = field.max_len
            if field.min_len is not None:
                schema["minLength"] = field.min_len
            elif not field.allow_blank:
                schema["minLength"] = 1
            return self._nullable(field, schema)
        if isinstance(field, StrictNumberField):
            return self._nullable(field, self._bounded(field, {"type": "number"}))
        if isinstance(field, StrictIntegerField):
            return self._nullable(field, self._bounded(field, {"type": "integer"}))
        if isinstance(field, JSONObjectField):
            return self._nullable(field, {"type": "object", "additionalProperties": True})
        if isinstance(field, StrictListField):
            schema = {"type": "array", "items": self._map_serializer_field(field.child, direction)}
            if field.max_length is not None:
                schema["maxItems"] = field.max_length
            if field.min_length is not None:
                schema["minItems"] = field.min_length
            return self._nullable(field, schema)
        if isinstance(field, StrictSerializer):
            return super()._map_serializer_field(field, direction, bypass_extensions)
        stock = serializers.CharField | serializers.IntegerField | serializers.BooleanField
        if not isinstance(field, stock | serializers.Serializer):
            # A field of the hub's own (e.g. a raw route key, an approver object): its rule is in its
            # docstring, any JSON value reaches it and it answers 400 invalid_request if it breaks it.
            return {"description": (type(field).__doc__ or "").strip()} if type(field).__doc__ else {}
        return super()._map_serializer_field(field, direction, bypass_extensions)

    @staticmethod
    def _bounded(field: StrictIntegerField, schema: dict[str, Any]) -> dict[str, Any]:
        if getattr(field, "min_value", None) is not None:
            schema["minimum"] = field.min_value
        if getattr(field, "max_value", None) is not None:
            schema["maximum"] = field.max_value
        return schema

    @staticmethod
    def _nullable(field: serializers.Field, schema: dict[str, Any]) -> dict[str, Any]:
        if field.allow_null:
            return {"oneOf": [schema, {"type": "null"}]}
        return schema
