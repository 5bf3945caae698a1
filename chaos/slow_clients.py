"""Slow clients: hold many connections that never finish a request, and measure everyone else.

Three kinds of slow connection, in equal numbers, all on loopback:

- ``slow_headers`` (slowloris): a request line and one more header line every second, never the blank
  line that ends the headers;
- ``short_body``: complete headers with ``Content-Length: 1000``, then 13 bytes of body and silence;
- ``idle``: a connection that sends nothing at all.

A connection the server closes is opened again at once (an attacker reconnects), so the pressure
stays at ``connections`` for the whole run; how long the server let each kind live is reported. Beside
them, a few probe threads send ordinary requests one after another — ``GET /health`` and two real
agent endpoints that need no seeded data but do run the API stack and a database read
(``POST /agent-auth/v1/token`` with an unknown refresh token, ``GET /agent-api/v1/workspaces`` with an
unknown bearer) — and their latency and failures are the figures: a failure is no answer within
``probe_timeout`` seconds, a dropped connection or a 5xx.

``run()`` is what ``bailing_chaos --scenario slow-clients`` calls. Without ``url`` it starts the
production topology itself (the front and gunicorn, exactly as ``make demo`` does) on a free loopback
port and stops it afterwards. Until that command exists: ``python -m chaos.slow_clients``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import math
import os
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any, TextIO

KINDS = ("slow_headers", "short_body", "idle")
PROBES = (
    ("GET", "/health", None, {}),
    (
        "POST",
        "/agent-auth/v1/token",
        json.dumps(
            {
                "grant_type": "refresh_token",
                "client_app_id": "chaos-probe",
                "refresh_token": "bhr_" + "x" * 43,
            }
        ).encode(),
        {"Content-Type": "application/json"},
    ),
    ("GET", "/agent-api/v1/workspaces", None, {"Authorization": "Bearer bha_" + "x" * 43}),
)


def _percentile(sorted_values: list[float], fraction: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[max(1, math.ceil(fraction * len(sorted_values))) - 1]


class _Pressure:
    """The slow connections, on an event loop of their own (a background thread)."""

    def __init__(self, host: str, port: int, connections: int):
        self.host, self.port, self.connections = host, port, connections
        self.open_now = 0
        self.opened = 0
        self.connect_failures = 0
        self.lifetimes: dict[str, list[float]] = {kind: [] for kind in KINDS}
        self.answered: dict[str, int] = {kind: 0 for kind in KINDS}
        self.loop = asyncio.new_event_loop()
        self.stopping: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._run, name="slow-clients", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        if self.stopping is not None:
            self.loop.call_soon_threadsafe(self.stopping.set)
        self.thread.join(timeout=15)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())
        self.loop.close()

    async def _main(self) -> None:
        self.stopping = asyncio.Event()
        tasks = [
            asyncio.create_task(self._hold(KINDS[index % len(KINDS)])) for index in range(self.connections)
        ]
        await self.stopping.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _hold(self, kind: str) -> None:
        """Keep one connection of ``kind`` open; when the server closes it, open another."""
        while True:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), timeout=5
                )
            except (OSError, TimeoutError):
                self.connect_failures += 1
                await asyncio.sleep(0.2)
                continue
            self.opened += 1
            self.open_now += 1
            opened_at = time.monotonic()
            try:
                await self._behave(kind, reader, writer)
                self.lifetimes[kind].append(time.monotonic() - opened_at)
            except OSError:
                self.lifetimes[kind].append(time.monotonic() - opened_at)
            finally:
                self.open_now -= 1
                writer.transport.abort()

    async def _behave(self, kind: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Misbehave until the server closes the connection (returns) or the run ends (cancelled)."""
        host = f"{self.host}:{self.port}"
        closed = asyncio.create_task(self._until_closed(kind, reader))
        try:
            if kind == "slow_headers":
                writer.write(f"GET /health HTTP/1.1\r\nHost: {host}\r\n".encode())
                line = 0
                while not closed.done():
                    await asyncio.wait([closed], timeout=1.0)
                    if not closed.done():
                        line += 1
                        writer.write(f"X-Slow-{line}: {line}\r\n".encode())
            elif kind == "short_body":
                writer.write(
                    (
                        f"POST /agent-auth/v1/token HTTP/1.1\r\nHost: {host}\r\n"
                        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                        '{"grant_type"'
                    ).encode()
                )
            await closed
        finally:
            closed.cancel()

    async def _until_closed(self, kind: str, reader: asyncio.StreamReader) -> None:
        first = True
        while True:
            data = await reader.read(65536)
            if not data:
                return
            if first:
                self.answered[kind] += 1  # the server answered (e.g. a timeout error) before closing
                first = False


def _probe(host: str, port: int, timeout: float, deadline: float, results: list, offset: int) -> None:
    index = offset
    while time.monotonic() < deadline:
        method, path, body, headers = PROBES[index % len(PROBES)]
        index += 1
        started = time.monotonic()
        status = None
        try:
            connection = http.client.HTTPConnection(host, port, timeout=timeout)
            try:
                connection.request(method, path, body=body, headers=headers)
                response = connection.getresponse()
                response.read()
                status = response.status
            finally:
                connection.close()
        except (OSError, http.client.HTTPException):
            status = None
        results.append((path, time.monotonic() - started, status))


