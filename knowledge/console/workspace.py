"""What knowledge adds to the console's workspace page and dashboard (registered in ``ready()``).

The workspace page belongs to the agent runtime, which may not import knowledge; it asks
:func:`agent_runtime.ports.workspace_sections` instead, and this module answers with the knowledge
bases the route names. The dashboard panel shows the indexing worker and its queue.
"""

from __future__ import annotations

from django.urls import reverse

from bailing.ui import tables
from bailing.ui.sections import Fact, Panel, Section
from knowledge.selectors.overview import indexing_status, knowledge_bases_named

PERMISSION = "knowledge.view_knowledgebase"


def workspace_knowledge_section(*, route, effective, user) -> Section | None:
    if not user.has_perm(PERMISSION):
        return None
    table = tables.Table(
        ["Knowledge base", "Name", "Status", "Embedding", "Ready", "Waiting", "Failed"],
        empty="This workspace names no knowledge base: turns and knowledge tools find nothing.",
    )
    for named in knowledge_bases_named(effective["knowledge"]["kb_ids"]):
        kb = named.base
        if kb is None:
            table.rows.append(
                [
                    tables.mono(named.kb_id),
                    tables.Cell("no such knowledge base", kind="muted"),
                    tables.badge("missing"),
                    tables.text(""),
                    tables.text(""),
                    tables.text(""),
                    tables.text(""),
                ]
            )
            continue
        table.rows.append(
            [
                tables.mono(kb.kb_id, href=reverse("console:knowledge_detail", args=[kb.kb_id])),
                tables.text(kb.name),
                tables.badge("enabled" if kb.enabled else "disabled"),
                tables.Cell(
                    "lexical only" if kb.embedding_provider == "none" else kb.embedding_provider,
                    kind="mono",
                    sub=f"{kb.embedding_model} · {kb.embedding_dim} dims" if kb.embedding_model else "",
                ),
                tables.Cell(str(named.ready), kind="mono"),
                tables.Cell(str(named.waiting), kind="mono"),
                tables.Cell(str(named.failed), kind="mono"),
            ]
        )
    return Section(
        order=20,
        title="Knowledge bases",
        note="named in the knowledge settings; disabled or missing ones are left out of retrieval",
        table=table,
    )


def indexing_panel(user) -> list[Panel]:
    """The knowledge worker's heartbeat and the indexing queue (depth, failures, lag)."""
    if not user.has_perm(PERMISSION):
        return []
    status = indexing_status()
    if status.heartbeat_age_s is None:
        heartbeat = Fact(
            "Worker heartbeat",
            "no worker",
            tone="bad",
            note="none has reported: start one with manage.py knowledge_worker",
        )
    else:
        heartbeat = Fact(
            "Worker heartbeat",
            f"{tables.duration(status.heartbeat_age_s)} ago",
            tone="ok" if status.worker_ok else "bad",
            note=(
                f"{status.workers} worker{'s' if status.workers != 1 else ''} alive"
                if status.worker_ok
                else f"stale: older than {tables.duration(status.max_age_s)}"
            ),
        )
    if status.waiting:
        queue = Fact(
            "Queue",
            f"{status.waiting} waiting",
            tone="warn",
            note=f"{status.leased} being indexed now" if status.leased else "none being indexed now",
        )
        lag = Fact(
            "Indexing lag",
            tables.duration(status.lag_s),
            note=f"oldest queued {tables.utc_iso(status.oldest_waiting_at)}",
        )
    else:
        queue = Fact("Queue", "empty", tone="ok", note="every document is indexed or failed")
        lag = Fact("Indexing lag", "none")
    failed = Fact(
        "Failed documents",
        str(status.failed),
        tone="bad" if status.failed else "ok",
        note="see the knowledge bases' documents" if status.failed else "",
    )
    return [
        Panel(
            order=40,
            title="Knowledge indexing",
            note="knowledge_worker and its queue",
            facts=[heartbeat, queue, lag, failed],
            more_url=reverse("console:knowledge_list"),
            more_label="Knowledge bases",
        )
    ]
