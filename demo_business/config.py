"""Runtime configuration of the demo business system, read from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit


class ConfigError(ValueError):
    """The process cannot start safely with the given environment."""


@dataclass(frozen=True, slots=True)
class DemoConfig:
    """Everything the WSGI app needs; immutable so request threads share it without locking.

    ``tool_secret`` is the HMAC key shared with the hub's tool provider (tool calls and spec fetches);
    ``hub_url`` is reserved for approval callbacks to the hub and unused for now.
    """

    tool_secret: str
    hub_url: str = ""
    signature_tolerance_seconds: int = 300
    # Tool arguments here are a few short fields; anything larger is a client bug or an attack.
    max_body_bytes: int = 64 * 1024
    # Bounded replay memory: oldest idempotency records are forgotten first.
    max_idempotency_records: int = 10_000

    def __post_init__(self) -> None:
        if not self.tool_secret:
            raise ConfigError("DEMO_TOOL_SECRET is required")
        if self.hub_url:
            parts = urlsplit(self.hub_url)
            if parts.scheme not in {"http", "https"} or not parts.netloc:
                raise ConfigError("DEMO_HUB_URL must be an http(s) URL")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DemoConfig:
        env = os.environ if environ is None else environ
        return cls(
            tool_secret=env.get("DEMO_TOOL_SECRET", ""),
            hub_url=env.get("DEMO_HUB_URL", "").rstrip("/"),
        )
