"""HTTP benchmark: agent endpoints against a bare DRF endpoint, interleaved, under the real gunicorn config.

Starts the hub under ``bailing/gunicorn.conf.py`` on a loopback port (``BAILING_DEBUG`` off, workers
never recycled, ``--workers`` / ``--threads`` / ``--worker-class`` / ``--port``) against the configured
database, and a Demo Shop for the tool-invocation endpoint. It creates a throwaway benchmark client,
two workspaces (one with inline knowledge, one without), an agent session, a tool provider whose inline
spec has 50 operations (stored through ``provider_spec_store``, as a refresh would), a knowledge base
holding the demo knowledge (indexed with the local MiniLM model) and the Demo Shop provider of
``bailing_bench_calls``; it removes them afterwards.

Each endpoint is first called once in process to count the SQL it sends (libpq's protocol trace:
statements without BEGIN/COMMIT/SAVEPOINT/RELEASE, and round trips) and to check it answers, then
warmed up. Then ``--rounds`` rounds each run the bare endpoint, every selected endpoint (in an order
rotated per round) and the bare endpoint again, ``--duration`` seconds each with ``wrk`` (a Lua script;
a Python keep-alive loop when wrk is not installed). Per run: req/s, p50/p99 latency, errors, and the
CPU time (utime + stime from ``/proc``) of the gunicorn master and its workers plus every process of
the local PostgreSQL server (the postmaster and its children, autovacuum and checkpointer included)
divided by the requests answered. Per endpoint the report gives the median over rounds of its req/s ÷
the same round's bare req/s, and of the bare CPU per request ÷ its CPU per request. Other load on the
machine is not counted in the CPU figures, but it slows both sides of a ratio.

Knowledge searches, capability searches, MCP searches and new turns rotate through
:data:`BENCH_QUERIES` and put a fresh order number into every query, so no query text repeats within
or across runs: a cache of query vectors cannot flatter the figures.

``--json`` writes every figure (machine, options, per-round raw numbers, medians, git commit);
``--plot`` draws the ratios per endpoint (with ``--baseline OLD.json``: before and after, and the
goal of each endpoint). ``--suite invocations`` runs ``bailing_bench_calls`` instead: the governance
overhead of a tool call through the hub over the same signed business request sent directly.

``--suite data-policy`` measures the tool invocation endpoint and the knowledge search endpoint each
on two workspaces that differ only in their data policy: none, and every built-in detector with
action ``redact`` on both surfaces (:data:`DATA_POLICY_ALL`). The invocation reads the Demo Shop's
paid orders, whose SO-1007 carries a card number, an email, an injection and a tracking pixel, so the
policy-on answer is really redacted (and its raw answer stored sealed). Every round runs the bare
endpoint, then each endpoint's two variants back to back — which goes first alternates per round, as
does the order of the endpoints — then the bare endpoint again. Per variant the report gives the
median over rounds of req/s, p50 and p95 latency and CPU per request; per endpoint the median of the
per-round ratio policy-on ÷ policy-off req/s against the goal of issue 23 (≥ 0.9).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections, connection
from django.test import Client as DjangoClient

from agent_runtime.data_policy import BUILTIN_DETECTORS
from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentSession, Client, Route, ToolInvocation, ToolProvider
from agent_runtime.selectors.catalog import route_catalog
from agent_runtime.services.tool_specs import provider_spec_store
from agent_runtime.tools import compile_spec
from bailing.audit.actor import Actor
from bailing.db.urls import database_url
from benchmarks.fixtures import agent_session_open
from benchmarks.harness import (
    CLOCK_TICKS,
    HEX_MARK,
    NUMBER_MARK,
    RUN_NUMBER_SPAN,
    LoadResult,
    LoadSpec,
    body_for,
    cpu_per_request_ms,
    git_commit,
    gunicorn_server,
    libpq_traced,
    machine_info,
    median,
    parse_libpq_trace,
    plot_policy_pairs,
    plot_ratios,
    postmaster_pid,
    process_table,
    python_load,
    round_figures,
    tree_ticks,
    wrk_load,
)
from benchmarks.management.commands import bailing_bench_calls as calls
from benchmarks.spans import WaitSampler, receiver_available, request_breakdown, span_receiver, tracing_env
from benchmarks.views import FLOOR_TABLE_CREATE, FLOOR_TABLE_DROP
from front.launcher import stop_process
from knowledge.config import validate_knowledge_base_config
from knowledge.models import KnowledgeBase
from knowledge.services.agent_knowledge import agent_knowledge_search
from knowledge.services.bases import knowledge_base_delete, knowledge_base_upsert
from knowledge.services.documents import documents_put_files
from knowledge.services.indexing import documents_index

RESULT_SCHEMA = "bailing_bench.v1"
BENCH_KEY = "bench-workspace"
BENCH_PLAIN_KEY = "bench-workspace-plain"  # the same tools, no knowledge
BENCH_CLIENT = "bench-agent"
BENCH_PROVIDER = "bench-tools"
BENCH_KB = "bench-knowledge"
BENCH_TOOL_COUNT = 50
# Questions an agent of the demo shop's support desk asks; each request appends a fresh order number.
BENCH_QUERIES = (
    "how long does a refund take to reach the customer",
    "refund the latest order of a customer",
    "can a customer get a refund for an order that is still processing",
    "who has to approve a refund above 500",
    "is a partial refund allowed",
    "how long does a bank transfer refund take",
    "the parcel has not arrived after two weeks, what can we do",
    "where is the shipment and when will it be delivered",
    "can the delivery address be changed after shipping",
    "how do I cancel an order that has not shipped yet",
    "the customer wants to cancel after the order was shipped",
    "what happens to a coupon when an order is cancelled",
    "how many days does the customer have to return an item",
    "the returned item arrived damaged, is the refund still paid",
    "who pays the return shipping costs",
    "can an opened product be returned",
    "exchange a pair of shoes for a different size",
    "the customer was charged twice for the same order",
    "what is the refund id and where does the customer see it",
    "the order shows delivered but the customer has nothing",
    "express shipping was paid but the parcel came late",
    "can we ship to a post office box",
    "how are international shipments handled at customs",
    "which carrier delivers orders to the islands",
    "the tracking number does not work",
    "a gift order should not show prices on the packing slip",
    "split an order into two shipments",
    "the customer wants an invoice with a company name",
    "correct the VAT number on an invoice",
    "send the invoice again by email",
    "a coupon code was not applied at checkout",
    "the loyalty points are missing after a purchase",
    "list the open support tickets of this customer",
    "escalate a ticket about a missing refund",
    "the customer is angry about a late delivery, offer compensation",
    "is there a restocking fee for large items",
    "return an item bought during the holiday sale",
    "can a refund go to a different card",
    "the card on file has expired, where does the refund go",
    "refund only the shipping fee",
    "the customer received the wrong colour",
    "one item of the order is missing from the parcel",
    "the order was cancelled by mistake, can it be restored",
    "what does the status processing mean",
    "how long do we keep an order before it is shipped",
    "reserve stock for a customer who will pay tomorrow",
    "the product is out of stock, when will it be back",
    "change the quantity of an order that is already paid",
    "can two orders be combined into one delivery",
    "the customer moved, update the address on the next order",
    "退款多久能到账",
    "订单已经发货了还能取消吗",
    "退货的运费由谁承担",
    "the courier left the parcel with a neighbour",
    "the customer refuses to sign for the delivery",
    "what proof do we need for a damaged item claim",
    "refund a customer who paid with a gift card",
    "the customer asks for a refund after 45 days",
    "approve the pending refund request",
    "check the payment status before shipping",
)
# A workspace of 50 tools in a handful of domains, so lexical ranking has real work to do.
_DOMAINS = (
    "order",
    "refund",
    "customer",
    "inventory",
    "shipment",
    "invoice",
    "coupon",
    "staff",
    "ticket",
    "report",
)
_ACTIONS = ("get", "search", "list", "create", "update")
MCP_VERSION = "2026-07-28"
INVOCATION_KEY = "tool_invocation_read"
INVOCATION_NAME = f"POST tool-invocations ({calls.READ[0]}, readonly)"

# --suite data-policy: the same workspace without and with a data policy of every built-in detector.
POLICY_SCHEMA = "bailing_bench.data_policy.v1"
BENCH_POLICY_KEY = "bench-workspace-policy"  # BENCH_KEY's knowledge and tools, under DATA_POLICY_ALL
DATA_POLICY_ALL = {
    "detectors": list(BUILTIN_DETECTORS),
    "action": "redact",
    "apply_to": ["tool_results", "knowledge"],
}
# The paid orders of alice: SO-1007's notes hold a card, an email, an injection and a tracking pixel.
POLICY_READ = ("list_orders", {"status": "paid"})
POLICY_GOAL = 0.9  # issue 23: policy-on throughput within 10 % of policy-off
POLICY_ENDPOINTS = {
    "tool_invocation": f"POST tool-invocations ({POLICY_READ[0]} paid)",
    "knowledge_search": "POST knowledge/search (hybrid, 3 hints)",
}
VARIANTS = ("off", "on")


def query_text(index: int) -> str:
    """The ``index``-th benchmark question (cycling) with the fresh order number marker."""
    return f"{BENCH_QUERIES[index % len(BENCH_QUERIES)]} (order SO-{NUMBER_MARK})"


@dataclass(frozen=True)
class Target:
    """One endpoint under load: ``goal`` is its req/s ratio goal (issue 14), ``sql_goal`` its goal for
    SQL statements per request, ``check`` validates the in-process answer (``None``: any 200).
    ``floor`` names the key of the floor target measured with it (issue 26: what its work must cost);
    a floor target itself has ``is_floor``."""

    key: str
    name: str
    load: LoadSpec
    goal: float | None = None
    sql_goal: int | None = None
    check: object = None
    floor: str | None = None
    is_floor: bool = False


# Issue 26: an endpoint's cost (time per request at the same concurrency, and CPU per request) at most
# this many times its floor's; audited actions at least AUDIT_FLOOR_GOAL of the bare commit rate.
FLOOR_GOAL = 1.5
FLOOR_PREFIX = "floor."
# Each work path and its floor (benchmarks/views.py): (floor key, name, path under _bench/).
FLOORS = {
    "knowledge_search": "floor.knowledge",
    "mcp_search_knowledge": "floor.knowledge",
    "turn_new_knowledge": "floor.turn_knowledge",
    "turn_new": "floor.turn",
    INVOCATION_KEY: "floor.call",
}
# The traced run's endpoints (where the waiting goes): the governed call and the new turns.
BREAKDOWN_KEYS = (INVOCATION_KEY, "turn_new_knowledge", "turn_new")


def _bench_spec() -> dict:
    """An OpenAPI 3.1 document with ``BENCH_TOOL_COUNT`` ACC-declared operations (reads and writes)."""
    paths: dict[str, dict] = {}
    for index in range(BENCH_TOOL_COUNT):
        domain = _DOMAINS[index % len(_DOMAINS)]
        action = _ACTIONS[index // len(_DOMAINS) % len(_ACTIONS)]
        write = action in ("create", "update")
        operation = {
            "operationId": f"{domain}_{action}",
            "summary": f"{action.capitalize()} {domain} records of the benchmark shop.",
            "description": f"Benchmark operation {index}: {action} on {domain} data, filtered and paged.",
            "x-agent-capability": {
                "version": 1,
                "enabled": True,
                "scope": f"{domain}.{'write' if write else 'read'}",
                "guidance": {"when_to_use": f"Use to {action} {domain} records.", "returns": "JSON records."},
            },
        }
        if write:
            operation["requestBody"] = {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {"id": {"type": "string"}, "note": {"type": "string"}},
                            "required": ["id"],
                        }
                    }
                },
            }
        else:
            operation["parameters"] = [
                {"name": "q", "in": "query", "schema": {"type": "string"}},
                {"name": "page", "in": "query", "schema": {"type": "integer", "minimum": 1}},
            ]
        paths[f"/{domain}/{action}"] = {"post" if write else "get": operation}
    return {"openapi": "3.1.0", "info": {"title": "Benchmark tools", "version": "1"}, "paths": paths}


def _mcp_body(method: str, params: dict) -> str:
    """A 2026-07-28 MCP request (the per-request envelope in ``params._meta``)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}},
        ensure_ascii=False,
    )


