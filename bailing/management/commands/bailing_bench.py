"""HTTP benchmark: req/s of agent endpoints against a bare DRF endpoint, under the real gunicorn config.

Starts gunicorn (``bailing/gunicorn.conf.py``) on a free loopback port against the configured
database, creates a throwaway benchmark client / workspace / agent session, a tool provider whose
inline spec has 50 operations (stored through ``provider_spec_store``, as a refresh would) and a
knowledge base holding the demo knowledge (indexed with the local MiniLM model), drives
each endpoint with ``wrk`` (POST bodies through a small Lua script) or a built-in keep-alive load
generator when wrk is not installed, prints req/s, latency and the SQL query count of one request,
then removes what it created. Figures are only comparable within one run: the machine is shared, so
the ratio to the bare endpoint is the figure to quote.

``--suite invocations`` runs ``bailing_bench_calls`` instead: the governance overhead of a tool call
through the hub over the same signed business request sent directly.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection
from django.test import Client as DjangoClient
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentSession, Client, Route, ToolProvider
from agent_runtime.selectors.catalog import route_catalog
from agent_runtime.services.tool_specs import provider_spec_store
from agent_runtime.tokens import ACCESS_TOKEN_PREFIX, new_secret, secret_hash
from agent_runtime.tools import compile_spec
from bailing.audit.actor import Actor
from bailing.benchmarks import gunicorn_running
from knowledge.config import validate_knowledge_base_config
from knowledge.models import KnowledgeBase
from knowledge.services.agent_knowledge import agent_knowledge_search
from knowledge.services.bases import knowledge_base_delete, knowledge_base_upsert
from knowledge.services.documents import documents_put_files
from knowledge.services.indexing import documents_index

BENCH_KEY = "bench-workspace"
BENCH_CLIENT = "bench-agent"
BENCH_PROVIDER = "bench-tools"
BENCH_KB = "bench-knowledge"
KNOWLEDGE_QUERY = {"query": "how long does a refund take to reach the customer", "limit": 3}
BENCH_TOOL_COUNT = 50
SEARCH_BODY = {"query": "refund the latest order of a customer", "limit": 12}
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


def _python_load(
    port: int,
    path: str,
    headers: dict[str, str],
    seconds: float,
    connections: int,
    method: str = "GET",
    body: bytes | None = None,
) -> dict:
    """Keep-alive request loop on ``connections`` threads; returns req/s and latency percentiles."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    errors = [0]

    def worker(index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        local: list[float] = []
        sent = 0
        while time.monotonic() < stop_at:
            sent += 1
            payload = body.replace(UNIQUE, f"{index}-{sent}-{stop_at}".encode()) if body else body
            started = time.perf_counter()
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                errors[0] += 1
            local.append(time.perf_counter() - started)
        with lock:
            latencies.extend(local)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    count = len(latencies)
    return {
        "rps": count / seconds,
        "p50_ms": latencies[count // 2] * 1000 if count else 0.0,
        "p99_ms": latencies[int(count * 0.99)] * 1000 if count else 0.0,
        "errors": errors[0],
        "tool": "python",
    }


# A body containing this marker gets a unique value substituted on every request (turn creation).
UNIQUE = b"%UNIQUE%"
_UNIQUE_LUA = """
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local counter = 0
function request()
  counter = counter + 1
  local id = tostring(tid) .. "-" .. tostring(counter) .. "-NONCE"
  local payload = string.gsub(wrk.body, "%%UNIQUE%%", id)
  return wrk.format(nil, nil, nil, payload)
end
"""


def _lua_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _wrk_load(
    port: int,
    path: str,
    headers: dict[str, str],
    seconds: float,
    connections: int,
    method: str = "GET",
    body: bytes | None = None,
) -> dict:
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{int(seconds)}s", "--latency"]
    for name, value in headers.items():
        cmd += ["-H", f"{name}: {value}"]
    script = None
    if method != "GET" or body is not None:
        # wrk sends a body only from a Lua script; the body is ASCII JSON, so a quoted string will do.
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
            handle.write(f"wrk.method = {_lua_string(method)}\n")
            handle.write(f"wrk.body = {_lua_string((body or b'').decode('ascii'))}\n")
            if body and UNIQUE in body:
                # Every request gets fresh identifiers: thread number, counter and a run nonce.
                handle.write(_UNIQUE_LUA.replace("NONCE", str(time.time_ns())))
            script = handle.name
        cmd += ["-s", script]
    cmd.append(f"http://127.0.0.1:{port}{path}")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    finally:
        if script:
            os.unlink(script)

    def latency(label: str) -> float:
        match = re.search(rf"^\s*{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if not match:
            return 0.0
        value, unit = float(match.group(1)), match.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50_ms": latency("50%"),
        "p99_ms": latency("99%"),
        "errors": int(non2xx.group(1)) if non2xx else 0,
        "tool": "wrk",
    }


MCP_VERSION = "2026-07-28"


def _mcp_body(method: str, params: dict) -> bytes:
    """A 2026-07-28 MCP request (the per-request envelope in ``params._meta``)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    ).encode("ascii")


def _mcp_headers(base: dict[str, str], method: str, name: str | None = None) -> dict[str, str]:
    headers = {**base, "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MCP_VERSION}
    headers["Mcp-Method"] = method
    if name:
        headers["Mcp-Name"] = name
    return headers


class Command(BaseCommand):
    help = "Benchmark agent endpoints against a bare DRF endpoint under the gunicorn config."

    def add_arguments(self, parser):
        parser.add_argument("--seconds", type=float, default=10.0)
        parser.add_argument("--connections", type=int, default=16)
        parser.add_argument("--workers", type=int, default=None, help="gunicorn workers (default: config)")
        parser.add_argument(
            "--suite",
            choices=("endpoints", "invocations"),
            default="endpoints",
            help="endpoints: req/s of agent endpoints against a bare DRF endpoint; invocations: the "
            "governed call path against the same signed call sent directly (bailing_bench_calls)",
        )
        parser.add_argument(
            "--only",
            action="append",
            metavar="TEXT",
            help="run only the endpoints whose label contains TEXT (repeatable; the bare endpoint "
            "always runs, it is the reference)",
        )

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

    def _fixtures(self) -> tuple[str, Route, AgentSession]:
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
            defaults={"name": "Benchmark agent", "hub_consent": True, "allowed_routes": [BENCH_KEY]},
        )
        route, _ = Route.objects.update_or_create(
            route_key=BENCH_KEY,
            defaults={
                "name": "Benchmark workspace",
                "target_config": {"system_prompt": "Benchmark."},
                "agent_client": {"enabled": True},
                "permission": "readwrite",
                "knowledge": {"kb_id": BENCH_KB, "top_k": 4, "min_score": 0.3},
                "tools": {
                    "sources": [{"provider": BENCH_PROVIDER, "allow": ["*"]}],
                    "agent_direct": {
                        "enabled": True,
                        "write_tools": [
                            f"{domain}_{action}" for domain in _DOMAINS for action in ("create", "update")
                        ],
                    },
                },
            },
        )
        access = new_secret(ACCESS_TOKEN_PREFIX)
        now = timezone.now()
        session = AgentSession.objects.create(
            client=client,
            device_label="benchmark",
            principal={"id": "bench"},
            on_behalf_of="bench",
            allowed_routes=[BENCH_KEY],
            access_token_hash=secret_hash(access),
            access_expires_at=now + timedelta(minutes=15),
            refresh_expires_at=now + timedelta(days=1),
        )
        return access, route, session

    def _cleanup(self) -> None:
        kb = KnowledgeBase.objects.filter(kb_id=BENCH_KB).first()
        if kb is not None:
            knowledge_base_delete(kb=kb, actor=Actor.system("bailing_bench"))
        Client.objects.filter(app_id=BENCH_CLIENT).delete()
        Route.objects.filter(route_key=BENCH_KEY).delete()
        ToolProvider.objects.filter(name=BENCH_PROVIDER).delete()

    def _queries(
        self, path: str, headers: dict[str, str], method: str = "GET", body: bytes | None = None
    ) -> int:
        django_client = DjangoClient()
        extra = {
            "HTTP_" + k.upper().replace("-", "_"): v
            for k, v in headers.items()
            if k.lower() != "content-type"
        }
        extra["HTTP_HOST"] = "127.0.0.1"

        sent = [0]

        def send():
            if method == "GET":
                return django_client.get(path, **extra)
            sent[0] += 1
            payload = (body or b"").replace(UNIQUE, f"count-{sent[0]}-{time.time_ns()}".encode())
            return django_client.generic(method, path, payload, content_type="application/json", **extra)

        send()  # warm: first request may touch last_seen_at
        with CaptureQueriesContext(connection) as ctx:
            response = send()
        if response.status_code != 200:
            raise RuntimeError(f"{path} answered {response.status_code}")
        if path.startswith("/mcp/"):
            # A JSON-RPC error or a failed tool is still HTTP 200: measure only calls that worked.
            answer = response.json()
            if "result" not in answer or answer["result"].get("isError"):
                raise RuntimeError(f"{path} answered {answer}")
        return len(ctx.captured_queries)

    def handle(self, *args, **options):
        if options["suite"] == "invocations":
            call_command(
                "bailing_bench_calls",
                seconds=options["seconds"],
                connections=min(options["connections"], 8),
                workers=options["workers"],
                stdout=self.stdout,
            )
            return
        access, route, session = self._fixtures()
        catalog = route_catalog(route=route, identity=AgentIdentity(session=session, client=session.client))
        auth = {"Authorization": f"Bearer {access}"}
        json_auth = {**auth, "Content-Type": "application/json"}
        search_body = json.dumps(SEARCH_BODY).encode("ascii")
        detail_path = (
            f"/agent-api/v1/tools/refund_get?route={BENCH_KEY}&capability_revision={catalog.revision}"
        )
        turns_path = f"/agent-api/v1/workspaces/{BENCH_KEY}/turns"
        turn_new = json.dumps(
            {
                "client_conversation_id": "bench-%UNIQUE%",
                "client_turn_id": "turn-1",
                "user_message_id": "message-%UNIQUE%",
                "user_input": "Where is order 1042, and can the customer get a refund?",
            }
        ).encode("ascii")
        turn_replay = turn_new.replace(UNIQUE, b"replay")
        knowledge_path = f"/agent-api/v1/workspaces/{BENCH_KEY}/knowledge"
        hints = agent_knowledge_search(
            identity=AgentIdentity(session=session, client=session.client),
            route_key=BENCH_KEY,
            **KNOWLEDGE_QUERY,
        )["hints"]
        if not hints:
            raise RuntimeError("the benchmark knowledge search found nothing to read")
        read_body = json.dumps({"ref": hints[0]["ref"], "max_bytes": 16384}).encode("ascii")
        mcp_list = _mcp_body("tools/list", {})
        mcp_search = _mcp_body(
            "tools/call",
            {"name": "search_knowledge", "arguments": {"query": KNOWLEDGE_QUERY["query"], "limit": 3}},
        )
        # (label, method, path, headers, body)
        targets: list[tuple[str, str, str, dict[str, str], bytes | None]] = [
            ("bare DRF endpoint", "GET", "/agent-api/v1/_bench/bare", {}, None),
            ("GET /workspaces", "GET", "/agent-api/v1/workspaces", auth, None),
            (
                f"GET /workspaces/{BENCH_KEY}/bootstrap",
                "GET",
                f"/agent-api/v1/workspaces/{BENCH_KEY}/bootstrap",
                auth,
                None,
            ),
            (
                f"POST capabilities/search ({catalog.authorized_total} tools)",
                "POST",
                f"/agent-api/v1/workspaces/{BENCH_KEY}/capabilities/search",
                json_auth,
                search_body,
            ),
            ("GET /tools/:name (detail)", "GET", detail_path, auth, None),
            (
                "POST knowledge/search (hybrid, 3 hints)",
                "POST",
                f"{knowledge_path}/search",
                json_auth,
                json.dumps(KNOWLEDGE_QUERY).encode("ascii"),
            ),
            ("POST knowledge/read (16 KiB page)", "POST", f"{knowledge_path}/read", json_auth, read_body),
            ("POST turns (new turn, inline knowledge)", "POST", turns_path, json_auth, turn_new),
            ("POST turns (idempotent replay)", "POST", turns_path, json_auth, turn_replay),
            ("MCP tools/list", "POST", f"/mcp/{BENCH_KEY}", _mcp_headers(json_auth, "tools/list"), mcp_list),
            (
                "MCP tools/call search_knowledge (limit 3)",
                "POST",
                f"/mcp/{BENCH_KEY}",
                _mcp_headers(json_auth, "tools/call", "search_knowledge"),
                mcp_search,
            ),
        ]
        if options["only"]:
            targets = [targets[0]] + [
                target for target in targets[1:] if any(text in target[0] for text in options["only"])
            ]
        load = _wrk_load if shutil.which("wrk") else _python_load
        results = []
        try:
            with gunicorn_running(
                workers=options["workers"], extra_env={"BAILING_BENCH_ENDPOINTS": "true"}
            ) as port:
                for index, (name, method, path, headers, body) in enumerate(targets, 1):
                    self.stdout.write(
                        f"[{index}/{len(targets)}] {name}: warming up, then {options['seconds']:.0f} s ..."
                    )
                    self.stdout.flush()
                    load(port, path, headers, 2, options["connections"], method, body)
                    result = load(
                        port, path, headers, options["seconds"], options["connections"], method, body
                    )
                    bare = path == "/agent-api/v1/_bench/bare"
                    queries = 0 if bare else self._queries(path, headers, method, body)
                    results.append((name, result, queries))
        finally:
            self._cleanup()
        base = results[0][1]["rps"]
        self.stdout.write("")
        self.stdout.write(
            f"{'endpoint':44} {'req/s':>9} {'ratio':>6} {'p50 ms':>8} {'p99 ms':>8} {'SQL':>4} {'non-2xx':>8}"
        )
        for name, result, queries in results:
            ratio = result["rps"] / base if base else 0.0
            self.stdout.write(
                f"{name:44} {result['rps']:9.0f} {ratio:6.2f} {result['p50_ms']:8.2f} "
                f"{result['p99_ms']:8.2f} {queries:4d} {result['errors']:8d}"
            )
        self.stdout.write(
            f"load generator: {results[0][1]['tool']}, {options['connections']} connections, "
            f"{options['seconds']:.0f} s per endpoint, one run"
        )
