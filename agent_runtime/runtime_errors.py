"""Error codes of the Agent Client Runtime turn/run surface (research §F.1 R28–R35, R55–R62, §H34).

Declared once here and re-exported by ``agent_runtime.errors`` so the error-table test finds them;
services raise them, the shared exception handler renders them.
"""

from __future__ import annotations

from bailing.api.errors import ApiError

__all__ = [
    "AssistantMessageConflict",
    "PageContextTooLarge",
    "RunCompletionConflict",
    "RunNotFound",
    "TaskControlUnsupported",
    "TurnConflict",
]


class TurnConflict(ApiError):
    """The turn key or the user message id is already bound to a different turn input (§H24)."""

    code = "turn_conflict"
    http_status = 409
    default_message = "This turn id or user message id is already bound to a different input."


class PageContextTooLarge(ApiError):
    """``page_context`` over 16 KiB of compact UTF-8 JSON (research §H32)."""

    code = "page_context_too_large"
    http_status = 413
    default_message = "page_context exceeds 16 KiB."
    extras = ("max_bytes", "actual_bytes")

    def __init__(self, *, max_bytes: int, actual_bytes: int, message: str | None = None):
        super().__init__(message, max_bytes=max_bytes, actual_bytes=actual_bytes)


class TaskControlUnsupported(ApiError):
    """A turn carried ``task_binding`` but this hub does not implement task control (§H34): the
    binding is refused, never silently ignored."""

    code = "task_control_unsupported"
    http_status = 400
    default_message = "Task control is not supported by this hub; task_binding cannot be honoured."


class RunNotFound(ApiError):
    code = "run_not_found"
    http_status = 404
    default_message = "The run was not found for this agent session and workspace."


class RunCompletionConflict(ApiError):
    code = "run_completion_conflict"
    http_status = 409
    default_message = "The run was already completed with a different result."


class AssistantMessageConflict(ApiError):
    code = "assistant_message_conflict"
    http_status = 409
    default_message = "assistant_message_id is already bound to a different run."
