"""Benchmark of the governed call path: what a tool call through the hub costs over the same signed
business request sent directly.

Starts a Demo Shop process (``python -m demo_business``) and the hub under the real gunicorn config,
creates a throwaway tool provider (signed spec refresh from the shop), workspace, agent client and
session, then measures, one request at a time (latency) and with ``--connections`` in parallel
(throughput):

* **direct read / direct write** — the exact request the hub would send (built by the hub's own
  dispatcher: signature, job id, idempotency key) sent straight to the shop on a fresh connection,
  as the hub sends it: the baseline;
* **hub read** — ``POST /agent-api/v1/tool-invocations`` for ``list_orders`` with a new
  ``invocation_id`` each time (authentication, route gate, catalog, schema, rules, rate limits,
  invocation row, audit events, the business call, the outcome);
* **hub write** — the same for a 0.01 refund (the execution journal commits before the business call);
* **hub replay** — the same ``invocation_id`` again: the stored result, no business call;
* **floor read** — the direct read between two durable one-row commits (the journal before, the
  outcome after): what a governed read must cost at least (issue 26), in this process.

The overhead is hub minus direct at the same percentile. Afterwards the shop's own records are
counted: every refund the hub was asked for once is there exactly once. Figures are only comparable
within one run on one machine.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections, connection, transaction
from django.test import Client as DjangoClient

from agent_runtime.config import validate_route_config
from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentSession, Client, ProviderTool, Route, ToolProvider
from agent_runtime.selectors.catalog import route_catalog
from agent_runtime.services.config_apply import route_upsert
from agent_runtime.services.http_dispatch import dispatch_request_build, dispatch_send
from agent_runtime.services.invocations import idempotency_key
from agent_runtime.services.providers import provider_refresh, provider_set_secret
from agent_runtime.tools.compiler import CompiledTool
from bailing import signing
from bailing.audit.actor import Actor
from bailing.db.urls import database_url
from benchmarks.fixtures import agent_session_open
from benchmarks.harness import (
    SqlCount,
    gunicorn_server,
    libpq_traced,
    parse_libpq_trace,
    percentile,
)
from benchmarks.views import FLOOR_TABLE, FLOOR_TABLE_CREATE, FLOOR_TABLE_DROP
from front.launcher import stop_process

ROUTE = "bench-calls"
# The same workspace with a data policy of every built-in detector (``bailing_bench --suite
# data-policy``): the tools, the client and the session are shared, only the policy differs.
POLICY_ROUTE = "bench-calls-policy"
CLIENT = "bench-caller"
PROVIDER = "bench-shop"
SUBJECT = "alice"  # a customer of the Demo Shop
INVOKE_PATH = "/agent-api/v1/tool-invocations"
READ = ("list_orders", {"status": "shipped"})
WRITE_TOOL = "request_refund"
# SO-1002 (899.00, delivered) takes 89,900 refunds of 0.01 before it is fully refunded.
WRITE_ARGUMENTS = {"order_id": "SO-1002", "amount": 0.01, "reason": "benchmark"}
LISTENING_PREFIX = "demo business system listening on "


def demo_shop_start() -> tuple[subprocess.Popen[str], str, str]:
    """Start a Demo Shop on a free loopback port with a fresh tool secret: (process, base URL, secret).
    Stop it with :func:`front.launcher.stop_process`."""
    secret = "bench-" + secrets.token_hex(24)
    process = subprocess.Popen(
        [sys.executable, "-m", "demo_business", "--host", "127.0.0.1", "--port", "0"],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DEMO_TOOL_SECRET": secret, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = process.stdout.readline() if process.stdout else ""
    if not line.startswith(LISTENING_PREFIX):
        stop_process(process, timeout=10)
        raise CommandError(f"the Demo Shop did not start: {line!r}")
    # Keep draining its stdout so the child never blocks on a full pipe; closed at its end (EOF).
    threading.Thread(target=_drain, args=(process.stdout,), daemon=True).start()
    return process, line[len(LISTENING_PREFIX) :].strip(), secret


def _drain(stream) -> None:
    with stream:
        for _ in stream:
            pass


def calls_fixtures(
    base_url: str, secret: str, *, data_policy: dict | None = None
) -> tuple[AgentSession, str]:
    """A tool provider on the Demo Shop (signed spec refresh), a workspace exposing its tools
    (``request_refund`` as a direct write), an agent client without rate limits and a session for
    :data:`SUBJECT`: (session, access token). With ``data_policy`` (a route's ``data_policy`` block)
    a second workspace, :data:`POLICY_ROUTE`, is the same one under that policy, open to the same
    client and session. :func:`calls_cleanup` removes them."""
    actor = Actor.system("bailing_bench_calls")
    provider, _ = ToolProvider.objects.update_or_create(
        name=PROVIDER,
        defaults={
            "base_url": base_url,
            "spec_source": ToolProvider.SpecSource.URL,
            "rate_limit_per_min": 0,
            "timeout_ms": 10000,
        },
    )
    provider_set_secret(provider=provider, secret=secret, actor=actor)
    outcome = provider_refresh(provider=provider, actor=actor)
    if outcome.status != "ok":
        raise CommandError(f"the benchmark provider did not refresh: {outcome.status}")
    workspace = {
        "route_key": ROUTE,
        "name": "Benchmark calls",
        "permission": "readwrite",
        "tools": {
            "sources": [{"provider": PROVIDER, "allow": ["*"]}],
            "agent_direct": {"enabled": True, "write_tools": [WRITE_TOOL]},
        },
        "agent_client": {"enabled": True},
    }
    routes = [ROUTE]
    route_upsert(data=validate_route_config(workspace, path="bench"), actor=actor)
    if data_policy is not None:
        policed = {
            **workspace,
            "route_key": POLICY_ROUTE,
            "name": "Benchmark calls under a data policy",
            "data_policy": data_policy,
        }
        route_upsert(data=validate_route_config(policed, path="bench"), actor=actor)
        routes.append(POLICY_ROUTE)
    client, _ = Client.objects.update_or_create(
        app_id=CLIENT,
        defaults={
            "name": "Benchmark caller",
            "hub_consent": True,
            "allowed_routes": routes,
            "rate_limit_per_min": 0,
        },
    )
    return agent_session_open(
        client=client, routes=routes, subject=SUBJECT, device_label="benchmark", access_hours=2
    )


def calls_cleanup() -> None:
    Client.objects.filter(app_id=CLIENT).delete()  # sessions, invocations, journals, approvals
    Route.objects.filter(route_key__in=[ROUTE, POLICY_ROUTE]).delete()
    ToolProvider.objects.filter(name=PROVIDER).delete()


def add_server_arguments(parser) -> None:
    """gunicorn options shared by the benchmark commands (the served hub never recycles workers and
    runs with ``BAILING_DEBUG`` off)."""
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument(
        "--threads", type=int, default=None, help="threads per worker (default: the gunicorn config's)"
    )
    parser.add_argument(
        "--worker-class", default=None, help="gunicorn worker class (default: the gunicorn config's)"
    )
    parser.add_argument("--port", type=int, default=0, help="loopback port of the hub (default: a free one)")


def server_options(options: dict) -> dict:
    """:func:`benchmarks.harness.gunicorn_server` keywords from :func:`add_server_arguments` options."""
    if options.get("workers") is not None and options["workers"] < 1:
        raise CommandError("--workers must be at least 1")
    if options.get("threads") is not None and options["threads"] < 1:
        raise CommandError("--threads must be at least 1")
    return {
        "workers": options.get("workers"),
        "threads": options.get("threads"),
        "worker_class": options.get("worker_class"),
        "port": options.get("port") or None,
        "max_requests": 0,
        "debug": False,
    }


class Command(BaseCommand):
    help = "Benchmark governed tool calls through the hub against the same signed call sent directly."

    def add_arguments(self, parser):
        parser.add_argument("--calls", type=int, default=300, help="sequential calls per scenario")
        parser.add_argument("--connections", type=int, default=8, help="parallel callers for throughput")
        parser.add_argument("--seconds", type=float, default=10.0, help="duration of each throughput run")
        add_server_arguments(parser)

    # --- the two ways of calling -----------------------------------------------------------------------
    def _direct(self, base_url: str, secret: str, tool_name: str, arguments: dict) -> Callable[[], int]:
        tool = CompiledTool.from_dict(
            ProviderTool.objects.get(provider__name=PROVIDER, name=tool_name).compiled
        )

        def call() -> int:
            job_id = uuid.uuid4()
            key = None
            if not tool.readonly:
                key = idempotency_key(
                    job_id=job_id, tool=tool.name, args_hash=secrets.token_hex(32), on_behalf_of=SUBJECT
                )
            request = dispatch_request_build(
                tool=tool,
                arguments=arguments,
                base_url=base_url,
                secret=secret,
                job_id=str(job_id),
                client_app_id=CLIENT,
                on_behalf_of=SUBJECT,
                idempotency_key=key,
            )
            outcome = dispatch_send(request, timeout_ms=10000)
            return outcome.status or 0

        return call

    def _hub(
        self, port: int, access: str, revision: str, tool: str, arguments: dict, *, replay: str | None = None
    ) -> Callable[[], int]:
        """One keep-alive connection per calling thread, as an agent host keeps one."""
        local = threading.local()
        headers = {"Authorization": f"Bearer {access}", "Content-Type": "application/json"}

        def call() -> int:
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            body = {
                "invocation_id": replay or secrets.token_hex(32),
                "route": ROUTE,
                "tool": tool,
                "arguments": arguments,
                "capability_revision": revision,
            }
            conn.request("POST", INVOKE_PATH, body=json.dumps(body).encode(), headers=headers)
            response = conn.getresponse()
            answer = json.loads(response.read())
            if response.status != 200 or answer.get("state") != "executed":
                raise CommandError(f"hub call failed: {response.status} {answer.get('state')}")
            return answer.get("business_status") or 0

        return call

    @staticmethod
    def _floor(direct: Callable[[], int]) -> Callable[[], int]:
        """The direct call between two durable one-row commits on this process's connection."""

        def commit_row() -> None:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"INSERT INTO {FLOOR_TABLE} (kind, payload) VALUES (0, %s)", ["x" * 200])  # noqa: S608

        def call() -> int:
            commit_row()
            status = direct()
            commit_row()
            return status

        return call

    # --- measuring -------------------------------------------------------------------------------------
    def _sequential(self, label: str, call: Callable[[], int], count: int) -> dict:
        self.stdout.write(f"  {label}: {count} calls, one at a time ...")
        self.stdout.flush()
        for _ in range(min(10, count)):
            call()  # warm up: connections, caches, the worker's first request
        latencies = []
        for index in range(count):
            started = time.perf_counter()
            status = call()
            latencies.append((time.perf_counter() - started) * 1000)
            if not 200 <= status < 300:
                raise CommandError(f"{label}: the shop answered {status}")
            if (index + 1) % max(1, count // 4) == 0:
                self.stdout.write(f"    {index + 1}/{count}")
                self.stdout.flush()
        latencies.sort()
        return {
            "label": label,
            "n": count,
            "p50": percentile(latencies, 0.50),
            "p95": percentile(latencies, 0.95),
            "p99": percentile(latencies, 0.99),
            "mean": statistics.fmean(latencies),
        }

    def _throughput(self, label: str, call: Callable[[], int], connections: int, seconds: float) -> float:
        self.stdout.write(f"  {label}: {connections} parallel callers for {seconds:.0f} s ...")
        self.stdout.flush()
        stop_at = time.monotonic() + seconds
        done = [0]
        failures: list[BaseException] = []
        lock = threading.Lock()

        def worker() -> None:
            count = 0
            try:
                while time.monotonic() < stop_at:
                    call()
                    count += 1
            except BaseException as error:  # reported after the run
                failures.append(error)
            with lock:
                done[0] += count

        threads = [threading.Thread(target=worker) for _ in range(connections)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise CommandError(f"{label}: {failures[0]}")
        return done[0] / seconds

    def _queries_per_call(self, access: str, revision: str) -> SqlCount:
        """What one new hub read sends to PostgreSQL (libpq's trace; as ``bailing_bench`` counts)."""
        client = DjangoClient(HTTP_HOST="127.0.0.1")
        body = {
            "invocation_id": secrets.token_hex(32),
            "route": ROUTE,
            "tool": READ[0],
            "arguments": READ[1],
            "capability_revision": revision,
        }
        # close_old_connections as a served request runs it (the test client does not): the connection
        # health check is counted; once outside the trace, so an old connection is replaced there.
        close_old_connections()
        connection.ensure_connection()
        with libpq_traced(connection) as trace:
            close_old_connections()
            response = client.post(
                INVOKE_PATH, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {access}"
            )
        if response.status_code != 200:
            raise CommandError(f"query count call answered {response.status_code}")
        return parse_libpq_trace(trace[0])

    def _shop_refunds(self, base_url: str, secret: str) -> int:
        headers = signing.sign_tool_request(
            secret=secret,
            method="GET",
            path_with_query="/_demo/records",
            body=b"",
            on_behalf_of="",
            job_id="",
        )
        host, port = base_url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/_demo/records", headers=headers)
        records = json.loads(conn.getresponse().read())
        return sum(1 for refund in records["refunds"] if refund.get("reason") == WRITE_ARGUMENTS["reason"])

    def handle(self, *args, **options):
        calls = options["calls"]
        if calls < 1:
            raise CommandError("--calls must be at least 1")
        shop, base_url, secret = demo_shop_start()
        try:
            session, access = calls_fixtures(base_url, secret)
            identity = AgentIdentity(session=session, client=session.client)
            revision = route_catalog(route=Route.objects.get(route_key=ROUTE), identity=identity).revision
            env = {"DATABASE_URL": database_url(connection.settings_dict)}
            with gunicorn_server(**server_options(options), extra_env=env) as server:
                port = server.port
                self.stdout.write(
                    f"Demo Shop at {base_url}; hub (gunicorn, {options['workers']} workers, "
                    f"BAILING_DEBUG off, no worker recycling) on 127.0.0.1:{port}"
                )
                direct_read = self._direct(base_url, secret, *READ)
                hub_read = self._hub(port, access, revision, *READ)
                direct_write = self._direct(base_url, secret, WRITE_TOOL, WRITE_ARGUMENTS)
                hub_write = self._hub(port, access, revision, WRITE_TOOL, WRITE_ARGUMENTS)
                replay_id = secrets.token_hex(32)
                self._hub(port, access, revision, *READ, replay=replay_id)()
                hub_replay = self._hub(port, access, revision, *READ, replay=replay_id)

                refunds_before = self._shop_refunds(base_url, secret)
                with connection.cursor() as cursor:
                    cursor.execute(FLOOR_TABLE_CREATE)
                rows = [
                    self._sequential("direct read (list_orders)", direct_read, calls),
                    self._sequential("hub read (list_orders)", hub_read, calls),
                    self._sequential("direct write (request_refund)", direct_write, calls),
                    self._sequential("hub write (request_refund)", hub_write, calls),
                    self._sequential("hub replay (no business call)", hub_replay, calls),
                    self._sequential("floor read (direct + 2 commits)", self._floor(direct_read), calls),
                ]
                hub_writes = calls + min(10, calls)  # the warm-up calls wrote too
                direct_writes = hub_writes
                refunds = self._shop_refunds(base_url, secret) - refunds_before
                parallel = options["connections"], options["seconds"]
                throughput = [
                    ("direct read", self._throughput("direct read", direct_read, *parallel)),
                    ("hub read", self._throughput("hub read", hub_read, *parallel)),
                ]
                queries = self._queries_per_call(access, revision)
        finally:
            try:
                with connection.cursor() as cursor:
                    cursor.execute(FLOOR_TABLE_DROP)
                calls_cleanup()
            finally:
                stop_process(shop, timeout=10)
        self._report(rows, throughput, queries, refunds, hub_writes + direct_writes, options)

    def _report(self, rows, throughput, queries, refunds, expected_refunds, options) -> None:
        out = self.stdout.write
        out("")
        out(f"{'scenario':34} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
        for row in rows:
            out(
                f"{row['label']:34} {row['n']:5d} {row['p50']:8.2f} {row['p95']:8.2f} "
                f"{row['p99']:8.2f} {row['mean']:8.2f}"
            )
        by_label = {row["label"].split(" (")[0]: row for row in rows}
        out("")
        for kind in ("read", "write"):
            hub, direct = by_label[f"hub {kind}"], by_label[f"direct {kind}"]
            out(
                f"hub overhead per {kind}: p50 +{hub['p50'] - direct['p50']:.2f} ms, "
                f"p95 +{hub['p95'] - direct['p95']:.2f} ms"
            )
        hub, floor = by_label["hub read"], by_label["floor read"]
        out(
            f"hub read over its floor (direct + 2 commits): p50 +{hub['p50'] - floor['p50']:.2f} ms, "
            f"{hub['p50'] / floor['p50']:.2f}× (goal ≤ 1.5×, and ≤ +10 ms p50 over the direct read)"
        )
        for label, rate in throughput:
            out(f"throughput, {label}: {rate:.0f} calls/s with {options['connections']} parallel callers")
        out(
            f"SQL of one new hub read (in process, libpq trace): {queries.statements} statements without "
            f"BEGIN/COMMIT/SAVEPOINT/RELEASE, {queries.round_trips} round trips"
        )
        verdict = "ok" if refunds == expected_refunds else "MISMATCH"
        out(f"refunds recorded by the shop: {refunds} of {expected_refunds} sent once each ({verdict})")
        out(f"one run, {options['calls']} sequential calls per scenario")
        if refunds != expected_refunds:
            raise CommandError("the shop recorded a different number of writes than were sent")
