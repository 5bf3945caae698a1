"""What the benchmark commands share: a free loopback port, a gunicorn process under the real config,
waiting for ``/health``, and latency percentiles. Benchmarks print figures; they are never tests."""

from __future__ import annotations

import contextlib
import http.client
import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from django.conf import settings

from bailing.front.launcher import stop_process


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(port: int, timeout: float = 30.0) -> None:
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


@contextlib.contextmanager
def gunicorn_running(
    *, workers: int | None = None, extra_env: Mapping[str, str] | None = None
) -> Iterator[int]:
    """Run the hub under ``bailing/gunicorn.conf.py`` on a free loopback port; yields the port and stops
    the server (and waits for it) on exit."""
    port = free_port()
    env = {**os.environ, "BAILING_BIND": f"127.0.0.1:{port}", **(extra_env or {})}
    if workers:
        env["GUNICORN_WORKERS"] = str(workers)
    gunicorn = Path(sys.executable).with_name("gunicorn")
    server = subprocess.Popen(
        [str(gunicorn), "-c", str(settings.BASE_DIR / "bailing" / "gunicorn.conf.py"), "bailing.wsgi"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_ready(port)
        yield port
    finally:
        stop_process(server, timeout=30)


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values (0 for none)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]