def _mcp_headers(base: dict[str, str], method: str, name: str | None = None) -> dict[str, str]:
    headers = {**base, "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MCP_VERSION}
    headers["Mcp-Method"] = method
    if name:
        headers["Mcp-Name"] = name
    return headers


def _mcp_ok(response) -> None:
    # A JSON-RPC error or a failed tool is still HTTP 200: measure only calls that worked.
    answer = response.json()
    if "result" not in answer or answer["result"].get("isError"):
        raise CommandError(f"the MCP call answered {answer}")


def _invocation_ok(response) -> None:
    if response.json().get("state") != "executed":
        raise CommandError(f"the tool invocation answered {response.json().get('state')}")


def _json(value: dict) -> str:
    return json.dumps(value, ensure_ascii=False)


class Command(BaseCommand):
    help = "Benchmark agent endpoints against a bare DRF endpoint, interleaved, under the gunicorn config."

    def add_arguments(self, parser):
        parser.add_argument(
            "--duration",
            "--seconds",
            dest="duration",
            type=float,
            default=10.0,
            help="seconds per run (wrk counts whole seconds; default 10)",
        )
        parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3, min 1)")
        parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per endpoint")
        parser.add_argument(
            "--connections",
            type=int,
            default=16,
            help="concurrent wrk connections per endpoint (default 16; the invocation suite uses at most 8)",
        )
        calls.add_server_arguments(parser)
        parser.add_argument(
            "--suite",
            choices=("endpoints", "invocations", "data-policy", "front"),
            default="endpoints",
            help="endpoints: agent endpoints against a bare DRF endpoint; invocations: the governed call "
            "path against the same signed call sent directly (bailing_bench_calls); data-policy: the tool "
            "invocation and knowledge search endpoints with the workspace's data policy off and on "
            "(every built-in detector, redact), interleaved; front: the server as shipped (the front before "
            "gunicorn) against gunicorn alone on the bare endpoint and three agent endpoints, then idle "
            "keep-alive connections held by the front",
        )
        parser.add_argument(
            "--idle",
            type=int,
            default=2000,
            help="--suite front: idle keep-alive connections to hold open (default 2000; 0: skip)",
        )
        parser.add_argument(
            "--only",
            action="append",
            metavar="TEXT",
            help="run only the endpoints whose name or key contains TEXT (repeatable; the bare endpoint "
            "always runs, it is the reference)",
        )
        parser.add_argument(
            "--no-floors",
            dest="floors",
            action="store_false",
            help="do not measure the floors (what each work path must cost, issue 26) beside the endpoints",
        )
        parser.add_argument(
            "--no-breakdown",
            dest="breakdown",
            action="store_false",
            help="skip the traced run that splits the governed call's and the new turns' time by kind",
        )
        parser.add_argument(
            "--breakdown-seconds",
            type=float,
            default=5.0,
            help="seconds per traced run (each selected path at --connections and at 1; default 5)",
        )
        parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write all figures")
        parser.add_argument("--plot", type=Path, default=None, metavar="PATH.png", help="draw the ratios")
        parser.add_argument(
            "--baseline",
            type=Path,
            default=None,
            metavar="OLD.json",
            help="an earlier --json result: the plot shows before/after, the table a before column",
        )

    # --- fixtures --------------------------------------------------------------------------------------
    def _knowledge_base(self) -> None:
        actor = Actor.system("bailing_bench")
        data = validate_knowledge_base_config(
            {"kb_id": BENCH_KB, "name": "Benchmark knowledge"}, path="bench"
        )
        kb, _, _ = knowledge_base_upsert(data=data, actor=actor)
        queued = documents_put_files(
            kb=kb,
            paths=sorted((Path(settings.BASE_DIR) / "examples" / "demo-knowledge").glob("*.md")),
            source_prefix="bench:",
            actor=actor,
        )
        documents_index(document_ids=queued)

    def _fixtures(self, *, policy: bool = False) -> tuple[str, Route, AgentSession]:
        """The benchmark workspaces, client and session; with ``policy`` also :data:`BENCH_POLICY_KEY`
        (the knowledge workspace under :data:`DATA_POLICY_ALL`)."""
        self._knowledge_base()
        provider, _ = ToolProvider.objects.update_or_create(
            name=BENCH_PROVIDER,
            defaults={"base_url": "http://127.0.0.1:9", "spec_source": ToolProvider.SpecSource.INLINE},
        )
        spec = _bench_spec()
        provider_spec_store(
            provider=provider,
            spec=spec,
            result=compile_spec(spec, provider=BENCH_PROVIDER),
            actor=Actor.system("bailing_bench"),
        )
        client, _ = Client.objects.update_or_create(
            app_id=BENCH_CLIENT,
            defaults={
                "name": "Benchmark agent",
                "hub_consent": True,
                "allowed_routes": [BENCH_KEY, BENCH_PLAIN_KEY, *([BENCH_POLICY_KEY] if policy else [])],
                "rate_limit_per_min": 0,
            },
        )
        tools = {
            "sources": [{"provider": BENCH_PROVIDER, "allow": ["*"]}],
            "agent_direct": {
                "enabled": True,
                "write_tools": [
                    f"{domain}_{action}" for domain in _DOMAINS for action in ("create", "update")
                ],
            },
        }
        common = {
            "target_config": {"system_prompt": "Benchmark."},
            "agent_client": {"enabled": True},
            "permission": "readwrite",
            "tools": tools,
        }
        route, _ = Route.objects.update_or_create(
            route_key=BENCH_KEY,
            defaults={
                **common,
                "name": "Benchmark workspace",
                "knowledge": {"kb_id": BENCH_KB, "top_k": 4, "min_score": 0.3},
            },
        )
        Route.objects.update_or_create(
            route_key=BENCH_PLAIN_KEY, defaults={**common, "name": "Benchmark workspace without knowledge"}
        )
        if policy:
            Route.objects.update_or_create(
                route_key=BENCH_POLICY_KEY,
                defaults={
                    **common,
                    "name": "Benchmark workspace under a data policy",
                    "knowledge": route.knowledge,
                    "data_policy": DATA_POLICY_ALL,
                },
            )
        session, access = agent_session_open(
            client=client,
            routes=[BENCH_KEY, BENCH_PLAIN_KEY, *([BENCH_POLICY_KEY] if policy else [])],
            subject="bench",
            device_label="benchmark",
            access_hours=4,
        )
        return access, route, session

    def _cleanup(self) -> None:
        kb = KnowledgeBase.objects.filter(kb_id=BENCH_KB).first()
        if kb is not None:
            knowledge_base_delete(kb=kb, actor=Actor.system("bailing_bench"))
        Client.objects.filter(app_id=BENCH_CLIENT).delete()
        Route.objects.filter(route_key__in=[BENCH_KEY, BENCH_PLAIN_KEY, BENCH_POLICY_KEY]).delete()
        ToolProvider.objects.filter(name=BENCH_PROVIDER).delete()
        calls.calls_cleanup()
        with connection.cursor() as cursor:
            cursor.execute(FLOOR_TABLE_DROP)

    def _targets(self, nonce: str, invocation: tuple[str, str] | None) -> list[Target]:
        access, route, session = self._fixtures()
        identity = AgentIdentity(session=session, client=session.client)
        catalog = route_catalog(route=route, identity=identity)
        auth = {"Authorization": f"Bearer {access}"}
        json_auth = {**auth, "Content-Type": "application/json"}
        api = "/agent-api/v1"
        knowledge_path = f"{api}/workspaces/{BENCH_KEY}/knowledge"
        hints = agent_knowledge_search(
            identity=identity,
            route_key=BENCH_KEY,
            query="how long does a refund take to reach the customer",
            limit=3,
        )["hints"]
        if not hints:
            raise CommandError("the benchmark knowledge search found nothing to read")
        queries = range(len(BENCH_QUERIES))

        def turn_bodies(prefix: str) -> tuple[str, ...]:
            return tuple(
                _json(
                    {
                        "client_conversation_id": f"{prefix}-{nonce}-{NUMBER_MARK}",
                        "client_turn_id": "turn-1",
                        "user_message_id": f"message-{NUMBER_MARK}",
                        "user_input": query_text(index),
                    }
                )
                for index in queries
            )

        def search_spec(path: str, limit: int) -> LoadSpec:
            """A POST search over every benchmark question, ``limit`` results each."""
            bodies = tuple(_json({"query": query_text(i), "limit": limit}) for i in queries)
            return LoadSpec("POST", path, json_auth, bodies)

        replay = _json(
            {
                "client_conversation_id": f"replay-{nonce}",
                "client_turn_id": "turn-1",
                "user_message_id": "message-replay",
                "user_input": "Where is order 1042, and can the customer get a refund?",
            }
        )
        mcp_search = tuple(
            _mcp_body(
                "tools/call", {"name": "search_knowledge", "arguments": {"query": query_text(i), "limit": 3}}
            )
            for i in queries
        )
        targets = [
            Target("bare", "bare DRF endpoint", LoadSpec("GET", f"{api}/_bench/bare", {})),
            Target("workspaces", "GET /workspaces", LoadSpec("GET", f"{api}/workspaces", auth), goal=0.5),
            Target(
                "bootstrap",
                "GET /workspaces/:key/bootstrap",
                LoadSpec("GET", f"{api}/workspaces/{BENCH_KEY}/bootstrap", auth),
                goal=0.5,
                sql_goal=2,
            ),
            Target(
                "capability_search",
                f"POST capabilities/search ({catalog.authorized_total} tools)",
                search_spec(f"{api}/workspaces/{BENCH_KEY}/capabilities/search", 12),
                goal=0.4,
            ),
            Target(
                "tool_detail",
                "GET /tools/:name (detail)",
                LoadSpec(
                    "GET",
                    f"{api}/tools/refund_get?route={BENCH_KEY}&capability_revision={catalog.revision}",
                    auth,
                ),
                goal=0.4,
            ),
            Target(
                "knowledge_search",
                "POST knowledge/search (hybrid, 3 hints)",
                search_spec(f"{knowledge_path}/search", 3),
                goal=0.15,
                floor=FLOORS["knowledge_search"],
            ),
            Target(
                "knowledge_read",
                "POST knowledge/read (16 KiB page)",
                LoadSpec(
                    "POST",
                    f"{knowledge_path}/read",
                    json_auth,
                    (_json({"ref": hints[0]["ref"], "max_bytes": 16384}),),
                ),
            ),
            Target(
                "turn_new_knowledge",
                "POST turns (new turn, inline knowledge)",
                LoadSpec("POST", f"{api}/workspaces/{BENCH_KEY}/turns", json_auth, turn_bodies("bench")),
                goal=0.15,
                sql_goal=12,
                floor=FLOORS["turn_new_knowledge"],
            ),
            Target(
                "turn_new",
                "POST turns (new turn, no knowledge)",
                LoadSpec(
                    "POST", f"{api}/workspaces/{BENCH_PLAIN_KEY}/turns", json_auth, turn_bodies("plain")
                ),
                goal=0.3,
                sql_goal=12,
                floor=FLOORS["turn_new"],
            ),
            Target(
                "turn_replay",
                "POST turns (idempotent replay)",
                LoadSpec("POST", f"{api}/workspaces/{BENCH_KEY}/turns", json_auth, (replay,)),
                goal=0.4,
            ),
            Target(
                "mcp_tools_list",
                "MCP tools/list",
                LoadSpec(
                    "POST",
                    f"/mcp/{BENCH_KEY}",
                    _mcp_headers(json_auth, "tools/list"),
                    (_mcp_body("tools/list", {}),),
                ),
                check=_mcp_ok,
            ),
            Target(
                "mcp_search_knowledge",
                "MCP tools/call search_knowledge (limit 3)",
                LoadSpec(
                    "POST",
                    f"/mcp/{BENCH_KEY}",
                    _mcp_headers(json_auth, "tools/call", "search_knowledge"),
                    mcp_search,
                ),
                check=_mcp_ok,
                floor=FLOORS["mcp_search_knowledge"],
            ),
        ]
        if invocation is not None:
            calls_access, revision = invocation
            body = {
                "invocation_id": HEX_MARK,
                "route": calls.ROUTE,
                "tool": calls.READ[0],
                "arguments": calls.READ[1],
                "capability_revision": revision,
            }
            targets.append(
                Target(
                    INVOCATION_KEY,
                    INVOCATION_NAME,
                    LoadSpec(
                        "POST",
                        f"{api}/tool-invocations",
                        {"Authorization": f"Bearer {calls_access}", "Content-Type": "application/json"},
                        (_json(body),),
                    ),
                    goal=0.3,
                    check=_invocation_ok,
                    floor=FLOORS[INVOCATION_KEY],
                )
            )
        return targets

    def _floor_targets(self, targets: list[Target], sql: dict[str, dict]) -> list[Target]:
        """The floors of the selected ``targets`` (benchmarks/views.py), each once, sent the same
        bodies as its endpoint; a turn's floor commits rows of the size its in-process answer had."""
        by_key = {target.key: target for target in targets}
        floor_base = "/agent-api/v1/_bench/floor"
        json_only = {"Content-Type": "application/json"}
        made: dict[str, Target] = {}
        for key, floor in FLOORS.items():
            target = by_key.get(key)
            if target is None or floor in made:
                continue
            if floor == "floor.knowledge":
                bodies = tuple(_json({"query": query_text(i), "limit": 3}) for i in range(len(BENCH_QUERIES)))
                spec = LoadSpec("POST", f"{floor_base}/knowledge?kb={BENCH_KB}", json_only, bodies)
                name = "floor: query embedding + lanes (limit 3)"
            elif floor in ("floor.turn_knowledge", "floor.turn"):
                size = (sql.get(key) or {}).get("response_bytes") or 4096
                query = f"rows=4&bytes={size}" + (
                    f"&kb={BENCH_KB}&limit=4" if floor == "floor.turn_knowledge" else ""
                )
                spec = LoadSpec("POST", f"{floor_base}/turn?{query}", json_only, target.load.bodies)
                name = (
                    "floor: "
                    + ("embedding + lanes + " if "knowledge" in floor else "")
                    + "1 commit of 4 rows"
                )
            else:
                query = (
                    f"provider={calls.PROVIDER}&tool={calls.READ[0]}&subject={calls.SUBJECT}"
                    f"&client={calls.CLIENT}"
                )
                spec = LoadSpec("POST", f"{floor_base}/call?{query}", json_only, (_json(calls.READ[1]),))
                name = "floor: direct signed call + 2 commits"
            made[floor] = Target(floor, name, spec, is_floor=True)
        return list(made.values())

    # --- measuring -------------------------------------------------------------------------------------
    def _sql(self, target: Target, nonce: str) -> dict:
        """Send the request twice in process (the first warms caches, e.g. ``last_seen_at``) and trace
        what the second sends to PostgreSQL."""
        spec = target.load
        client = DjangoClient()
        extra = {
            "HTTP_" + name.upper().replace("-", "_"): value
            for name, value in spec.headers.items()
            if name.lower() != "content-type"
        }
        extra["HTTP_HOST"] = "127.0.0.1"
        sent = [0]

        def send():
            sent[0] += 1
            if spec.method == "GET":
                return client.get(spec.path, **extra)
            body = body_for(
                spec.bodies[sent[0] % len(spec.bodies)],
                number=9 * RUN_NUMBER_SPAN * 100 + sent[0],
                # Unique per target too: two targets may send the same body to different routes.
                hex_nonce=f"{nonce[:32]}{zlib.crc32(target.key.encode()):08x}ffffffff",
                thread=0,
                counter=sent[0],
            )
            return client.generic(
                spec.method, spec.path, body.encode(), content_type="application/json", **extra
            )

        def checked(response):
            if response.status_code != 200:
                raise CommandError(
                    f"{target.name} answered {response.status_code}: {response.content[:300]!r}"
                )
            if target.check is not None:
                target.check(response)

        checked(send())
        # The test client does not run close_old_connections around a request (gunicorn's requests
        # do): run it here, so the connection health check (CONN_HEALTH_CHECKS) a served request
        # pays is counted too. Once before the trace, so an old connection is replaced outside it.
        close_old_connections()
        connection.ensure_connection()
        with libpq_traced(connection) as trace:
            close_old_connections()
            response = send()
        checked(response)
        count = parse_libpq_trace(trace[0])
        return {
            "statements": count.statements,
            "round_trips": count.round_trips,
            "transaction_control": count.transaction_control,
            "texts": [text[:160] for text in count.texts],
            "response_bytes": len(response.content),
        }

    def _cpu(self, roots: dict[str, int | None]) -> dict[str, int | None]:
        table = process_table()
        return {name: (tree_ticks(table, [pid]) if pid else None) for name, pid in roots.items()}

    def _run(
        self, port: int, target: Target, seconds: float, options: dict, run_index: int, nonce: str, roots
    ):
        load = wrk_load if shutil.which("wrk") else python_load
        executed_before = self._executed() if target.key == INVOCATION_KEY else None
        before = self._cpu(roots)
        result: LoadResult = load(
            port,
            target.load,
            seconds=seconds,
            connections=options["connections"],
            base=(run_index + 1) * RUN_NUMBER_SPAN,
            hex_nonce=f"{nonce[:40]}{run_index:08x}",
        )
        after = self._cpu(roots)
        executed = None if executed_before is None else self._executed() - executed_before
        ticks = {
            name: (after[name] - before[name])
            if after[name] is not None and before[name] is not None
            else None
            for name in roots
        }
        # Without a visible PostgreSQL (a remote server), the CPU figures are gunicorn's alone.
        total = (
            None if ticks["gunicorn"] is None else sum(value for value in ticks.values() if value is not None)
        )
        return {
            "requests": result.requests,
            "seconds": result.seconds,
            "rps": result.rps,
            "errors": result.errors,
            "timeouts": result.timeouts,
            "p50_ms": result.p50_ms,
            "p95_ms": result.p95_ms,
            "p99_ms": result.p99_ms,
            "cpu_ticks": total,
            "cpu_ticks_gunicorn": ticks.get("gunicorn"),
            "cpu_ticks_postgres": ticks.get("postgres"),
            "tool": result.tool,
            # Tool invocations that really executed (a busy provider's answer is a 200 and stores nothing).
            "executed": executed,
        }

    @staticmethod
    def _executed() -> int:
        return ToolInvocation.objects.filter(
            client__app_id=calls.CLIENT, status=ToolInvocation.Status.EXECUTED
        ).count()

    def _progress(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def _check_options(self, options) -> None:
        if options["rounds"] < 1:
            raise CommandError("--rounds must be at least 1")
        if options["duration"] <= 0 or options["connections"] < 1 or options["warmup"] < 0:
            raise CommandError("--duration and --connections must be positive, --warmup not negative")
        if options["plot"] is not None:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise CommandError("--plot needs matplotlib (pip install 'matplotlib>=3.8')") from None

    def handle(self, *args, **options):
        if options["suite"] == "front":
            self._front_suite(options)
            return
        if options["suite"] == "data-policy":
            self._data_policy_suite(options)
            return
        if options["suite"] == "invocations":
            call_command(
                "bailing_bench_calls",
                seconds=options["duration"],
                connections=min(options["connections"], 8),
                workers=options["workers"],
                threads=options["threads"],
                worker_class=options["worker_class"],
                port=options["port"],
                stdout=self.stdout,
            )
            return
        self._check_options(options)
        baseline = None
        if options["baseline"] is not None:
            try:
                baseline = json.loads(options["baseline"].read_text())
            except (OSError, ValueError) as error:
                raise CommandError(f"--baseline: {error}") from None
            if baseline.get("schema") != RESULT_SCHEMA:
                raise CommandError(f"--baseline is not a {RESULT_SCHEMA} result")
        server_options = calls.server_options(options)
        started_at = datetime.now(UTC)
        machine_before = machine_info()
        nonce = secrets.token_hex(20)
        wanted = options["only"]
        shop = None
        try:
            invocation = None
            if not wanted or any(text in INVOCATION_KEY or text in INVOCATION_NAME for text in wanted):
                shop, base_url, secret = calls.demo_shop_start()
                calls_session, calls_access = calls.calls_fixtures(base_url, secret)
                revision = route_catalog(
                    route=Route.objects.get(route_key=calls.ROUTE),
                    identity=AgentIdentity(session=calls_session, client=calls_session.client),
                ).revision
                invocation = (calls_access, revision)
            targets = self._targets(nonce, invocation)
            targets = _only(targets, wanted)
            self._progress(f"SQL per request (in process, libpq trace) of {len(targets) - 1} endpoints ...")
            sql = {target.key: self._sql(target, nonce) for target in targets if target.key != "bare"}
            if options["floors"]:
                targets += self._floor_targets(targets, sql)
            with connection.cursor() as cursor:
                cursor.execute(FLOOR_TABLE_CREATE)
            postgres, pg_version = _postgres()
            env = {"BAILING_BENCH_ENDPOINTS": "true", "DATABASE_URL": database_url(connection.settings_dict)}
            with gunicorn_server(**server_options, extra_env=env) as server:
                roots = {"gunicorn": server.pid, "postgres": postgres}
                self._progress(
                    f"hub on 127.0.0.1:{server.port} (gunicorn pid {server.pid}, {server_options['workers']} "
                    f"workers, BAILING_DEBUG off, no worker recycling); PostgreSQL "
                    + (f"postmaster pid {postgres}" if postgres else "not visible here: CPU not counted")
                )
                runs = self._measure(server.port, targets, options, nonce, roots)
            breakdown = None
            if options["breakdown"]:
                breakdown = self._breakdown(targets, options, nonce, server_options)
        finally:
            try:
                self._verify_invocations(options)
                self._cleanup()
            finally:
                if shop is not None:
                    stop_process(shop, timeout=10)
        result = self._result(
            targets, sql, runs, options, server_options, started_at, machine_before, pg_version, postgres
        )
        result["breakdown"] = breakdown
        self._report(result, baseline)
        if options["json"] is not None:
            options["json"].write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
            self.stdout.write(f"figures written to {options['json']}")
        if options["plot"] is not None:
            plot_ratios(options["plot"], result, baseline)
            self.stdout.write(f"plot written to {options['plot']}")

    def _verify_invocations(self, options) -> None:
        self.not_executed = (
            ToolInvocation.objects.filter(client__app_id=calls.CLIENT)
            .exclude(status=ToolInvocation.Status.EXECUTED)
            .count()
        )

    def _measure(
        self, port: int, targets: list[Target], options: dict, nonce: str, roots, order_of=None
    ) -> list[dict]:
        """Warm up every target, then ``--rounds`` rounds of: bare, the endpoints, bare. The endpoints'
        order in round ``number`` (0-based) is ``order_of(number)``; by default rotated per round."""
        bare, endpoints = targets[0], targets[1:]
        run_index = 0
        if options["warmup"] > 0:
            for target in targets:
                self._progress(f"warm-up  {target.name}: {options['warmup']:.0f} s")
                self._run(port, target, options["warmup"], options, run_index, nonce, roots)
                run_index += 1
        runs: list[dict] = []
        rounds = options["rounds"]
        per_round = len(endpoints) + 2
        for number in range(rounds):
            shift = number % len(endpoints) if endpoints else 0
            middle = order_of(number) if order_of else endpoints[shift:] + endpoints[:shift]
            order = [(bare, "start"), *((t, "") for t in middle), (bare, "end")]
            for position, (target, where) in enumerate(order, 1):
                figures = self._run(port, target, options["duration"], options, run_index, nonce, roots)
                run_index += 1
                cpu = figures["cpu_ticks"]
                cpu_text = (
                    f"{cpu * 1000 / CLOCK_TICKS / figures['requests']:6.2f} ms CPU/req"
                    if cpu is not None and figures["requests"]
                    else "CPU n/a"
                )
                self._progress(
                    f"round {number + 1}/{rounds} [{position:2d}/{per_round}] {target.name[:44]:44} "
                    f"{figures['rps']:8.1f} req/s  p50 {figures['p50_ms']:7.2f} ms  "
                    f"p99 {figures['p99_ms']:7.2f} ms  {cpu_text}  errors {figures['errors']}"
                )
                runs.append(
                    {"round": number + 1, "key": target.key, "position": where or position, **figures}
                )
        return runs

    # --- the result --------------------------------------------------------------------------------------
    def _result(self, targets, sql, runs, options, server_options, started_at, machine, pg_version, postgres):
        endpoints = []
        for target in targets:
            rounds = []
            for number in range(1, options["rounds"] + 1):
                bare = [run for run in runs if run["round"] == number and run["key"] == "bare"]
                mine = [run for run in runs if run["round"] == number and run["key"] == target.key]
                for run in mine[:1] if target.key != "bare" else []:
                    rounds.append({**run, **round_figures(bare, run)})
                if target.key == "bare":
                    rounds.extend({**run, **round_figures(bare, run)} for run in mine)
            medians = {
                figure: median([item[figure] for item in rounds])
                for figure in ("rps", "ratio", "cpu_ratio", "cpu_x", "cpu_ms", "p50_ms", "p99_ms")
            }
            endpoints.append(
                {
                    "key": target.key,
                    "name": target.name,
                    "method": target.load.method,
                    "path": target.load.path.split("?", 1)[0],
                    "distinct_bodies": len(target.load.bodies),
                    "goal": target.goal,
                    "sql_goal": target.sql_goal,
                    "sql": sql.get(target.key),
                    "errors": sum(item["errors"] for item in rounds),
                    "rounds": rounds,
                    "median": medians,
                    "floor": target.floor if not target.is_floor else None,
                }
            )
        floors = [item for item in endpoints if item["key"].startswith(FLOOR_PREFIX)]
        endpoints = [item for item in endpoints if not item["key"].startswith(FLOOR_PREFIX)]
        by_floor = {item["key"]: item for item in floors}
        for item in endpoints:
            floor = by_floor.get(item.get("floor") or "")
            item["floor_goal"] = FLOOR_GOAL if floor is not None else None
            item["floor_ratios"] = floor_ratios(item["rounds"], floor["rounds"]) if floor else None
            item["floor_ratio"] = (
                {
                    figure: median([entry[figure] for entry in item["floor_ratios"]])
                    for figure in ("time", "cpu", "p50")
                }
                if floor
                else None
            )
        return {
            **_result_head(RESULT_SCHEMA, started_at, machine, pg_version, options, runs),
            "floor_goal": FLOOR_GOAL,
            "floors": floors,
            "server": {
                **{key: value for key, value in server_options.items() if key != "port"},
                "threads_effective": server_options["threads"]
                or int(os.environ.get("GUNICORN_THREADS") or 4),
                "worker_class_effective": server_options["worker_class"] or "gthread",
                "embedding_threads": os.environ.get("BAILING_EMBEDDING_THREADS") or "0 (all cores)",
                "db_conn_max_age": settings.DATABASES["default"].get("CONN_MAX_AGE"),
            },
            "cpu_accounting": (
                "utime+stime+cutime+cstime from /proc of the gunicorn master and its workers and of the "
                "PostgreSQL postmaster and all its children (backends, autovacuum, checkpointer, "
                "walwriter), before and after each run, divided by the requests answered; other load on "
                "the machine is not counted"
                if postgres
                else "gunicorn processes only (PostgreSQL's are not visible on this machine)"
            ),
            "queries": {
                "distinct_texts": len(BENCH_QUERIES),
                "fresh_per_request": True,
                "note": "every searched query text carries a fresh order number: none repeats",
            },
            "invocations_not_executed": getattr(self, "not_executed", None),
            "endpoints": endpoints,
        }

    def _report(self, result: dict, baseline: dict | None) -> None:
        out = self.stdout.write
        before = {item["key"]: item for item in (baseline or {}).get("endpoints", [])}
        out("")
        header = (
            f"{'endpoint':44} {'req/s':>8} {'ratio':>6} {'goal':>5} {'CPU r':>6} {'CPU ms':>7} "
            f"{'p50 ms':>8} {'p99 ms':>8} {'SQL':>4} {'trips':>5} {'err':>5}"
        )
        if baseline is not None:
            header += f" {'before':>7}"
        out(header)
        for item in result["endpoints"]:
            m = item["median"]
            sql = item["sql"] or {}

            def number(value, width, digits=2):
                return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}}"

            goal = item["goal"]
            mark = ""
            if goal is not None and m["ratio"] is not None:
                mark = "" if m["ratio"] >= goal else "!"
            sql_mark = (
                "!" if item["sql_goal"] is not None and sql.get("statements", 0) > item["sql_goal"] else ""
            )
            line = (
                f"{item['name'][:44]:44} {number(m['rps'], 8, 0)} {number(m['ratio'], 6)} "
                f"{(f'{goal:.2f}' + mark) if goal is not None else '-':>5} {number(m['cpu_ratio'], 6)} "
                f"{number(m['cpu_ms'], 7)} {number(m['p50_ms'], 8)} {number(m['p99_ms'], 8)} "
                f"{(str(sql['statements']) + sql_mark) if sql else '-':>4} "
                f"{sql.get('round_trips', '-'):>5} {item['errors']:5d}"
            )
            if baseline is not None:
                old = (before.get(item["key"]) or {}).get("median", {}).get("ratio")
                line += f" {number(old, 7)}"
            out(line)
        self._floor_report(result, before)
        self._breakdown_report(result.get("breakdown"))
        options, machine = result["options"], result["machine"]
        out("")
        out(
            f"{options['rounds']} interleaved rounds (bare, every endpoint in an order rotated per round, "
            f"bare), {options['duration']:.0f} s per run, {options['load_generator']}, "
            f"{options['connections']} connections; ratio = median of (req/s ÷ the same round's bare req/s); "
            "CPU r = median of (bare CPU/request ÷ the endpoint's); CPU ms = CPU per request; "
            "'!' = goal missed"
        )
        out(f"CPU: {result['cpu_accounting']}")
        out(
            "SQL = statements of one request without BEGIN/COMMIT/SAVEPOINT/RELEASE, trips = every message "
            "that waited for the server (the statements plus transaction control), from libpq's trace"
        )
        out(
            f"queries: {len(BENCH_QUERIES)} distinct questions and a fresh order number in each request, "
            "so no searched text repeats (a cache of query vectors cannot flatter the figures)"
        )
        if result["invocations_not_executed"]:
            out(f"WARNING: {result['invocations_not_executed']} tool invocations did not execute")
        for item in result["endpoints"]:
            runs = [run for run in item["rounds"] if run.get("executed") is not None]
            answered, executed = sum(run["requests"] for run in runs), sum(run["executed"] for run in runs)
            if runs and executed < 0.95 * answered:
                out(
                    f"WARNING: {item['name']}: {executed} of {answered} answered calls executed; the rest "
                    "were refused before dispatch (the provider's bulkhead), so its req/s flatters it"
                )
        start = ", ".join(f"{v:.2f}" for v in machine.get("load_average") or [])
        end = ", ".join(f"{v:.2f}" for v in machine.get("load_average_end") or [])
        out(
            f"machine: {machine.get('cpus')} CPUs, load average at start {start}, at end {end}; "
            f"commit {(result['git'] or {}).get('commit') or '?'}"
        )

    def _floor_report(self, result: dict, before: dict) -> None:
        """The floors' own figures, then each work path's cost ÷ its floor's (issue 26)."""
        out = self.stdout.write
        floors = {item["key"]: item for item in result.get("floors") or []}
        if not floors:
            return

        def number(value, width, digits=2):
            return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}}"

        out("")
        out(
            f"{'floor (what the work must cost)':44} {'req/s':>8} {'CPU ms':>7} {'p50 ms':>8} "
            f"{'p99 ms':>8} {'err':>5}"
        )
        for item in floors.values():
            m = item["median"]
            out(
                f"{item['name'][:44]:44} {number(m['rps'], 8, 0)} {number(m['cpu_ms'], 7)} "
                f"{number(m['p50_ms'], 8)} {number(m['p99_ms'], 8)} {item['errors']:5d}"
            )
        out("")
        header = f"{'endpoint ÷ its floor':44} {'time×':>6} {'CPU×':>6} {'p50×':>6} {'goal':>5}"
        if before:
            header += f" {'before time× / CPU×':>20}"
        out(header)
        for item in result["endpoints"]:
            ratio = item.get("floor_ratio")
            if not ratio:
                continue
            goal = item["floor_goal"]
            missed = any(ratio[k] is not None and ratio[k] > goal for k in ("time", "cpu"))
            line = (
                f"{item['name'][:44]:44} {number(ratio['time'], 6)} {number(ratio['cpu'], 6)} "
                f"{number(ratio['p50'], 6)} {'≤' + format(goal, '.1f') + ('!' if missed else ''):>5}"
            )
            old = (before.get(item["key"]) or {}).get("floor_ratio")
            if before:
                line += f" {(number(old['time'], 8) + ' / ' + number(old['cpu'], 5)) if old else '-':>20}"
            out(line)
        out(
            "time× = the floor's req/s ÷ the endpoint's in the same round (time per request at the same "
            "concurrency), CPU× = CPU per request ÷ the floor's, p50× likewise; medians over rounds; "
            "'!' = above the goal"
        )

    def _breakdown_report(self, breakdown: dict | None) -> None:
        out = self.stdout.write
        if not breakdown:
            return
        out("")
        if breakdown.get("skipped"):
            out(f"breakdown: skipped ({breakdown['skipped']})")
            return
        parts = ("python", "sql", "lock", "commit", "seal", "embedding", "business_call")
        out(
            f"{'where the time goes (traced run, mean ms)':44} {'conn':>4} {'client':>7} {'queue':>6} "
            f"{'server':>7} " + " ".join(f"{part[:8]:>8}" for part in parts) + f" {'SQL':>4} {'commits':>7}"
        )
        for item in breakdown["paths"]:
            for level in item["levels"]:
                spans = level["spans"]
                if not spans.get("requests"):
                    out(f"{item['name'][:44]:44} {level['connections']:4d}  (no complete traces)")
                    continue
                mean = spans["mean_ms"]
                out(
                    f"{item['name'][:44]:44} {level['connections']:4d} {level['client_mean_ms']:7.1f} "
                    f"{level['queue_ms']:6.1f} {mean['total']:7.1f} "
                    + " ".join(f"{mean[part]:8.1f}" for part in parts)
                    + f" {spans['statements']:4.1f} {spans['commits']:7.1f}"
                )
                waits = level.get("postgres_waits", {}).get("backends_per_sample") or {}
                if waits:
                    shown = ", ".join(f"{key} {value:.2f}" for key, value in list(waits.items())[:6])
                    out(f"{'':44}      PostgreSQL backends per sample: {shown}")
                if spans.get("dispatched") is not None and item["key"] == INVOCATION_KEY:
                    out(f"{'':44}      {spans['dispatched']} of {spans['requests']} traced calls dispatched")
        out(
            "client = mean latency the load generator saw; server = the request's server span; queue = "
            "client − server (waiting for a gunicorn thread, the sockets); parts are exclusive: python = "
            "server − the rest (includes the tracing's own cost); sql = statements' round trips; lock = "
            "statements taking a lock; commit = COMMIT (fsync wait); seal = the after-commit audit seal; "
            "business_call = the signed request to the business system"
        )

    def _breakdown(self, targets: list[Target], options: dict, nonce: str, server_options: dict) -> dict:
        """A traced run (issue 26, where the waiting goes): a hub exporting every span to a receiver
        here, each of :data:`BREAKDOWN_KEYS` loaded at ``--connections`` and at 1 connection for
        ``--breakdown-seconds``, each request's server time split by kind (benchmarks/spans.py), and
        PostgreSQL's backends sampled meanwhile."""
        chosen = [target for target in targets if target.key in BREAKDOWN_KEYS]
        if not chosen:
            return {"skipped": "none of the traced paths is selected"}
        if not receiver_available():
            return {"skipped": "opentelemetry-proto is not installed (the dev extra)"}
        seconds = options["breakdown_seconds"]
        levels = sorted({options["connections"], 1}, reverse=True)
        paths = []
        conninfo = database_url(connection.settings_dict)
        with span_receiver() as receiver:
            env = {
                "BAILING_BENCH_ENDPOINTS": "true",
                "DATABASE_URL": conninfo,
                **tracing_env(receiver.url),
            }
            with gunicorn_server(**{**server_options, "port": None}, extra_env=env) as server:
                self._progress(f"traced hub on 127.0.0.1:{server.port}: where the time goes ...")
                load = wrk_load if shutil.which("wrk") else python_load
                for index, target in enumerate(chosen):
                    item = {"key": target.key, "name": target.name, "levels": []}
                    for level in levels:
                        # Warm the traced workers up, then drop what they exported meanwhile.
                        load(
                            server.port,
                            target.load,
                            seconds=1,
                            connections=level,
                            base=(900 + index * 2 + level) * RUN_NUMBER_SPAN,
                            hex_nonce=f"{nonce[:40]}b{index:03x}{level:04x}",
                        )
                        time.sleep(1.0)
                        receiver.clear()
                        with WaitSampler(conninfo) as sampler:
                            result = load(
                                server.port,
                                target.load,
                                seconds=seconds,
                                connections=level,
                                base=(950 + index * 2 + level) * RUN_NUMBER_SPAN,
                                hex_nonce=f"{nonce[:40]}c{index:03x}{level:04x}",
                            )
                        time.sleep(1.5)  # the batch processors' schedule (tracing_env) and the export
                        spans = request_breakdown(receiver.snapshot())
                        receiver.clear()
                        client_mean = (
                            level * result.seconds / result.requests if result.requests else 0.0
                        )  # Little's law: concurrency × time ÷ requests
                        server_mean = (spans.get("mean_ms") or {}).get("total", 0.0)
                        item["levels"].append(
                            {
                                "connections": level,
                                "seconds": seconds,
                                "requests": result.requests,
                                "rps": result.rps,
                                "errors": result.errors,
                                "client_p50_ms": result.p50_ms,
                                "client_mean_ms": client_mean * 1000,
                                "queue_ms": max(0.0, client_mean * 1000 - server_mean),
                                "spans": spans,
                                "postgres_waits": sampler.summary(),
                            }
                        )
                        self._progress(
                            f"  traced {target.name[:44]}, {level} conn.: {result.rps:.1f} req/s, "
                            f"server {server_mean:.1f} ms, client {client_mean * 1000:.1f} ms"
                        )
                    paths.append(item)
        return {
            "method": (
                "a second gunicorn, same options, exporting every span (always_on sampler) to an OTLP "
                "receiver in the benchmark; per request (trace) its server span split by the spans below "
                "it; pg_stat_activity sampled every 10 ms on a connection of its own"
            ),
            "paths": paths,
        }

    # --- --suite data-policy ---------------------------------------------------------------------------
    def _policy_targets(self, nonce: str, calls_access: str, revisions: dict[str, str]) -> list[Target]:
        """bare, then each of :data:`POLICY_ENDPOINTS` off and on (keys ``<endpoint>.<variant>``)."""
        access, _, _ = self._fixtures(policy=True)
        api = "/agent-api/v1"
        json_auth = {"Authorization": f"Bearer {access}", "Content-Type": "application/json"}
        calls_auth = {"Authorization": f"Bearer {calls_access}", "Content-Type": "application/json"}
        searches = tuple(_json({"query": query_text(i), "limit": 3}) for i in range(len(BENCH_QUERIES)))
        workspaces = {"off": BENCH_KEY, "on": BENCH_POLICY_KEY}
        routes = {"off": calls.ROUTE, "on": calls.POLICY_ROUTE}
        self.policy_seen: dict[str, dict | None] = {}

        def seen(key: str, check=None):
            def record(response) -> None:
                if check is not None:
                    check(response)
                self.policy_seen[key] = response.json().get("data_policy")

            return record

        targets = [Target("bare", "bare DRF endpoint", LoadSpec("GET", f"{api}/_bench/bare", {}))]
        for variant in VARIANTS:
            body = {
                "invocation_id": HEX_MARK,
                "route": routes[variant],
                "tool": POLICY_READ[0],
                "arguments": POLICY_READ[1],
                "capability_revision": revisions[routes[variant]],
            }
            key = f"tool_invocation.{variant}"
            targets.append(
                Target(
                    key,
                    f"policy {variant}: {POLICY_ENDPOINTS['tool_invocation']}",
                    LoadSpec("POST", f"{api}/tool-invocations", calls_auth, (_json(body),)),
                    check=seen(key, _invocation_ok),
                )
            )
        for variant in VARIANTS:
            key = f"knowledge_search.{variant}"
            path = f"{api}/workspaces/{workspaces[variant]}/knowledge/search"
            targets.append(
                Target(
                    key,
                    f"policy {variant}: {POLICY_ENDPOINTS['knowledge_search']}",
                    LoadSpec("POST", path, json_auth, searches),
                    check=seen(key),
                )
            )
        return targets

    @staticmethod
    def _policy_order(endpoints: list[Target]):
        """Round ``n``'s order: each endpoint's two variants back to back, off first in even rounds
        and on first in odd ones; the endpoints themselves swap places every other round."""
        groups: dict[str, list[Target]] = {}
        for target in endpoints:
            groups.setdefault(target.key.split(".")[0], []).append(target)

        def order_of(number: int) -> list[Target]:
            names = list(groups)
            if number // 2 % 2:
                names.reverse()
            return [
                target
                for name in names
                for target in (groups[name] if number % 2 == 0 else list(reversed(groups[name])))
            ]

        return order_of

    def _front_suite(self, options) -> None:
        from benchmarks import front

        self._check_options(options)
        if options["baseline"] is not None:
            raise CommandError("--baseline is for the endpoints suite")
        if options["worker_class"]:
            raise CommandError("--suite front runs the configured worker class (no --worker-class)")
        if options["idle"] < 0:
            raise CommandError("--idle must not be negative")
        server_options = calls.server_options(options)
        started_at = datetime.now(UTC)
        machine_before = machine_info()
        postgres, pg_version = _postgres()
        nonce = secrets.token_hex(20)
        try:
            targets = [target for target in self._targets(nonce, None) if target.key in front.FRONT_KEYS]
            targets = _only(targets, options["only"])
            result = front.run(self, targets, options, server_options, nonce, postgres)
        finally:
            self._cleanup()
        result.update(
            started_at=started_at.isoformat(),
            machine=machine_before,
            postgres=pg_version,
            git=git_commit(Path(settings.BASE_DIR)),
            options={key: options[key] for key in ("duration", "rounds", "warmup", "connections", "idle")}
            | {"workers": server_options["workers"], "threads": server_options["threads"]},
        )
        self._front_report(result)
        if options["json"] is not None:
            options["json"].write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
            self.stdout.write(f"figures written to {options['json']}")
        if options["plot"] is not None:
            front.plot_front(options["plot"], result)
            self.stdout.write(f"plot written to {options['plot']}")

    def _front_report(self, result: dict) -> None:
        from benchmarks.front import FRONT_GOAL, IDLE_P99_GOAL

        def number(value, digits=2):
            return "n/a" if value is None else f"{value:.{digits}f}"

        self.stdout.write("\nthe front vs gunicorn alone (medians over rounds)")
        self.stdout.write(
            f"{'endpoint':40} {'direct r/s':>10} {'front r/s':>10} {'ratio':>6} {'p99 ratio':>9} "
            f"{'front ms CPU/req':>16}"
        )
        for endpoint in result["endpoints"]:
            goal = f"  (goal ≥ {FRONT_GOAL}: {'met' if endpoint['meets_goal'] else 'NOT met'})"
            self.stdout.write(
                f"{endpoint['name'][:40]:40} {number(endpoint['direct']['rps'], 1):>10} "
                f"{number(endpoint['front']['rps'], 1):>10} {number(endpoint['front_over_direct_rps']):>6} "
                f"{number(endpoint['front_over_direct_p99']):>9} "
                f"{number(endpoint['front_cpu_ms_per_request'], 3):>16}" + (goal if endpoint["goal"] else "")
            )
        idle = result["idle"]
        if idle:
            self.stdout.write(
                f"\n{idle['connections']} idle connections: {idle['still_open']} still open, "
                f"{number(idle['kib_per_connection'])} KiB each in the front, front CPU while idle "
                f"{number(idle['front_cpu_ms_per_second_idle'])} ms/s; bare endpoint meanwhile "
                f"{number(idle['bare_under_idle']['rps'], 1)} req/s, p99 "
                f"{number(idle['bare_under_idle']['p99_ms'])} ms = {number(idle['p99_over_without'])}× "
                f"without (goal ≤ {IDLE_P99_GOAL}: {'met' if idle['meets_goal'] else 'NOT met'})"
            )

    def _data_policy_suite(self, options) -> None:
        self._check_options(options)
        if options["baseline"] is not None:
            raise CommandError("--baseline is for the endpoints suite")
        server_options = calls.server_options(options)
        started_at = datetime.now(UTC)
        machine_before = machine_info()
        nonce = secrets.token_hex(20)
        shop = None
        try:
            shop, base_url, secret = calls.demo_shop_start()
            calls_session, calls_access = calls.calls_fixtures(base_url, secret, data_policy=DATA_POLICY_ALL)
            identity = AgentIdentity(session=calls_session, client=calls_session.client)
            revisions = {
                key: route_catalog(route=Route.objects.get(route_key=key), identity=identity).revision
                for key in (calls.ROUTE, calls.POLICY_ROUTE)
            }
            targets = self._policy_targets(nonce, calls_access, revisions)
            targets = _only(targets, options["only"])
            self._progress(f"SQL per request (in process, libpq trace) of {len(targets) - 1} variants ...")
            sql = {target.key: self._sql(target, nonce) for target in targets if target.key != "bare"}
            postgres, pg_version = _postgres()
            env = {"BAILING_BENCH_ENDPOINTS": "true", "DATABASE_URL": database_url(connection.settings_dict)}
            with gunicorn_server(**server_options, extra_env=env) as server:
                roots = {"gunicorn": server.pid, "postgres": postgres}
                self._progress(
                    f"hub on 127.0.0.1:{server.port} (gunicorn pid {server.pid}, {server_options['workers']} "
                    "workers, BAILING_DEBUG off, no worker recycling); data policy on: every built-in "
                    "detector, redact, tool_results and knowledge"
                )
                runs = self._measure(
                    server.port, targets, options, nonce, roots, order_of=self._policy_order(targets[1:])
                )
        finally:
            try:
                self._verify_invocations(options)
                self._cleanup()
            finally:
                if shop is not None:
                    stop_process(shop, timeout=10)
        result = self._policy_result(
            targets, sql, runs, options, server_options, started_at, machine_before, pg_version
        )
        self._policy_report(result)
        if options["json"] is not None:
            options["json"].write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
            self.stdout.write(f"figures written to {options['json']}")
        if options["plot"] is not None:
            plot_policy_pairs(options["plot"], result)
            self.stdout.write(f"plot written to {options['plot']}")

    def _policy_result(self, targets, sql, runs, options, server_options, started_at, machine, pg_version):
        figures = ("rps", "p50_ms", "p95_ms", "p99_ms", "cpu_ms")
        variants = []
        for target in targets:
            mine = [{**run, "cpu_ms": cpu_per_request_ms(run)} for run in runs if run["key"] == target.key]
            variants.append(
                {
                    "key": target.key,
                    "name": target.name,
                    "path": target.load.path,
                    "sql": sql.get(target.key),
                    "data_policy_in_process": getattr(self, "policy_seen", {}).get(target.key),
                    "errors": sum(run["errors"] for run in mine),
                    "rounds": mine,
                    "median": {figure: median([run[figure] for run in mine]) for figure in figures},
                }
            )
        by_key = {item["key"]: item for item in variants}
        endpoints = []
        for name, label in POLICY_ENDPOINTS.items():
            off, on = by_key.get(f"{name}.off"), by_key.get(f"{name}.on")
            if off is None or on is None:
                continue
            ratios = []
            for run_off, run_on in zip(off["rounds"], on["rounds"], strict=True):
                ratio = run_on["rps"] / run_off["rps"] if run_off["rps"] else None
                # The req/s ratio CPU alone would allow: policy-off CPU per request ÷ policy-on's.
                cpu_off, cpu_on = run_off["cpu_ms"], run_on["cpu_ms"]
                cpu_ratio = cpu_off / cpu_on if cpu_off and cpu_on else None
                ratios.append({"round": run_on["round"], "ratio": ratio, "cpu_ratio": cpu_ratio})
            ratio = median([item["ratio"] for item in ratios])
            endpoints.append(
                {
                    "key": name,
                    "name": label,
                    "goal": POLICY_GOAL,
                    "ratios": ratios,
                    "ratio": ratio,
                    "cpu_ratio": median([item["cpu_ratio"] for item in ratios]),
                    "met": None if ratio is None else ratio >= POLICY_GOAL,
                    "off": off["median"],
                    "on": on["median"],
                }
            )
        return {
            **_result_head(POLICY_SCHEMA, started_at, machine, pg_version, options, runs),
            "server": {key: value for key, value in server_options.items() if key != "port"},
            "data_policy": DATA_POLICY_ALL,
            "invocations_not_executed": getattr(self, "not_executed", None),
            "variants": variants,
            "endpoints": endpoints,
        }

    def _policy_report(self, result: dict) -> None:
        out = self.stdout.write

        def number(value, width, digits=2):
            return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}}"

        out("")
        out(
            f"{'variant':58} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'CPU ms':>7} {'SQL':>4} {'err':>5}  "
            "findings in process"
        )
        for item in result["variants"]:
            m, sql = item["median"], item["sql"] or {}
            found = item["data_policy_in_process"]
            out(
                f"{item['name'][:58]:58} {number(m['rps'], 8, 1)} {number(m['p50_ms'], 8)} "
                f"{number(m['p95_ms'], 8)} {number(m['cpu_ms'], 7)} {sql.get('statements', '-'):>4} "
                f"{item['errors']:5d}  {json.dumps(found['findings']) if found else '-'}"
            )
        out("")
        out(f"{'endpoint':44} {'on ÷ off req/s':>14} {'goal':>6} {'CPU r':>6}  per round")
        for item in result["endpoints"]:
            mark = "" if item["met"] else "!"
            rounds = ", ".join(number(r["ratio"], 0) for r in item["ratios"])
            ratio, cpu = number(item["ratio"], 14, 3), number(item["cpu_ratio"], 6, 3)
            out(f"{item['name'][:44]:44} {ratio} {item['goal']:5.2f}{mark:1} {cpu}  {rounds}")
        options, machine = result["options"], result["machine"]
        out("")
        out(
            f"{options['rounds']} rounds (bare, each endpoint off and on back to back, which first "
            f"alternating per round, bare), {options['duration']:.0f} s per run, "
            f"{options['load_generator']}, "
            f"{options['connections']} connections; figures are medians over rounds; ratio = median of "
            "(policy-on req/s ÷ the same round's policy-off req/s); CPU r = median of (policy-off CPU per "
            "request ÷ policy-on's), gunicorn and PostgreSQL; '!' = goal missed"
        )
        if result["invocations_not_executed"]:
            out(f"WARNING: {result['invocations_not_executed']} tool invocations did not execute")
        start = ", ".join(f"{v:.2f}" for v in machine.get("load_average") or [])
        end = ", ".join(f"{v:.2f}" for v in machine.get("load_average_end") or [])
        out(
            f"machine: {machine.get('cpus')} CPUs, load average at start {start}, at end {end}; "
            f"commit {(result['git'] or {}).get('commit') or '?'}"
        )


