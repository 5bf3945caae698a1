"""The production topology: gunicorn on a private unix socket, the front on ``BAILING_BIND``.

``python -m front`` (what ``scripts/run-demo`` runs, and what a service manager should run in
production) starts gunicorn under ``bailing/gunicorn.conf.py`` bound to a socket in a fresh 0700
directory — only this user can reach it, and it is the only way into gunicorn — with the PROXY
protocol on, waits until it accepts, then serves the front on ``BAILING_BIND`` in the foreground.
SIGTERM or SIGINT (Ctrl-C) stops the front (requests in flight get gunicorn's graceful timeout), then
gunicorn; if gunicorn exits by itself, the front stops too and exits non-zero.

:func:`hub_running` starts that same command on a free loopback port for tests and chaos runs, and
stops it afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.client
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
GUNICORN_CONF = ROOT / "bailing" / "gunicorn.conf.py"

logger = logging.getLogger("bailing.front")


def split_bind(bind: str) -> tuple[str, int]:
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit():
        raise SystemExit(f"BAILING_BIND must be HOST:PORT, not {bind!r}")
    return host.strip("[]"), int(port)


def _socket_accepts(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        try:
            probe.connect(path)
        except OSError:
            return False
    return True


def gunicorn_limit_args(config) -> list[str]:
    """gunicorn's request limits from the front's (:func:`front.server.upstream_limits`), as
    command-line options: they override bailing/gunicorn.conf.py, which keeps gunicorn's defaults for
    gunicorn run alone."""
    from gunicorn.config import KNOWN_SETTINGS

    from front.server import upstream_limits

    option = {setting.name: setting.cli[0] for setting in KNOWN_SETTINGS if setting.cli}
    return [f"{option[name]}={value}" for name, value in upstream_limits(config).items()]


def start_gunicorn(socket_path: str, config) -> subprocess.Popen:
    # BAILING_BEHIND_FRONT: every request gunicorn serves came through the front, which already dropped
    # the forwarding headers of untrusted peers and put the client's address in the PROXY line.
    env = {
        **os.environ,
        "BAILING_BIND": f"unix:{socket_path}",
        "GUNICORN_PROXY_PROTOCOL": "v1",
        "BAILING_BEHIND_FRONT": "true",
    }
    gunicorn = Path(sys.executable).with_name("gunicorn")
    # Its own session: Ctrl-C reaches the front, which then stops gunicorn in order.
    return subprocess.Popen(
        [str(gunicorn), "-c", str(GUNICORN_CONF), *gunicorn_limit_args(config), "bailing.wsgi"],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )


def stop_process(process: subprocess.Popen, timeout: float) -> int:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def front_config(socket_path: str):
    from django.conf import settings

    from bailing.api.parsers import path_body_budget
    from front.server import FrontConfig

    return FrontConfig(
        upstream=socket_path,
        body_budget=functools.lru_cache(maxsize=4096)(path_body_budget),
        header_timeout=settings.BAILING_FRONT_HEADER_TIMEOUT,
        body_timeout=settings.BAILING_FRONT_BODY_TIMEOUT,
        keepalive_timeout=settings.BAILING_FRONT_KEEPALIVE_TIMEOUT,
        send_timeout=settings.BAILING_FRONT_SEND_TIMEOUT,
        upstream_timeout=float(os.environ.get("GUNICORN_TIMEOUT") or 60) + 15,
        max_body_bytes=settings.BAILING_FRONT_MAX_BODY_BYTES,
        max_connections=settings.BAILING_FRONT_MAX_CONNECTIONS,
        trusted_proxies=tuple(settings.BAILING_TRUSTED_PROXIES),
    )


async def _serve(host: str, port: int, config, gunicorn: subprocess.Popen) -> int:
    from front.server import Front

    front = Front(config)
    addresses = await front.start(host, port)
    logger.info("front listening on %s, gunicorn behind it on a private unix socket", addresses)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    code = 0
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)
        if gunicorn.poll() is not None:
            logger.error("gunicorn exited (%s); stopping the front", gunicorn.returncode)
            code = 1
            break
    await front.stop(grace=20)
    return code


def _metrics_dir() -> str | None:
    """PROMETHEUS_MULTIPROC_DIR for gunicorn's workers (bailing/metrics.py), set before anything
    imports prometheus_client. A given directory is used (gunicorn's conf empties it at start);
    otherwise a fresh one is made and returned, to be removed on exit."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        os.makedirs(given, mode=0o700, exist_ok=True)
        return None
    made = tempfile.mkdtemp(prefix="bailing-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = made
    return made


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bailing.settings")
    made_metrics_dir = _metrics_dir()
    try:
        return _main()
    finally:
        if made_metrics_dir:
            shutil.rmtree(made_metrics_dir, ignore_errors=True)


def _main() -> int:
    import django

    django.setup()  # settings start (or attach to) the embedded PostgreSQL, as gunicorn's would
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 -- the URLconf (and every view) loaded before serving
    host, port = split_bind(os.environ.get("BAILING_BIND") or "127.0.0.1:8000")
    run_dir = tempfile.mkdtemp(prefix="bailing-front-")  # 0700: only this user reaches gunicorn
    socket_path = os.path.join(run_dir, "gunicorn.sock")
    config = front_config(socket_path)
    gunicorn = start_gunicorn(socket_path, config)
    try:
        deadline = time.monotonic() + 120
        while not _socket_accepts(socket_path):
            if gunicorn.poll() is not None:
                logger.error("gunicorn exited (%s) before it listened", gunicorn.returncode)
                return 1
            if time.monotonic() > deadline:
                logger.error("gunicorn did not listen within 120 seconds")
                return 1
            time.sleep(0.1)
        return asyncio.run(_serve(host, port, config, gunicorn))
    finally:
        stop_process(gunicorn, timeout=30)
        shutil.rmtree(run_dir, ignore_errors=True)


# --- for tests and chaos runs ---------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_answering(port: int, process: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until the hub answers ``/health`` at all (whatever the status: the database may be down)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the hub exited ({process.returncode}) before it answered")
        # Closed however the probe ends: a socket left to the garbage collector is a ResourceWarning,
        # an error under the test suite's warnings-as-errors (a hub still starting times out here).
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            connection.request("GET", "/health")
            connection.getresponse().read()
            return
        except (OSError, http.client.HTTPException):
            time.sleep(0.2)
        finally:
            connection.close()
    raise RuntimeError("the hub did not answer within the time allowed")


@contextlib.contextmanager
def hub_running(*, extra_env: Mapping[str, str] | None = None, log: IO | None = None) -> Iterator[str]:
    """``python -m front`` on a free loopback port; yields its URL, then stops it (and gunicorn)."""
    port = free_port()
    env = {**os.environ, "BAILING_BIND": f"127.0.0.1:{port}", **(extra_env or {})}
    output = log if log is not None else subprocess.DEVNULL
    process = subprocess.Popen(
        [sys.executable, "-m", "front"], cwd=ROOT, env=env, stdout=output, stderr=output
    )
    try:
        wait_answering(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process, timeout=45)
