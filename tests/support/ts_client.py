"""The TypeScript MCP client of the suite (tests/mcp_server/ts_client/): installed from its lock file
with the machine's npm, run with the machine's Node.js, its JSON lines read as they come.

The install goes to ``var/ts-client/<hash of package.json and package-lock.json>/`` (gitignored), so
repeated runs reuse it and a changed lock file installs afresh (removing the earlier install);
``npm ci`` installs exactly what the lock file names, or fails. A file lock keeps parallel xdist
workers from installing twice. Node.js or npm missing is a failure with the command to run
(``scripts/ensure-node``), never a skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

SOURCE = Path(settings.BASE_DIR) / "tests" / "mcp_server" / "ts_client"
CACHE = Path(settings.BASE_DIR) / "var" / "ts-client"
INSTALL_TIMEOUT_SECONDS = 300
MANIFESTS = ("package.json", "package-lock.json")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} is not on PATH: the TypeScript SDK test needs Node.js >= 20 and npm "
            "(run scripts/ensure-node, which `make test` runs)",
            pytrace=False,
        )
    return path


def node_version() -> str:
    done = subprocess.run([_tool("node"), "--version"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def installed_client() -> Path:
    """The clients' folder with its locked dependencies installed; the ``*.mjs`` scripts copied in fresh."""
    node, npm = _tool("node"), _tool("npm")
    major = int(node_version().lstrip("v").split(".", 1)[0])
    assert major >= 20, f"{node} is Node.js {major}: the TypeScript SDK test needs Node.js >= 20"
    digest = hashlib.sha256(b"".join((SOURCE / name).read_bytes() for name in MANIFESTS)).hexdigest()[:16]
    target = CACHE / digest
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = target / ".installed"
        if not stamp.exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for name in MANIFESTS:
                shutil.copyfile(SOURCE / name, target / name)
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=target,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_SECONDS,
            )
            assert done.returncode == 0, f"npm ci failed in {target}:\n{done.stdout}\n{done.stderr}"
            stamp.write_text(digest)
            for stale in CACHE.iterdir():  # installs of earlier lock files
                if stale.is_dir() and stale != target:
                    shutil.rmtree(stale, ignore_errors=True)
        for script in SOURCE.glob("*.mjs"):
            fresh = target / f"{script.name}.new"
            shutil.copyfile(script, fresh)
            os.replace(fresh, target / script.name)
    return target


class ClientRun:
    """A running ``node client.mjs``: its stdout JSON lines in order, its stderr kept for failures."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self.readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read_stdout(self) -> None:
        for line in self.process.stdout:
            line = line.strip()
            if line:
                try:
                    self.lines.put(json.loads(line))
                except json.JSONDecodeError:
                    self.lines.put({"step": "unparsed", "line": line})
        self.lines.put(None)

    def _read_stderr(self) -> None:
        for line in self.process.stderr:
            self.stderr.append(line)

    def next_step(self, timeout: float) -> dict[str, Any]:
        try:
            event = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the TypeScript client printed nothing for {timeout} s; so far {self.seen}")
        if event is None:
            raise AssertionError(f"the TypeScript client ended early: {self.seen} {''.join(self.stderr)}")
        self.seen.append(event)
        return event

    def until(self, step: str, timeout: float) -> dict[str, Any]:
        """The next event named ``step`` (events before it are kept in ``seen``); an error event fails."""
        deadline = time.monotonic() + timeout
        while True:
            event = self.next_step(max(0.1, deadline - time.monotonic()))
            failed = event["step"] == "error"
            assert not failed, f"the TypeScript client failed: {self.seen} {''.join(self.stderr)}"
            if event["step"] == step:
                return event

    def step(self, name: str) -> dict[str, Any]:
        (event,) = [event for event in self.seen if event["step"] == name]
        return event


@contextlib.contextmanager
def running_client(folder: Path, script: str, *args: str) -> Iterator[ClientRun]:
    """``node <script> *args`` in ``folder``; stopped (then killed) on the way out, whatever happened."""
    process = subprocess.Popen(
        [_tool("node"), str(folder / script), *args],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run = ClientRun(process)
    try:
        yield run
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        for reader in run.readers:
            reader.join(timeout=5)
        process.stdout.close()
        process.stderr.close()