def _result_head(schema, started_at, machine, pg_version, options, runs) -> dict:
    """What every suite's JSON starts with: schema, times, commit, machine and the load options."""
    machine_after = machine_info()
    return {
        "schema": schema,
        "started_at": started_at.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "git": git_commit(Path(settings.BASE_DIR)),
        "machine": {
            **machine,
            "load_average_end": machine_after.get("load_average"),
            "postgres_version": pg_version,
        },
        "options": {
            "rounds": options["rounds"],
            "duration": options["duration"],
            "warmup": options["warmup"],
            "connections": options["connections"],
            "only": options["only"],
            "load_generator": runs[0]["tool"] if runs else None,
        },
    }


def floor_ratios(rounds: list[dict], floor_rounds: list[dict]) -> list[dict]:
    """Per round, an endpoint's cost ÷ its floor's in the same round (issue 26): ``time`` = the
    floor's req/s ÷ the endpoint's (time per request at the same concurrency), ``cpu`` = CPU per
    request ÷ the floor's, ``p50`` = p50 latency ÷ the floor's (``None`` where a figure is missing)."""
    floor_by_round = {run["round"]: run for run in floor_rounds}
    out = []
    for run in rounds:
        floor = floor_by_round.get(run["round"])
        if floor is None:
            continue
        cpu, floor_cpu = cpu_per_request_ms(run), cpu_per_request_ms(floor)
        out.append(
            {
                "round": run["round"],
                "time": floor["rps"] / run["rps"] if run["rps"] and floor["rps"] else None,
                "cpu": cpu / floor_cpu if cpu and floor_cpu else None,
                "p50": run["p50_ms"] / floor["p50_ms"] if run["p50_ms"] and floor["p50_ms"] else None,
            }
        )
    return out


def _only(targets: list, wanted) -> list:
    """The bare endpoint and the targets whose name or key holds one of ``wanted`` (all without it)."""
    if not wanted:
        return targets
    return [targets[0]] + [
        target for target in targets[1:] if any(text in target.name or text in target.key for text in wanted)
    ]


def _postgres() -> tuple[int | None, str]:
    """The postmaster's pid (None when not visible here) and the server's version."""
    with connection.cursor() as cursor:
        postgres = postmaster_pid(cursor)
        cursor.execute("SHOW server_version")
        return postgres, cursor.fetchone()[0]
