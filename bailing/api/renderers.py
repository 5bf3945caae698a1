"""Compact JSON responses (no spaces), UTF-8, non-ASCII kept as is."""

from __future__ import annotations

import json

from rest_framework.renderers import BaseRenderer


class CompactJSONRenderer(BaseRenderer):
    media_type = "application/json"
    format = "json"
    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
