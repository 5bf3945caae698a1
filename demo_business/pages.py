"""HTML of the Demo Shop's approvals inbox: the page a business approver (say, a shop manager) uses.

Plain server-rendered HTML: no JavaScript, no external assets (one inline style sheet), every value
from a request escaped. The page is served to loopback clients only (see ``demo_business.app``);
the headers in :data:`HTML_HEADERS` forbid framing, scripts and foreign form targets on top.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from demo_business.approvals import HubState

HTML_CONTENT_TYPE = "text/html; charset=utf-8"
HTML_HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'",
    ),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    # Not no-referrer: with it, browsers send "Origin: null" on the page's own form posts, and the
    # shop's cross-origin check needs the real origin.
    ("Referrer-Policy", "same-origin"),
]

_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; margin: 0; background: #f5f6f8; color: #1d2330; }
main { max-width: 960px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; }
.lead { color: #586174; margin: 0 0 20px; }
.note { border: 1px solid #e0b84c; background: #fff8e1; padding: 10px 14px; border-radius: 6px;
  margin: 0 0 16px; }
.failure { border-color: #d9534f; background: #fdecea; }
article { background: #fff; border: 1px solid #d9dde5; border-radius: 8px; padding: 16px; margin: 0 0 16px; }
article h2 { font-size: 17px; margin: 0 0 8px; }
.tag { display: inline-block; font-size: 12px; border: 1px solid #b8bfcc; border-radius: 999px;
  padding: 0 8px; margin-left: 6px; vertical-align: middle; }
.risk-high { border-color: #d9534f; color: #a12622; }
.risk-medium { border-color: #e0a030; color: #8a5a00; }
.status-approved { border-color: #3c9a5f; color: #23693c; }
.status-denied { border-color: #d9534f; color: #a12622; }
.status-expired { border-color: #8a93a6; color: #4a5263; }
.status-unknown { border-color: #e0a030; color: #8a5a00; }
.hub-state { color: #586174; margin: 8px 0 0; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dt { color: #586174; }
dd { margin: 0; overflow-wrap: anywhere; }
pre { background: #f0f2f5; border-radius: 6px; padding: 10px; overflow: auto; margin: 8px 0; }
.actions { display: flex; gap: 16px; flex-wrap: wrap; margin-top: 12px; }
.actions form { display: flex; gap: 8px; align-items: center; }
.actions input { width: 16em; }
button { border: 0; border-radius: 6px; padding: 6px 14px; font-weight: 600; cursor: pointer; color: #fff; }
.approve { background: #2f8a50; }
.deny { background: #c0392b; }
.empty { color: #586174; }
article.decided { background: #fafbfc; border-style: dashed; }
"""


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _document(title: str, body: str) -> bytes:
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f"<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    ).encode()


def _failure_text(failure: Mapping[str, Any]) -> str:
    verb = "approve" if failure["decision"] == "approved" else "deny"
    if failure.get("hub_error") == "hub_bad_response":
        answer = "the hub's answer was not HTTP"
    elif failure.get("hub_status") is None:
        answer = "the hub could not be reached"
    else:
        answer = f"the hub answered HTTP {failure['hub_status']}"
    code = f" ({failure['hub_error']})" if failure.get("hub_error") else ""
    return (
        f"The last attempt to {verb} failed at {failure['at']}: {answer}{code}. "
        "The shop recorded no decision."
    )


# Why the hub could not say where an approval stands (HubState.error), in the page's words.
_CHECK_ERRORS = {
    "hub_unreachable": "hub unreachable",
    "hub_timeout": "hub unreachable (no answer in time)",
    "hub_bad_response": "hub unreachable (its answer was not HTTP)",
    "not_checked": "not checked (the hub was too slow for this page)",
    "state_mismatch": "the hub's answer names another call",
    "hub_not_configured": "the hub is not configured here",
}


def check_problem(check: HubState) -> str:
    """Why ``check`` says nothing about the approval, in a few words (it has an ``error``)."""
    if check.error == "hub_refused":
        return f"the hub refused to say (HTTP {check.hub_status})"
    return _CHECK_ERRORS.get(check.error or "", "hub unreachable")


_SOURCES = {"console": "in the hub console", "business": "through the hub's business decision endpoint"}


def hub_decision_text(decision: Mapping[str, Any]) -> str:
    """``approved by manager in the hub console at …``: who decided, where and when, as the hub says."""
    status = str(decision.get("status"))
    if status == "expired":
        when = f" (it expired at {decision['expires_at']})" if decision.get("expires_at") else ""
        return f"expired in the hub before anyone decided{when}"
    who = f" by {decision['decided_by']}" if decision.get("decided_by") else ""
    source = decision.get("decision_source")
    where = f" {_SOURCES.get(source, 'in the hub (' + str(source) + ')')}" if source else " in the hub"
    when = f" at {decision['decided_at']}" if decision.get("decided_at") else ""
    return f"{status}{who}{where}{when}"


def _forms(approval_id: int) -> str:
    forms = []
    for action, label in (("approve", "Approve"), ("deny", "Deny")):
        forms.append(
            f'<form method="post" action="/approvals/{approval_id}/{action}">'
            f'<input type="text" name="comment" maxlength="1000" placeholder="Comment (optional)" '
            f'aria-label="{label} comment">'
            f'<button type="submit" class="{action}">{label}</button></form>'
        )
    return f'<div class="actions">{"".join(forms)}</div>'


