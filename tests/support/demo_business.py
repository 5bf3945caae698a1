"""Run the Demo Shop (``python -m demo_business``) as a real child process and call it over HTTP.

Reusable by any test that needs a live business system (tool-provider refresh, tool calls, approval
flows)::

    with running_demo_business() as shop:
        response = shop.call("GET", "/orders", on_behalf_of="alice")

The process listens on an OS-assigned port (``--port 0``), so parallel test sessions never race for
a port; the helper reads the real address from the process's single "listening" line.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bailing import signing

REPO_ROOT = Path(__file__).resolve().parents[2]
LISTENING_PREFIX = "demo business system listening on "
STARTUP_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0


@dataclass
class DemoBusiness:
    """A started Demo Shop: its base URL, the shared tool secret, and a signing HTTP client."""

    base_url: str
    secret: str
    process: subprocess.Popen[str]
    client: httpx.Client

    def url(self, path_with_query: str) -> str:
        return self.base_url + path_with_query

    def sign(
        self,
        method: str,
        path_with_query: str,
        *,
        body: bytes = b"",
        on_behalf_of: str = "",
        job_id: str = "",
        timestamp: int | None = None,
        secret: str | None = None,
    ) -> dict[str, str]:
        return signing.sign_tool_request(
            secret=self.secret if secret is None else secret,
            method=method,
            path_with_query=path_with_query,
            body=body,
            on_behalf_of=on_behalf_of,
            job_id=job_id,
            timestamp=timestamp,
        )

    def call(
        self,
        method: str,
        path_with_query: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        on_behalf_of: str = "",
        job_id: str = "job-demo-test",
        idempotency_key: str | None = None,
        timestamp: int | None = None,
        secret: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Send one request signed exactly like the hub signs a tool call.

        ``json_body`` is serialised compactly here so the signed bytes are the sent bytes.
        """
        if json_body is not None:
            content = json.dumps(json_body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        body = content or b""
        all_headers = self.sign(
            method,
            path_with_query,
            body=body,
            on_behalf_of=on_behalf_of,
            job_id=job_id,
            timestamp=timestamp,
            secret=secret,
        )
        if body:
            all_headers["Content-Type"] = "application/json"
        if idempotency_key is not None:
            all_headers[signing.IDEMPOTENCY_KEY_HEADER] = idempotency_key
        all_headers.update(headers or {})
        return self.client.request(method, self.url(path_with_query), content=body, headers=all_headers)

    def records(self) -> dict[str, Any]:
        """What the shop recorded (tickets, refunds, idempotency keys), via the signed records view."""
        response = self.call("GET", "/_demo/records", job_id="")
        response.raise_for_status()
        return response.json()


def _read_first_line(stream: Any, lines: queue.Queue[str]) -> None:
    # Keep draining after the first line so the child can never block on a full stdout pipe.
    for line in stream:
        lines.put(line)


@contextlib.contextmanager
def running_demo_business(
    *, secret: str | None = None, extra_env: Mapping[str, str] | None = None, host: str = "127.0.0.1"
) -> Iterator[DemoBusiness]:
    """Start ``python -m demo_business --port 0``, wait until it listens, stop it on exit.

    ``host`` is the bind address (``0.0.0.0`` to reach it through a non-loopback interface too).
    """
    secret = secret or "demo-secret-" + secrets.token_hex(16)
    env = {**os.environ, "DEMO_TOOL_SECRET": secret, "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "demo_business", "--host", host, "--port", "0"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=_read_first_line, args=(process.stdout, lines), daemon=True)
        reader.start()
        try:
            try:
                line = lines.get(timeout=STARTUP_TIMEOUT_SECONDS)
            except queue.Empty:
                line = ""
            if not line.startswith(LISTENING_PREFIX):
                stderr.seek(0)
                detail = stderr.read()[-2000:]
                raise RuntimeError(
                    f"demo business system did not start (exit={process.poll()}): {line!r} {detail}"
                )
            base_url = line[len(LISTENING_PREFIX) :].strip()
            with httpx.Client(timeout=10.0) as client:
                yield DemoBusiness(base_url=base_url, secret=secret, process=process, client=client)
        finally:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            reader.join(timeout=STOP_TIMEOUT_SECONDS)
            if process.stdout is not None:
                process.stdout.close()
