"""The one error type of the demo business system and its wire shape.

Same flat envelope as the hub (``{"error": code, "message": text, **extras}``) so hub-side traces and
tests read business errors the same way. Messages are fixed text: never request bodies or secrets.
"""

from __future__ import annotations

from typing import Any


class DemoError(Exception):
    """A request the business refuses, with its HTTP status, stable code and safe extras.

    Raised anywhere below the WSGI entry point and rendered once by the app; side effects are only
    recorded (and idempotency keys only consumed) when no ``DemoError`` escapes.
    """

    def __init__(self, status: int, code: str, message: str, **extras: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extras = extras

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.extras}


def invalid_request(field: str, message: str = "The request is invalid.") -> DemoError:
    return DemoError(400, "invalid_request", message, field=field)