def _card(record: Mapping[str, Any], check: HubState | None) -> str:
    request = record["request"]
    approval_id = record["approval_id"]
    status = record["status"]
    # A pending request the hub could not be asked about is not known to be pending.
    unknown = status == "pending" and check is not None and check.error is not None
    shown = "state unknown" if unknown else status
    tag = "unknown" if unknown else status
    risk = str(request.get("risk", ""))
    rows = [
        ("Policy", request.get("policy")),
        ("Reason", request.get("reason")),
        ("Summary", request.get("summary")),
        ("Subject", request.get("subject")),
        ("Route", request.get("route")),
        ("Call", f"{request.get('method', '')} {request.get('path', '')}"),
        ("Scope", request.get("scope")),
        ("Job", request.get("job_id")),
        ("Args hash", request.get("args_hash")),
        ("Received", record["received_at"]),
    ]
    details = "".join(f"<dt>{_e(name)}</dt><dd>{_e(value)}</dd>" for name, value in rows if value)
    if request.get("args_omitted"):
        args = f"(not sent: {request.get('args_bytes')} bytes of arguments; read them in the hub's console)"
    else:
        args = json.dumps(request.get("args", {}), indent=2, ensure_ascii=False)
    state = "pending" if status == "pending" else "decided"
    parts = [
        f'<article id="approval-{approval_id}" class="approval {state}">',
        f"<h2>#{approval_id} · {_e(request.get('tool'))}"
        f'<span class="tag risk-{_e(risk)}">risk: {_e(risk)}</span>'
        f'<span class="tag status-{_e(tag)}">{_e(shown)}</span></h2>',
        f"<dl>{details}</dl>",
        f'<pre class="args">{_e(args)}</pre>',
    ]
    if record.get("last_failure"):
        parts.append(f'<p class="note failure">{_e(_failure_text(record["last_failure"]))}</p>')
    if unknown:
        parts.append(
            f'<p class="note failure hub-check">Where this approval stands in the hub is not known: '
            f"{_e(check_problem(check))}. It may already be decided there.</p>"
        )
    elif status == "pending" and check is not None and check.state is not None:
        parts.append('<p class="hub-state">Pending in the hub too (asked just now).</p>')
    if status == "pending" and record.get("in_flight"):
        parts.append('<p class="note">A decision for this request is being sent to the hub.</p>')
    elif status == "pending":
        parts.append(_forms(approval_id))
    elif record.get("hub_decision"):
        text = hub_decision_text(record["hub_decision"])
        decision_id = record["hub_decision"].get("decision_id")
        suffix = f" (decision <code>{_e(decision_id)}</code>)" if decision_id else ""
        parts.append(
            f'<p class="hub-decided">Not decided here: {_e(text[:1].upper() + text[1:])}{suffix}.</p>'
        )
    else:
        comment = f" — “{_e(record['comment'])}”" if record.get("comment") else ""
        parts.append(
            f"<p>{_e(status.capitalize())} by the shop at {_e(record['decided_at'])} "
            f"(decision <code>{_e(record['decision_id'])}</code>){comment}.</p>"
        )
    parts.append("</article>")
    return "\n".join(parts)


def approvals_page(
    records: Iterable[Mapping[str, Any]],
    *,
    notes: Iterable[str] = (),
    notice: str | None = None,
    checks: Mapping[int, HubState] | None = None,
) -> bytes:
    """The inbox: configuration notes, an optional notice (a failed or refused decision), then every
    request; ``checks`` is what the hub said of the requests still pending here, by approval id."""
    records = list(records)
    checks = checks or {}
    pending = [r for r in records if r["status"] == "pending"]
    unknown = [r for r in pending if (c := checks.get(r["approval_id"])) is not None and c.error is not None]
    lead = f"{len(pending) - len(unknown)} pending."
    if unknown:
        problem = check_problem(checks[unknown[0]["approval_id"]])
        lead = f"{len(pending) - len(unknown)} pending, {len(unknown)} whose state is not known: {problem}."
    parts = [
        "<h1>Demo Shop · Approvals</h1>",
        '<p class="lead">Tool calls the hub holds until someone decides, here or in the hub console. '
        f"{_e(lead)}</p>",
    ]
    parts += [f'<p class="note">{_e(note)}</p>' for note in notes]
    if notice:
        parts.append(f'<p class="note failure" role="alert">{_e(notice)}</p>')
    if records:
        parts += [_card(record, checks.get(record["approval_id"])) for record in records]
    else:
        parts.append('<p class="empty">No approval requests yet.</p>')
    return _document("Demo Shop · Approvals", "\n".join(parts))


def failure_notice(approval_id: int, failure: Mapping[str, Any] | None, check: HubState | None = None) -> str:
    """A decision that did not go through; ``check`` is the state read after a 409, if any."""
    text = f"Approval #{approval_id}: " + (
        _failure_text(failure) if failure else "the decision could not be sent."
    )
    if check is not None and check.state is not None:
        text += " The hub still reports it pending."
    elif check is not None:
        text += f" The hub holds another decision, which could not be read: {check_problem(check)}."
    return text


def already_decided_notice(approval_id: int, decision: str, state: Mapping[str, Any]) -> str:
    """The truth behind a 409 ``approval_conflict``: someone decided in the hub first."""
    verb = "approve" if decision == "approved" else "deny"
    return (
        f"Approval #{approval_id} was already decided in the hub: {hub_decision_text(state)}. "
        f"The shop's {verb} was not applied."
    )


def error_page(status: int, code: str, message: str) -> bytes:
    body = (
        f"<h1>{status} · {_e(code)}</h1>\n<p>{_e(message)}</p>\n"
        '<p><a href="/approvals">Back to the approvals</a></p>'
    )
    return _document(f"{status} {code}", body)
