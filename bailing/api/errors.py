"""The flat BailingHub error envelope and the shared error codes.

Wire shape: ``{"error": "<code>", "message": "<human text>", ...documented extras}``. Each app
declares its codes once, as subclasses of :class:`ApiError` in ``<app>/errors.py``; services raise
them and :func:`bailing.api.exception_handler.api_exception_handler` renders them. Messages are fixed
texts: they never carry request bodies, credentials, tokens or SQL.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ApiError(Exception):
    """Base class of every error the hub returns over HTTP."""

    code: ClassVar[str] = "internal_error"
    http_status: ClassVar[int] = 500
    default_message: ClassVar[str] = "Internal error."
    # Documented extra keys for this code (docs/errors.md "Error codes" lists them).
    extras: ClassVar[tuple[str, ...]] = ()

    def __init__(self, message: str | None = None, *, headers: dict[str, str] | None = None, **extra: Any):
        self.message = message or self.default_message
        self.headers = headers or {}
        self.extra = extra
        super().__init__(self.message)

    def payload(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.extra}


class InternalError(ApiError):
    code = "internal_error"
    http_status = 500
    default_message = "Internal error."


class InvalidRequest(ApiError):
    code = "invalid_request"
    http_status = 400
    default_message = "The request is invalid."
    extras = ("field",)


class Unauthorized(ApiError):
    code = "unauthorized"
    http_status = 401
    default_message = "Authentication is required."

    def __init__(self, message: str | None = None, **extra: Any):
        super().__init__(message, headers={"WWW-Authenticate": 'Bearer realm="bailing"'}, **extra)


class Forbidden(ApiError):
    code = "forbidden"
    http_status = 403
    default_message = "Not allowed."


class NotFound(ApiError):
    code = "not_found"
    http_status = 404
    default_message = "Not found."


class MethodNotAllowed(ApiError):
    code = "method_not_allowed"
    http_status = 405
    default_message = "Method not allowed."


class UnsupportedMediaType(ApiError):
    code = "unsupported_media_type"
    http_status = 415
    default_message = "The request body must be application/json."


class RequestBodyTooLarge(ApiError):
    """Raw body over its byte budget, detected while streaming (docs/protocol.md "Oversized requests")."""

    code = "arguments_too_large"
    http_status = 413
    default_message = "The request body is larger than this endpoint accepts."
    extras = ("origin", "dispatch", "limit_scope", "max_bytes", "observed_bytes", "actual_bytes")

    def __init__(self, *, max_bytes: int, observed_bytes: int, message: str | None = None):
        super().__init__(
            message,
            origin="core",
            dispatch="not_dispatched",
            limit_scope="request_body",
            max_bytes=max_bytes,
            observed_bytes=observed_bytes,
        )

    @classmethod
    def arguments(cls, *, max_bytes: int, actual_bytes: int) -> RequestBodyTooLarge:
        """Tool ``arguments`` over their own budget: the same code, ``limit_scope: "arguments"`` and
        the exact ``actual_bytes`` (UTF-8 bytes of ``JSON.stringify(arguments)``)."""
        error = cls(
            max_bytes=max_bytes, observed_bytes=0, message="The tool arguments are larger than allowed."
        )
        error.extra = {
            "origin": "core",
            "dispatch": "not_dispatched",
            "limit_scope": "arguments",
            "max_bytes": max_bytes,
            "actual_bytes": actual_bytes,
        }
        return error


class NotImplementedByHub(ApiError):
    """A request framing the hub's front does not implement (a transfer coding other than chunked)."""

    code = "not_implemented"
    http_status = 501
    default_message = "The request uses an HTTP feature the hub does not implement."


class RateLimited(ApiError):
    code = "rate_limited"
    http_status = 429
    default_message = "Too many requests; retry later."
    extras = ("retry_after_seconds",)

    def __init__(self, *, retry_after: int, message: str | None = None):
        super().__init__(message, headers={"Retry-After": str(retry_after)}, retry_after_seconds=retry_after)


class ServiceUnavailable(ApiError):
    """The database cannot be reached (docs/protocol.md "Database outages"): retry, it is no bug."""

    code = "service_unavailable"
    http_status = 503
    default_message = "The hub cannot reach its database right now; retry shortly."
    extras = ("retry_after_seconds",)

    def __init__(self, *, retry_after: int, message: str | None = None):
        super().__init__(message, headers={"Retry-After": str(retry_after)}, retry_after_seconds=retry_after)


def all_error_classes() -> list[type[ApiError]]:
    """Every concrete ApiError subclass loaded so far (the error-table test imports every app)."""
    seen: list[type[ApiError]] = []
    stack = [ApiError]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.append(sub)
                stack.append(sub)
    return seen