def measure(
    url: str,
    *,
    connections: int,
    seconds: float,
    probes: int = 4,
    probe_timeout: float = 5.0,
    ramp_seconds: float = 5.0,
) -> dict[str, Any]:
    """Hold ``connections`` slow connections against ``url`` and probe it for ``seconds``."""
    parsed = urllib.parse.urlsplit(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    pressure = _Pressure(host, port, connections)
    pressure.start()
    try:
        ramp_deadline = time.monotonic() + ramp_seconds
        while pressure.open_now < connections and time.monotonic() < ramp_deadline:
            time.sleep(0.05)
        ramp = time.monotonic() - (ramp_deadline - ramp_seconds)
        results: list[tuple[str, float, int | None]] = []
        deadline = time.monotonic() + seconds
        held: list[int] = []
        threads = [
            threading.Thread(
                target=_probe, args=(host, port, probe_timeout, deadline, results, n), daemon=True
            )
            for n in range(probes)
        ]
        for thread in threads:
            thread.start()
        while time.monotonic() < deadline:
            held.append(pressure.open_now)
            time.sleep(0.25)
        for thread in threads:
            thread.join(timeout=probe_timeout + 5)
    finally:
        pressure.stop()

    def figures(rows: list[tuple[str, float, int | None]]) -> dict[str, Any]:
        ok = sorted(latency for _, latency, status in rows if status is not None and status < 500)
        p50, p99 = _percentile(ok, 0.50), _percentile(ok, 0.99)
        return {
            "requests": len(ok),
            "failures": len(rows) - len(ok),
            "p50_ms": None if p50 is None else round(p50 * 1000, 1),
            "p99_ms": None if p99 is None else round(p99 * 1000, 1),
        }

    lifetimes = {}
    for kind, values in pressure.lifetimes.items():
        values = sorted(values)
        median = _percentile(values, 0.5)
        lifetimes[kind] = {
            "closed_by_server": len(values),
            "answered_before_close": pressure.answered[kind],
            "seconds_open_p50": None if median is None else round(median, 2),
        }
    return {
        "target": url,
        "connections": connections,
        "seconds": seconds,
        "ramp_seconds": round(ramp, 2),
        "connections_held_min": min(held, default=0),
        "connections_held_mean": round(sum(held) / len(held), 1) if held else 0,
        "connections_held_max": max(held, default=0),
        "connections_opened": pressure.opened,
        "connect_failures": pressure.connect_failures,
        "slow_connections": lifetimes,
        **figures(results),
        "by_endpoint": {path: figures([r for r in results if r[0] == path]) for _, path, _, _ in PROBES},
    }


@contextlib.contextmanager
def _own_hub(options: dict[str, Any]) -> Iterator[str]:
    """The production topology on a free loopback port (what ``make demo`` starts)."""
    from front.launcher import hub_running

    with hub_running(extra_env=options.get("extra_env")) as url:
        yield url


def report(figures: dict[str, Any], stdout: TextIO) -> None:
    write = stdout.write
    write(
        f"slow clients against {figures['target']}: {figures['connections']} connections for "
        f"{figures['seconds']} s (ramp {figures['ramp_seconds']} s)\n"
    )
    write(
        f"  connections held: mean {figures['connections_held_mean']}, "
        f"min {figures['connections_held_min']}, max {figures['connections_held_max']}; "
        f"opened {figures['connections_opened']}, connect failures {figures['connect_failures']}\n"
    )
    for kind, row in figures["slow_connections"].items():
        write(
            f"  {kind:<12} closed by the server {row['closed_by_server']:>5}, answered first "
            f"{row['answered_before_close']:>5}, open p50 {row['seconds_open_p50']} s\n"
        )
    write(
        f"  requests answered {figures['requests']}, failures {figures['failures']}, "
        f"p50 {figures['p50_ms']} ms, p99 {figures['p99_ms']} ms\n"
    )
    for path, row in figures["by_endpoint"].items():
        write(
            f"    {path:<28} {row['requests']:>6} answered, {row['failures']:>4} failed, "
            f"p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms\n"
        )


def run(*, stdout: TextIO, connections: int = 200, seconds: float = 20.0, **options: Any) -> dict[str, Any]:
    """Run the scenario and print its figures to ``stdout``; returns them.

    Options: ``url`` (a running hub; default: start the production topology), ``probes`` (probe
    threads, 4), ``probe_timeout`` (s, 5), ``extra_env`` (environment for the hub this starts).
    """
    measure_options = {k: options[k] for k in ("probes", "probe_timeout") if options.get(k) is not None}
    url = options.get("url")
    with contextlib.ExitStack() as stack:
        if not url:
            url = stack.enter_context(_own_hub(options))
        figures = measure(url, connections=connections, seconds=seconds, **measure_options)
    report(figures, stdout)
    return figures


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m chaos.slow_clients",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", help="a running hub (default: start the production topology)")
    parser.add_argument(
        "--connections", type=int, default=200, help="slow and idle connections held open at once"
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the slow clients run")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.url:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bailing.settings")
        import django

        django.setup()
    figures = run(stdout=sys.stdout, connections=args.connections, seconds=args.seconds, url=args.url)
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
