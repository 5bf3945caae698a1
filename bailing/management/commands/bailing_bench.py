"""HTTP benchmark: req/s of agent endpoints against a bare DRF endpoint, under the real gunicorn config.

Starts gunicorn (``bailing/gunicorn.conf.py``) on a free loopback port against the configured
database, creates a throwaway benchmark client / workspace / agent session, drives each endpoint
with ``wrk`` (or a built-in keep-alive load generator when wrk is not installed), prints req/s,
latency and the SQL query count of one request, then removes what it created. Figures are only
comparable within one run: the machine is shared, so the ratio to the bare endpoint is the figure
to quote.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection
from django.test import Client as DjangoClient
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_runtime.models import AgentSession, Client, Route
from agent_runtime.tokens import ACCESS_TOKEN_PREFIX, new_secret, secret_hash

BENCH_KEY = "bench-workspace"
BENCH_CLIENT = "bench-agent"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_ready(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("gunicorn did not become ready")


def _python_load(port: int, path: str, headers: dict[str, str], seconds: float, connections: int) -> dict:
    """Keep-alive GET loop on ``connections`` threads; returns req/s and latency percentiles."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    errors = [0]

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        local: list[float] = []
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                errors[0] += 1
            local.append(time.perf_counter() - started)
        with lock:
            latencies.extend(local)

    threads = [threading.Thread(target=worker) for _ in range(connections)]
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


def _wrk_load(port: int, path: str, headers: dict[str, str], seconds: float, connections: int) -> dict:
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{int(seconds)}s", "--latency"]
    for name, value in headers.items():
        cmd += ["-H", f"{name}: {value}"]
    cmd.append(f"http://127.0.0.1:{port}{path}")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

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


class Command(BaseCommand):
    help = "Benchmark agent endpoints against a bare DRF endpoint under the gunicorn config."

    def add_arguments(self, parser):
        parser.add_argument("--seconds", type=float, default=10.0)
        parser.add_argument("--connections", type=int, default=16)
        parser.add_argument("--workers", type=int, default=None, help="gunicorn workers (default: config)")

    def _fixtures(self) -> tuple[str, list[Route], Client]:
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
            },
        )
        access = new_secret(ACCESS_TOKEN_PREFIX)
        now = timezone.now()
        AgentSession.objects.create(
            client=client,
            device_label="benchmark",
            principal={"id": "bench"},
            on_behalf_of="bench",
            allowed_routes=[BENCH_KEY],
            access_token_hash=secret_hash(access),
            access_expires_at=now + timedelta(minutes=15),
            refresh_expires_at=now + timedelta(days=1),
        )
        return access, [route], client

    def _cleanup(self) -> None:
        Client.objects.filter(app_id=BENCH_CLIENT).delete()
        Route.objects.filter(route_key=BENCH_KEY).delete()

    def _queries(self, path: str, headers: dict[str, str]) -> int:
        django_client = DjangoClient()
        extra = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}
        extra["HTTP_HOST"] = "127.0.0.1"
        django_client.get(path, **extra)  # warm: first request may touch last_seen_at
        with CaptureQueriesContext(connection) as ctx:
            response = django_client.get(path, **extra)
        if response.status_code != 200:
            raise RuntimeError(f"{path} answered {response.status_code}")
        return len(ctx.captured_queries)

    def handle(self, *args, **options):
        access, _routes, _client = self._fixtures()
        auth = {"Authorization": f"Bearer {access}"}
        targets = [
            ("bare DRF endpoint", "/agent-api/v1/_bench/bare", {}),
            ("GET /workspaces", "/agent-api/v1/workspaces", auth),
            (
                f"GET /workspaces/{BENCH_KEY}/bootstrap",
                f"/agent-api/v1/workspaces/{BENCH_KEY}/bootstrap",
                auth,
            ),
        ]
        port = _free_port()
        env = {**os.environ, "BAILING_BIND": f"127.0.0.1:{port}", "BAILING_BENCH_ENDPOINTS": "true"}
        if options["workers"]:
            env["GUNICORN_WORKERS"] = str(options["workers"])
        gunicorn = Path(sys.executable).with_name("gunicorn")
        server = subprocess.Popen(
            [str(gunicorn), "-c", str(settings.BASE_DIR / "bailing" / "gunicorn.conf.py"), "bailing.wsgi"],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        load = _wrk_load if shutil.which("wrk") else _python_load
        results = []
        try:
            _wait_ready(port)
            for index, (name, path, headers) in enumerate(targets, 1):
                self.stdout.write(
                    f"[{index}/{len(targets)}] {name}: warming up, then {options['seconds']:.0f} s ..."
                )
                self.stdout.flush()
                load(port, path, headers, 2, options["connections"])
                result = load(port, path, headers, options["seconds"], options["connections"])
                queries = self._queries(path, headers) if path != "/agent-api/v1/_bench/bare" else 0
                results.append((name, result, queries))
        finally:
            server.terminate()
            server.wait(timeout=30)
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
