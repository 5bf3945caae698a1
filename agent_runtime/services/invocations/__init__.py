"""The governed call path: ``POST /tool-invocations`` and ``…/resume`` (``bailing.agent-tool-invocation.v1``).

Checks, in order (docs/protocol.md "Invocation checks"): the bearer (the view), the envelope and
argument budgets (the view, through :func:`tool_arguments`), the route gate and
``tools.agent_direct``, the per-invocation lock, the idempotency binding of ``invocation_id``; for a
new invocation the capability revision (409 ``capability_changed``), the tool in the current
authorized set (404 ``tool_not_found``) and the run (404 ``run_not_found``); the client's rate limit;
the subject gate, the arguments against the tool's schema, the frozen-run rule and the approval gate;
then, just before dispatch, the provider's bulkhead, the tool's and the provider's rate limits and
the run's tool-call budget.

The package by concern:

* ``arguments`` — the arguments normalized once (:class:`ToolArguments`: value, canonical text,
  size, ``args_hash``), their budget and control-character rule, the sealed frozen copy;
* ``identifiers`` — request id, execution fingerprint, idempotency key, request fingerprint;
* ``locks`` — the per-invocation advisory lock and the per-provider bulkhead;
* ``context`` — the stored tool and provider an invocation is about;
* ``gates`` — the rules a call must pass before it may be sent;
* ``results`` — the texts an agent reads and the result builders;
* ``records`` — audit milestones and the states reached without a business answer;
* ``dispatch`` — the journal commit, the signed request and its outcome;
* ``answers`` — the business answer at rest under a data policy (filtered form stored, raw sealed);
* ``calls`` — the entry points, :func:`invocation_create` and :func:`invocation_resume`;
* ``receipts`` — the receipt as released to the agent (:func:`invocation_receipt_release`);
* ``withdrawals`` — the caller withdraws a call waiting for approval (:func:`invocation_withdraw`).

Every result an agent reads passes :func:`agent_runtime.services.data_policy.tool_result_release`
(the workspace's data policy): a fresh business answer in ``dispatch``, a replayed stable result in
``calls``, the receipt's result in ``receipts``.

Never a duplicate write: the journal row is committed before the request leaves; an attempt whose
outcome is unknown, or an invocation found ``dispatching`` with nobody holding its lock (a worker that
died mid-call), becomes ``reconciliation_required`` and is never sent again by the hub, whatever the
tool. Only an operator's resolution (``approvals``) changes that answer.
"""

from __future__ import annotations

from agent_runtime.budgets import ARGUMENTS_MAX_BYTES, INVOCATION_BODY_MAX_BYTES, RESUME_BODY_MAX_BYTES
from agent_runtime.services.invocations.arguments import (
    ToolArguments,
    arguments_hash,
    arguments_size_checked,
    tool_arguments,
)
from agent_runtime.services.invocations.calls import InvocationRequest, invocation_create, invocation_resume
from agent_runtime.services.invocations.identifiers import idempotency_key
from agent_runtime.services.invocations.locks import invocation_lock_free
from agent_runtime.services.invocations.receipts import invocation_receipt_release
from agent_runtime.services.invocations.withdrawals import Withdrawal, invocation_withdraw

# The raw body of ``POST /tool-invocations`` (arguments plus envelope) and of ``…/resume``.
ENVELOPE_MAX_BYTES = INVOCATION_BODY_MAX_BYTES

__all__ = [
    "ARGUMENTS_MAX_BYTES",
    "ENVELOPE_MAX_BYTES",
    "RESUME_BODY_MAX_BYTES",
    "InvocationRequest",
    "ToolArguments",
    "Withdrawal",
    "arguments_hash",
    "arguments_size_checked",
    "idempotency_key",
    "invocation_create",
    "invocation_lock_free",
    "invocation_receipt_release",
    "invocation_resume",
    "invocation_withdraw",
    "tool_arguments",
]
