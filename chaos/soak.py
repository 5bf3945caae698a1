"""The soak: the shipped topology under a mixed agent workload for a given time, with scheduled faults.

Run by ``manage.py bailing_soak`` inside a child process whose settings point at a dedicated embedded
PostgreSQL (:func:`chaos.live.dedicated_run`; never the dev or test database). What it decided:

**Topology** (every process started here, and stopped on every exit path; their pids are also written
to ``<work>/pids`` so the parent can kill what a crashed child left): the demo's database supervisor
(``python -m bailing.db.embedded supervise``), the hub as shipped (``python -m front``: the front and
gunicorn behind it, ``GUNICORN_WORKERS`` workers, the shipped ``bailing/gunicorn.conf.py`` otherwise,
its ``max_requests`` recycling included), one ``manage.py knowledge_worker`` and the Demo Shop
(``python -m demo_business``). The hub reaches the shop through :class:`chaos.reset_proxy.ResetProxy`,
a TCP proxy in this process (tool calls and approval webhooks); the shop reaches the hub directly.
Order: the supervisor, the hub (booting while the database is migrated), the knowledge worker, the
shop and the proxy, then ``bailing_demo --shop-url <proxy>`` (seeds users, the demo
workspace, the provider — refreshed against the running shop — and the demo knowledge), then this
module's own overlay of ``examples/demo.yaml``: a ``soak-agent`` client without a rate limit (the demo
agent's 120/min would throttle the load) whose Client Token the shop holds (the hub signs approval
webhooks with the calling client's token), the Demo Shop provider without a dispatch limit, and
``create_ticket`` forced to need approval on the demo workspace (the shop's refunds and cancellations
run out after a few calls; tickets do not). The tool secret is ``var/demo-tool-secret``, created as
``bailing_demo`` creates it. One agent session of ``soak-agent`` acts for ``alice``.

**Workload**: ``--threads`` threads, each picking a kind by weight (:data:`WEIGHTS`), pausing
``--interval`` between requests. Kinds: ``bootstrap``, ``turn`` (a new turn each time), ``knowledge``
(search), ``read_call`` (governed ``get_order``, run-less), ``write_call`` (governed ``create_ticket``
in a run of its own, from a fresh turn; answered ``awaiting_approval``; its message carries the
invocation id), ``resume`` (the same thread resumes that invocation every 0.3 s until it leaves
``awaiting_approval``), ``mcp`` (``tools/call search_knowledge``, plain JSON-RPC, the 2026-07-28
per-request envelope). Each request is recorded: kind, sent, latency, status. Writes are paced
:data:`WRITE_EVERY_SECONDS` apart across all threads, under ``create_ticket``'s ACC rate limit of 30
a minute (a thread whose turn it is not makes a ``read_call`` instead). Each write has its own run
because an unknown outcome freezes the write calls of its run (run-less: of the whole session): a
read call cut by a fault would otherwise freeze every later write. A write, resume or turn that gets no
200 (an outage) is sent again with the same ids, and a result that allows an automatic retry after
``retry_after_ms``, as the protocol allows; a write still waiting after ``APPROVAL_WAIT`` is counted
``approval_stuck`` (a lost webhook is a finding, never hidden). A simulated approver thread polls the
shop's ``/approvals.json`` and approves each pending request through the shop's own
``/approvals/<id>/approve`` form post, as a person on its approvals page does; the shop posts the
decision to the hub. It runs until the last write has ended.

**Faults**: spread evenly over the middle of the run (between 35 % and 75 % of it; one of each for a
short run, then one more round of each per 7 minutes): ``db-restart`` (fast shutdown of the dedicated
server; the supervisor brings it back; recovered at the first 200 after it accepts again),
``worker-kill`` (SIGKILL of one gunicorn worker; recovered once the master has its full count again
and a request answered 200), ``business-reset`` (the proxy resets every connection for
``RESET_SECONDS``; recovered at the first executed ``read_call`` sent after that). A fault's window is
[start, recovered]; a request belongs to it when its [sent, answered] overlaps it.

**Figures**: buckets of 60 s, or of 10 s when the run is shorter than 3 minutes (``bucket_seconds``
in the JSON): req/s, p50/p99 per kind, statuses, 5xx (and no-answer) inside and outside fault
windows, RSS (and PSS) per role summed over its processes (front, gunicorn master, gunicorn workers, knowledge
worker, Demo Shop, supervisor, postmaster, PostgreSQL backends) sampled at each bucket's end, TCP
connections to the hub's port, and the journal (``create_ticket`` invocations executed) against the
shop's tickets, both cumulative. At the end each executed invocation is matched with the ticket
carrying its id: lost (executed, no ticket), duplicated (two tickets), business-only (a ticket whose
invocation is not executed), and of those the unflagged ones (the hub does not even mark the call as
an unknown outcome: ``reconciliation_required`` or left ``dispatching``). Every governed call of the
soak's client is also counted by tool, status and reason code (``journal_outcomes``).

**Goals** (``verdict``, each pass/fail with its figures; a missed goal is printed, never an exit
code): no 5xx outside fault windows (and only 503 inside database outages); memory growth ≤ 10 %, as PSS
summed over every process (a sum of RSS counts the shared buffers again in every PostgreSQL backend),
from the first sample at or after min(120 s, a third of the run) to the last; p99 of the last bucket
≤ 1.5 × the second bucket's, over requests outside fault windows (``resume`` polls excluded); journal
and business agree: 0 lost, 0 duplicated, no unflagged business-only write (``counts_equal`` says
whether the two counts are equal too: a write whose outcome the hub marked unknown may differ until an
operator reconciles it). ``faults_recovered``: every fault ended in a recovery.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.management import call_command
from django.db import connections

from agent_runtime.config import ConfigError
from agent_runtime.models import Client, ToolInvocation
from agent_runtime.services.clients import client_token_set
from agent_runtime.services.config_apply import config_apply
from bailing import signing
from bailing.audit.actor import Actor
from bailing.db import embedded
from benchmarks.fixtures import agent_session_open
from benchmarks.front import rss_kib
from benchmarks.harness import git_commit, machine_info, percentile, process_table
from chaos.live import HubConnection, accepting, wait_for
from chaos.reset_proxy import ResetProxy
from front.launcher import free_port, stop_process, wait_answering

SCHEMA = "bailing.soak.v1"
ROUTE = "demo"
CLIENT_APP_ID = "soak-agent"
SUBJECT = "alice"
KINDS = ("bootstrap", "turn", "knowledge", "read_call", "write_call", "resume", "mcp")
# Weights of the kinds a thread picks (resume follows write_call by itself).
WEIGHTS = {"bootstrap": 3, "turn": 3, "knowledge": 3, "read_call": 3, "write_call": 1, "mcp": 2}
FAULTS = ("db-restart", "worker-kill", "business-reset")
# create_ticket's ACC rate limit is 30 a minute: the writes are paced under it, across all threads.
WRITE_EVERY_SECONDS = 2.5
RESET_SECONDS = 3.0
APPROVAL_WAIT = 30.0
RECOVERY_TIMEOUT = 60.0
RETRY_PAUSE = 0.1
RESUME_PAUSE = 0.3
DEMO_CONFIG = Path(settings.BASE_DIR) / "examples" / "demo.yaml"
TOOL_SECRET_FILE = Path(settings.BASE_DIR) / "var" / "demo-tool-secret"
LISTENING_PREFIX = "demo business system listening on "
MODERN_MCP = "2026-07-28"
# Journal states of a call whose outcome the hub does not know (docs/protocol.md "Unknown outcomes").
UNKNOWN_OUTCOME = ("reconciliation_required", "dispatching")


@dataclass
class Answer:
    kind: str
    sent: float
    latency: float
    status: int  # 0: no HTTP answer
    ok: bool = True  # the body says what was asked happened (an executed call, a search answered)

    @property
    def done(self) -> float:
        return self.sent + self.latency


@dataclass
class Load:
    """What the load threads, the approver and the fault scheduler share."""

    answers: list[Answer] = field(default_factory=list)
    writes: dict[str, str] = field(default_factory=dict)  # invocation id → last state seen
    approvals: Counter = field(default_factory=Counter)  # approver outcomes
    retries: Counter = field(default_factory=Counter)  # automatic retries of writes, by cause
    next_write: float = 0.0  # when the next write may start (WRITE_EVERY_SECONDS apart)
    lock: threading.Lock = field(default_factory=threading.Lock)
    answered: threading.Condition = field(init=False)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self):
        self.answered = threading.Condition(self.lock)

    def record(self, answer: Answer) -> None:
        with self.answered:
            self.answers.append(answer)
            self.answered.notify_all()

    def mark(self) -> int:
        """Where the answers recorded from now on begin (for :meth:`first`)."""
        with self.lock:
            return len(self.answers)

    def first(self, predicate: Callable[[Answer], bool], timeout: float, start: int = 0) -> float | None:
        """When the first answer from index ``start`` on that matches ``predicate`` arrived, waiting up
        to ``timeout``. Answers are appended as they arrive, so each is looked at once: a wait stays
        cheap however long the run has been (the lock is the load threads' too)."""
        deadline = time.monotonic() + timeout
        position = start
        with self.answered:
            while True:
                for answer in self.answers[position:]:
                    if predicate(answer):
                        return answer.done
                position = len(self.answers)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self.answered.wait(min(remaining, 0.5))


# --- processes --------------------------------------------------------------------------------------


class Processes:
    """Every process the soak starts, by role; stopped in reverse order, whatever happens."""

    def __init__(self, work: Path):
        self.work = work
        self.started: list[tuple[str, subprocess.Popen]] = []
        self.pids: dict[str, list[int]] = {}
        self._pid_file = work / "pids"

    def start(
        self, role: str, argv: list[str], *, env: dict[str, str], log: Path, **kwargs
    ) -> subprocess.Popen:
        with log.open("a") as out:
            process = subprocess.Popen(
                argv, cwd=settings.BASE_DIR, env=env, stdout=kwargs.pop("stdout", out), stderr=out, **kwargs
            )
        self.started.append((role, process))
        self.note(role, process.pid)
        return process

    def note(self, role: str, pid: int) -> None:
        """Remember a pid (started here or by a started process: gunicorn and its workers)."""
        if pid in self.pids.setdefault(role, []):
            return
        self.pids[role].append(pid)
        with self._pid_file.open("a") as out:
            out.write(f"{pid}\n")

    def stop_all(self) -> dict[str, float]:
        """Stop everything; how long each role took to stop (seconds)."""
        took: dict[str, float] = {}
        for role, process in reversed(self.started):
            began = time.monotonic()
            with contextlib.suppress(Exception):
                stop_process(process, timeout=45 if role == "front" else 20)
            took[role] = round(time.monotonic() - began, 2)
        # gunicorn runs in its own session: a front that could not stop it leaves it behind.
        for role in ("gunicorn_master", "gunicorn_worker"):
            for pid in self.pids.get(role, []):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        return took

    def alive(self) -> list[int]:
        """The pids remembered that still run (a zombie not yet reaped by its parent does not)."""
        return sorted(pid for pids in self.pids.values() for pid in pids if pid_running(pid))


def pid_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _children(table, pid: int) -> list[int]:
    return sorted(stat.pid for stat in table.values() if stat.ppid == pid)


def _roles(processes: Processes, pgdata: Path) -> dict[str, list[int]]:
    """The live pids of every role right now (gunicorn's workers change: recycled, killed)."""
    table = process_table()
    roles: dict[str, list[int]] = {}
    for role, process in processes.started:
        if process.poll() is None:
            roles[role] = [process.pid]
    front = roles.get("front", [])
    masters = [pid for pid in _children(table, front[0]) if "gunicorn" in _cmdline(pid)] if front else []
    roles["gunicorn_master"] = masters
    roles["gunicorn_worker"] = [w for m in masters for w in _children(table, m)]
    for role in ("gunicorn_master", "gunicorn_worker"):
        for pid in roles[role]:
            processes.note(role, pid)
    postmaster = embedded.embedded_postmaster_pid(pgdata)
    roles["postmaster"] = [postmaster] if postmaster and postmaster in table else []
    roles["postgres_backends"] = _children(table, postmaster) if roles["postmaster"] else []
    return roles


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _hub_connections(port: int) -> int:
    """Established TCP connections whose local port is the hub's (clients connected to the front)."""
    count = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


# --- the shop -----------------------------------------------------------------------------------------


def _tool_secret() -> str:
    """``var/demo-tool-secret``, created as ``bailing_demo`` creates it when missing (mode 0600)."""
    path = TOOL_SECRET_FILE
    if not path.exists() or not path.read_text().strip():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
    return path.read_text().strip()


class Shop:
    """The Demo Shop process's address, and the two reads the soak makes of it directly."""

    def __init__(self, port: int, secret: str):
        self.port = port
        self.secret = secret

    def _get(self, path: str, headers: dict[str, str] | None = None, timeout: float = 5) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path, headers=headers or {})
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(f"shop {path}: {response.status}")
            return json.loads(body)
        finally:
            conn.close()

    def records(self) -> dict[str, Any]:
        headers = signing.sign_tool_request(
            secret=self.secret, method="GET", path_with_query="/_demo/records", body=b""
        )
        return self._get("/_demo/records", headers)

    def approvals(self) -> list[dict[str, Any]]:
        return self._get("/approvals.json")["approvals"]

    def approve(self, approval_id: int) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
        try:
            body = urllib.parse.urlencode({"comment": "soak approver"})
            headers = {
                "Content-Type": "application/x-www-form-urlencoded",
                "Origin": f"http://127.0.0.1:{self.port}",
            }
            conn.request("POST", f"/approvals/{approval_id}/approve", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            return response.status
        finally:
            conn.close()


def _shop_start(processes: Processes, work: Path, *, secret: str, token: str, hub_url: str) -> Shop:
    env = {
        **os.environ,
        "DEMO_TOOL_SECRET": secret,
        "DEMO_CLIENT_TOKEN": token,
        "DEMO_HUB_URL": hub_url,
        "PYTHONUNBUFFERED": "1",
    }
    process = processes.start(
        "shop",
        [sys.executable, "-m", "demo_business", "--host", "127.0.0.1", "--port", "0"],
        env=env,
        log=work / "shop.log",
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline()
    if not line.startswith(LISTENING_PREFIX):
        raise RuntimeError(f"the Demo Shop did not start: {line!r}")
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()  # drain
    return Shop(int(line.strip().rsplit(":", 1)[1]), secret)


# --- seeding ------------------------------------------------------------------------------------------


def _seed(*, hub_url: str, proxy_url: str, token: str, say: Callable[[str], None]) -> str:
    """``bailing_demo`` against the running shop (through the proxy), then the soak's overlay; the
    soak session's access token."""
    banner = _Sink()
    call_command("bailing_demo", shop_url=proxy_url, public_url=hub_url, stdout=banner)
    tools_line = next((line for line in banner.text.splitlines() if "Demo Shop tools" in line), "")
    say(f"seeded the demo: {tools_line.strip() or 'no tools line'}")
    document = yaml.safe_load(DEMO_CONFIG.read_text(encoding="utf-8"))
    provider = next(p for p in document["tool_providers"] if p["name"] == "demo-shop")
    provider["base_url"] = proxy_url
    provider["rate_limit_per_min"] = 0
    route = next(r for r in document["routes"] if r["route_key"] == ROUTE)
    route["tools"]["approval"]["url"] = f"{proxy_url}/approvals"
    route["tools"]["agent_direct"]["force_approval_tools"] = ["create_ticket"]
    route["tools"].pop("max_calls", None)
    document["clients"].append(
        {
            "app_id": CLIENT_APP_ID,
            "name": "Soak agent",
            "hub_consent": True,
            "allowed_routes": [ROUTE],
            "rate_limit_per_min": 0,
        }
    )
    try:
        config_apply(document=document, dry_run=False, actor=Actor.system("bailing_soak"))
    except ConfigError as exc:
        raise RuntimeError(f"the soak's overlay of examples/demo.yaml: {exc.path}: {exc.reason}") from exc
    client = Client.objects.get(app_id=CLIENT_APP_ID)
    client_token_set(client=client, token=token, actor=Actor.system("bailing_soak"))
    _, access = agent_session_open(
        client=client, routes=[ROUTE], subject=SUBJECT, device_label="soak", access_hours=24
    )
    connections.close_all()
    return access


class _Sink:
    def __init__(self):
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


# --- the workload -------------------------------------------------------------------------------------


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


class Agent:
    """One load thread's connection and state."""

    def __init__(self, index: int, *, port: int, token: str, load: Load, interval: float, seed: int):
        # 30 s: on a busy machine a request may take seconds; one that takes longer is "no answer". A
        # thread may pause for seconds (a retry_after_ms): below the front's keep-alive, reconnect.
        self.conn = HubConnection(port, token, f"soak-{index}", timeout=30, idle_close=4.0)
        self.index = index
        self.load = load
        self.interval = interval
        self.random = random.Random(seed)  # noqa: S311 -- a workload mix, not a secret
        self.revision: str | None = None
        self.turns = 0

    def send(self, kind: str, method: str, path: str, body: Any = None, headers=None) -> tuple[int, Any]:
        raw = None if body is None else json.dumps(body).encode()
        sent = time.monotonic()
        status, data = self.conn.request(method, path, raw, headers)
        answer = Answer(kind, sent, time.monotonic() - sent, status)
        document = _json(data) if status == 200 else None
        answer.ok = status == 200 and self._ok(kind, document)
        self.load.record(answer)
        return status, document

    @staticmethod
    def _ok(kind: str, document: Any) -> bool:
        if not isinstance(document, dict):
            return False
        if kind == "read_call":
            return document.get("state") == "executed"
        if kind == "mcp":
            return "result" in document and not document["result"].get("isError")
        return True

    def loop(self) -> None:
        kinds = list(WEIGHTS)
        weights = [WEIGHTS[k] for k in kinds]
        try:
            while not self.load.stop.is_set():
                kind = self.random.choices(kinds, weights)[0]
                if kind == "write_call" and not self._write_turn():
                    kind = "read_call"
                getattr(self, kind)()
                self.load.stop.wait(self.interval)
        finally:
            self.conn.close()

    def _write_turn(self) -> bool:
        """May this thread start a write now (the shared pace under the tool's rate limit)?"""
        with self.load.lock:
            now = time.monotonic()
            if now < self.load.next_write:
                return False
            self.load.next_write = now + WRITE_EVERY_SECONDS
            return True

    def bootstrap(self) -> None:
        status, document = self.send("bootstrap", "GET", f"/agent-api/v1/workspaces/{ROUTE}/bootstrap")
        if status == 200 and isinstance(document, dict):
            self.revision = document["capabilities"]["revision"]

    def turn(self) -> str | None:
        """A new turn; its run id when answered 200."""
        self.turns += 1
        conversation = f"soak-{self.index}-{self.turns // 10}"
        body = {
            "client_conversation_id": conversation,
            "client_turn_id": f"turn-{self.turns}",
            "user_message_id": f"{conversation}-{self.turns}",
            "user_input": f"Soak turn {self.turns}: where is my order SO-1003?",
        }
        status, document = self.send("turn", "POST", f"/agent-api/v1/workspaces/{ROUTE}/turns", body)
        return document.get("run_id") if status == 200 and isinstance(document, dict) else None

    def knowledge(self) -> None:
        query = self.random.choice(("refund policy", "how long does shipping take", "cancel an order"))
        self.send("knowledge", "POST", f"/agent-api/v1/workspaces/{ROUTE}/knowledge/search", {"query": query})

    def mcp(self) -> None:
        message = {
            "jsonrpc": "2.0",
            "id": self.conn.sent + 1,
            "method": "tools/call",
            "params": {
                "name": "search_knowledge",
                "arguments": {"query": "returns and refunds"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN_MCP,
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "bailing-soak", "version": "1"},
                },
            },
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN_MCP,
            "Mcp-Method": "tools/call",
            "Mcp-Name": "search_knowledge",
        }
        self.send("mcp", "POST", f"/mcp/{ROUTE}", message, headers)

    def _invoke(
        self, kind: str, tool: str, arguments: dict, invocation_id: str, run_id: str | None = None
    ) -> tuple[int, Any]:
        if self.revision is None:
            self.bootstrap()
            if self.revision is None:
                return 0, None
        body = {
            "invocation_id": invocation_id,
            "route": ROUTE,
            "tool": tool,
            "arguments": arguments,
            "capability_revision": self.revision,
        }
        if run_id is not None:
            body["agent_run_id"] = run_id
        status, document = self.send(kind, "POST", "/agent-api/v1/tool-invocations", body)
        if status == 409:
            self.revision = None  # a new revision (the config changed): bootstrap again
        return status, document

    def read_call(self) -> None:
        self._invoke("read_call", "get_order", {"order_id": "SO-1001"}, secrets.token_hex(32))

    def write_call(self) -> None:
        """create_ticket (needs approval), sent until answered, then resumed until decided. A result
        that allows an automatic retry (``in_progress``; ``rejected_before_dispatch`` by a limit or the
        provider bulkhead, nothing stored or the approval kept) is retried after ``retry_after_ms``,
        the same invocation id each time, as the protocol allows."""
        give_up = time.monotonic() + APPROVAL_WAIT + RECOVERY_TIMEOUT
        run_id = self.turn()
        while run_id is None and time.monotonic() < give_up and not self.load.stop.is_set():
            time.sleep(RETRY_PAUSE)
            self.turns -= 1  # the same turn again, same ids
            run_id = self.turn()
        if run_id is None:
            return
        invocation_id = secrets.token_hex(32)
        arguments = {"subject": "Soak ticket", "message": f"soak invocation {invocation_id}"}
        with self.load.lock:
            self.load.writes[invocation_id] = "sending"
        document: Any = None
        state = None
        resume = False  # once the hub answered awaiting_approval, the invocation is stored: resume it
        waiting_since = None
        while time.monotonic() < give_up:
            if resume:
                status, document = self.send(
                    "resume", "POST", f"/agent-api/v1/tool-invocations/{invocation_id}/resume", {}
                )
            else:
                status, document = self._invoke(
                    "write_call", "create_ticket", arguments, invocation_id, run_id
                )
            if status != 200 or not isinstance(document, dict):
                if status not in (0, 409, 502, 503, 504):
                    state = f"http_{status}"
                    break
                time.sleep(RETRY_PAUSE)
                continue
            state = document.get("state")
            if state == "awaiting_approval":
                resume = True
                waiting_since = waiting_since or time.monotonic()
                if time.monotonic() - waiting_since > APPROVAL_WAIT:
                    state = "approval_stuck"
                    break
                time.sleep(RESUME_PAUSE)
            elif document.get("auto_retry_allowed"):
                with self.load.lock:
                    self.load.retries[_reason(document)] += 1
                time.sleep(max(RETRY_PAUSE, (document.get("retry_after_ms") or 0) / 1000))
            else:
                break
        final = state or "unanswered"
        if isinstance(document, dict) and final not in ("executed", "approval_stuck"):
            final = f"{final}:{_reason(document)}"
        with self.load.lock:
            self.load.writes[invocation_id] = final


def _reason(document: dict) -> str:
    """What a governed call's result names as its cause, in a word."""
    for key in ("concurrency_limit", "rate_limit", "reconciliation"):
        if document.get(key):
            return key
    return str(document.get("state"))


def _approver(shop: Shop, load: Load, stop: threading.Event) -> None:
    """Approve every pending request on the shop's page, as its approver would."""
    decided: set[int] = set()
    while not stop.is_set():
        try:
            pending = [r["approval_id"] for r in shop.approvals() if r.get("status") == "pending"]
        except (OSError, RuntimeError, ValueError, http.client.HTTPException):
            pending = []
        for approval_id in pending:
            if approval_id in decided:
                continue
            try:
                status = shop.approve(approval_id)
            except (OSError, http.client.HTTPException):
                status = 0
            with load.lock:
                load.approvals[str(status)] += 1
            if status == 303:
                decided.add(approval_id)
        stop.wait(0.2)


# --- faults -------------------------------------------------------------------------------------------


def fault_schedule(seconds: float, faults: list[str]) -> list[tuple[float, str]]:
    """(offset, fault): rounds of every fault, evenly between 35 % and 75 % of the run."""
    if not faults:
        return []
    rounds = max(1, int(seconds // 420))
    names = [name for _ in range(rounds) for name in faults]
    first, last = 0.35 * seconds, 0.75 * seconds
    step = (last - first) / max(1, len(names) - 1)
    return [(first + i * step if len(names) > 1 else first, name) for i, name in enumerate(names)]


def _fault(name: str, *, pgdata: Path, processes: Processes, proxy: ResetProxy, load: Load, say) -> dict:
    start = time.monotonic()
    since = load.mark()  # no answer recorded before the fault can tell of its recovery
    detail: dict[str, Any] = {}
    recovered = None
    if name == "db-restart":
        embedded.embedded_server_stop(pgdata)
        stopped = time.monotonic()
        back = wait_for(accepting, timeout=RECOVERY_TIMEOUT)
        detail["server_back_after_seconds"] = None if back is None else round(back - start, 2)
        if back is not None:
            recovered = load.first(
                lambda a: a.status == 200 and a.sent > stopped and a.done >= back, RECOVERY_TIMEOUT, since
            )
    elif name == "worker-kill":
        roles = _roles(processes, pgdata)
        workers = roles["gunicorn_worker"]
        victim = workers[0]  # the lowest pid: most often the longest-serving
        os.kill(victim, signal.SIGKILL)
        detail["killed_pid"] = victim

        def replaced() -> bool:
            now = _roles(processes, pgdata)["gunicorn_worker"]
            return victim not in now and len(now) >= len(workers)

        full = wait_for(replaced, timeout=RECOVERY_TIMEOUT, poll=0.1)
        detail["workers_back_after_seconds"] = None if full is None else round(full - start, 2)
        if full is not None:
            recovered = load.first(lambda a: a.status == 200 and a.sent > full, RECOVERY_TIMEOUT, since)
    elif name == "business-reset":
        proxy.reset_for(RESET_SECONDS)
        end = start + RESET_SECONDS
        time.sleep(RESET_SECONDS)
        detail["reset_seconds"] = RESET_SECONDS
        recovered = load.first(
            lambda a: a.kind == "read_call" and a.ok and a.sent > end, RECOVERY_TIMEOUT, since
        )
    window = {
        "fault": name,
        "start_s": start,
        "recovered_s": recovered,
        "recovered": recovered is not None,
        "recovery_seconds": None if recovered is None else round(recovered - start, 2),
        **detail,
    }
    say(
        f"fault {name}: "
        + (
            f"recovered after {recovered - start:.2f} s"
            if recovered
            else f"NOT recovered within {RECOVERY_TIMEOUT:g} s"
        )
    )
    return window


def _faults_thread(schedule, origin: float, results: list, stop: threading.Event, **kwargs) -> None:
    """Each fault at its time, or after the one before recovered when that took longer; none once the
    load has stopped (a recovery is judged by the load's answers)."""
    for offset, name in schedule:
        if stop.wait(max(0.0, origin + offset - time.monotonic())) or kwargs["load"].stop.is_set():
            return
        try:
            results.append(_fault(name, **kwargs))
        except Exception as exc:  # recorded, never fatal: the soak goes on
            results.append(
                {
                    "fault": name,
                    "start_s": time.monotonic(),
                    "recovered_s": None,
                    "recovered": False,
                    "error": repr(exc),
                }
            )


# --- sampling -----------------------------------------------------------------------------------------


def _journal_count() -> int | None:
    try:
        count = ToolInvocation.objects.filter(
            client__app_id=CLIENT_APP_ID, tool="create_ticket", status=ToolInvocation.Status.EXECUTED
        ).count()
    except Exception:
        connections.close_all()  # the database may be away (an outage): no count this time
        return None
    return count


def _business_count(shop: Shop) -> int | None:
    try:
        return sum(1 for t in shop.records()["tickets"] if t["message"].startswith("soak invocation "))
    except (OSError, RuntimeError, ValueError, KeyError, http.client.HTTPException):
        return None


def pss_kib(pid: int) -> int | None:
    """Proportional set size of one process in KiB (``Pss`` of ``/proc/<pid>/smaps_rollup``): shared
    pages divided among the processes sharing them, so a sum over processes counts each page once."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _sample(processes: Processes, pgdata: Path, hub_port: int, shop: Shop) -> dict[str, Any]:
    roles = _roles(processes, pgdata)
    rss = {role: sum(rss_kib(pid) or 0 for pid in pids) for role, pids in roles.items()}
    pss = {role: sum(pss_kib(pid) or 0 for pid in pids) for role, pids in roles.items()}
    return {
        "t": time.monotonic(),
        "rss_kib": rss,
        "rss_kib_total": sum(rss.values()),
        "pss_kib": pss,
        "pss_kib_total": sum(pss.values()),
        "processes": {role: len(pids) for role, pids in roles.items()},
        "hub_connections": _hub_connections(hub_port),
        "journal_writes": _journal_count(),
        "business_writes": _business_count(shop),
    }


def _sampler(samples: list, bucket: float, origin: float, stop: threading.Event, **kwargs) -> None:
    """One sample at the end of each bucket (``n``: the bucket's number, from 1)."""
    n = 1
    while not stop.wait(max(0.0, origin + n * bucket - time.monotonic())):
        samples.append({"n": n, **_sample(**kwargs)})
        n += 1


# --- figures ------------------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile of latencies in seconds, in milliseconds (None for none)."""
    return round(percentile(sorted(values), q) * 1000, 2) if values else None


def _inside(answer: Answer, windows: list[dict]) -> bool:
    return any(
        answer.sent <= (w["recovered_s"] if w["recovered_s"] is not None else math.inf)
        and answer.done >= w["start_s"]
        for w in windows
    )


def figures_build(
    *,
    answers: list[Answer],
    windows: list[dict],
    samples: list[dict],
    origin: float,
    seconds: float,
    bucket: float,
) -> dict[str, Any]:
    buckets = []
    count = max(1, math.ceil(seconds / bucket - 1e-9))
    for index in range(count):
        start, end = origin + index * bucket, origin + (index + 1) * bucket
        inside = [a for a in answers if start <= a.sent < end]
        kinds = {}
        for kind in KINDS:
            of_kind = [a for a in inside if a.kind == kind]
            kinds[kind] = {
                "requests": len(of_kind),
                "p50_ms": _percentile([a.latency for a in of_kind], 0.5),
                "p99_ms": _percentile([a.latency for a in of_kind], 0.99),
            }
        clean = [a.latency for a in inside if a.kind != "resume" and not _inside(a, windows)]
        sample = next((s for s in samples if s["n"] == index + 1), None)
        buckets.append(
            {
                "start_s": round(start - origin, 1),
                "end_s": round(end - origin, 1),
                "requests": len(inside),
                "rps": round(len(inside) / bucket, 2),
                "kinds": kinds,
                "p99_ms_outside_faults": _percentile(clean, 0.99),
                "statuses": dict(sorted(Counter(str(a.status) for a in inside).items())),
                "5xx_inside_faults": sum(a.status >= 500 and _inside(a, windows) for a in inside),
                "5xx_outside_faults": sum(a.status >= 500 and not _inside(a, windows) for a in inside),
                "no_answer_outside_faults": sum(a.status == 0 and not _inside(a, windows) for a in inside),
                "rss_kib": sample["rss_kib"] if sample else None,
                "rss_kib_total": sample["rss_kib_total"] if sample else None,
                "pss_kib": sample["pss_kib"] if sample else None,
                "pss_kib_total": sample["pss_kib_total"] if sample else None,
                "processes": sample["processes"] if sample else None,
                "hub_connections": sample["hub_connections"] if sample else None,
                "journal_writes": sample["journal_writes"] if sample else None,
                "business_writes": sample["business_writes"] if sample else None,
            }
        )
    return {"buckets": buckets}


def reconcile(shop: Shop, load: Load) -> dict[str, Any]:
    """Executed create_ticket invocations in the journal against the shop's tickets, by invocation id."""
    connections.close_all()
    rows = ToolInvocation.objects.filter(client__app_id=CLIENT_APP_ID, tool="create_ticket").values_list(
        "invocation_id", "status"
    )
    journal = Counter()
    states = Counter()
    status_of: dict[str, str] = {}
    for invocation_id, status in rows:
        states[status] += 1
        status_of[invocation_id] = status
        if status == ToolInvocation.Status.EXECUTED:
            journal[invocation_id] += 1
    tickets = Counter(
        t["message"].removeprefix("soak invocation ")
        for t in shop.records()["tickets"]
        if t["message"].startswith("soak invocation ")
    )
    outcomes: dict[str, Counter] = {}
    every = ToolInvocation.objects.filter(client__app_id=CLIENT_APP_ID).values_list(
        "tool", "status", "reason_code"
    )
    for tool, status, reason in every:
        outcomes.setdefault(tool, Counter())[f"{status}:{reason}" if reason else status] += 1
    with load.lock:
        client_states = Counter(load.writes.values())
    return {
        "journal_writes": sum(journal.values()),
        "business_writes": sum(tickets.values()),
        "lost": sum(1 for key in journal if tickets[key] == 0),
        "duplicated": sum(n - 1 for n in tickets.values() if n > 1),
        "business_only": sum(1 for key in tickets if key not in journal),
        # Of those, the ones whose call the hub marked as an unknown outcome (an operator reconciles
        # them): not lost, not a silent disagreement. The rest would be one.
        "business_only_unflagged": sum(
            1 for key in tickets if key not in journal and status_of.get(key) not in UNKNOWN_OUTCOME
        ),
        "journal_states": dict(sorted(states.items())),
        "client_final_states": dict(sorted(client_states.items())),
        # Every governed call of the soak's client in the journal, by tool: status[:reason_code].
        "journal_outcomes": {tool: dict(sorted(c.items())) for tool, c in sorted(outcomes.items())},
    }


def verdict_build(figures: dict[str, Any], answers: list[Answer], windows: list[dict]) -> dict[str, Any]:
    buckets = figures["buckets"]
    outside_5xx = sum(b["5xx_outside_faults"] for b in buckets)
    outside_none = sum(b["no_answer_outside_faults"] for b in buckets)
    db_windows = [w for w in windows if w["fault"] == "db-restart"]
    inside_db_non_503 = sum(
        1 for a in answers if a.status >= 500 and a.status != 503 and _inside(a, db_windows)
    )
    inside_by_status = Counter(str(a.status) for a in answers if a.status != 200 and _inside(a, windows))
    verdict: dict[str, Any] = {
        "no_5xx_outside_faults": {
            "pass": outside_5xx == 0 and outside_none == 0 and inside_db_non_503 == 0,
            "5xx_outside": outside_5xx,
            "no_answer_outside": outside_none,
            "non_200_inside_by_status": dict(sorted(inside_by_status.items())),
            "inside_db_restart_5xx_not_503": inside_db_non_503,
        }
    }
    seconds = figures["options"]["seconds"]
    baseline_after = min(120.0, seconds / 3)
    # Judged on PSS: every PostgreSQL backend's RSS counts the shared buffers it touched again, so a
    # sum of RSS grows with the buffer cache warming up times the number of backends.
    with_memory = [b for b in buckets if b["pss_kib_total"]]
    base = next((b for b in with_memory if b["end_s"] >= baseline_after), None)
    last = with_memory[-1] if with_memory else None
    growth = (
        None if not base or not last else round(100 * (last["pss_kib_total"] / base["pss_kib_total"] - 1), 2)
    )
    rss_growth = (
        None if not base or not last else round(100 * (last["rss_kib_total"] / base["rss_kib_total"] - 1), 2)
    )
    verdict["rss_growth"] = {
        "pass": growth is not None and growth <= 10,
        "measure": "PSS summed over every process",
        "baseline_at_s": base["end_s"] if base else None,
        "baseline_kib": base["pss_kib_total"] if base else None,
        "last_kib": last["pss_kib_total"] if last else None,
        "growth_percent": growth,
        "rss_sum_growth_percent": rss_growth,
        "by_role_growth_percent": {
            role: round(100 * (last["rss_kib"][role] / base["rss_kib"][role] - 1), 2)
            for role in (last["rss_kib"] if base and last else {})
            if base["rss_kib"].get(role)
        },
        "goal_percent": 10,
    }
    second = buckets[1]["p99_ms_outside_faults"] if len(buckets) > 1 else None
    final = buckets[-1]["p99_ms_outside_faults"]
    ratio = None if not second or final is None else round(final / second, 2)
    verdict["p99_last_vs_second"] = {
        "pass": ratio is not None and ratio <= 1.5,
        "second_bucket_p99_ms": second,
        "last_bucket_p99_ms": final,
        "ratio": ratio,
        "goal_ratio": 1.5,
    }
    writes = figures["writes"]
    verdict["journal_equals_business"] = {
        "pass": writes["lost"] == 0 and writes["duplicated"] == 0 and writes["business_only_unflagged"] == 0,
        "counts_equal": writes["journal_writes"] == writes["business_writes"],
        "journal_writes": writes["journal_writes"],
        "business_writes": writes["business_writes"],
        "lost": writes["lost"],
        "duplicated": writes["duplicated"],
        "business_only": writes["business_only"],
        "business_only_unflagged": writes["business_only_unflagged"],
    }
    verdict["faults_recovered"] = {
        "pass": all(w["recovered"] for w in windows),
        "recovered": sum(w["recovered"] for w in windows),
        "faults": len(windows),
    }
    return verdict


# --- the run ------------------------------------------------------------------------------------------


def run(
    *,
    say: Callable[[str], None],
    pgdata: Path,
    seconds: float,
    faults: list[str],
    threads: int = 4,
    workers: int = 2,
    interval: float = 0.02,
    logs: Path | None = None,
) -> dict[str, Any]:
    pgdata = Path(pgdata).resolve()
    work = pgdata.parent
    bucket = 60.0 if seconds >= 180 else 10.0
    options = {
        "seconds": seconds,
        "faults": faults,
        "threads": threads,
        "gunicorn_workers": workers,
        "interval_s": interval,
        "bucket_seconds": bucket,
        "weights": WEIGHTS,
    }
    began = time.monotonic()
    processes = Processes(work)
    load = Load()
    windows: list[dict] = []
    samples: list[dict] = []
    stop_aux = threading.Event()
    aux: list[threading.Thread] = []
    agents: list[threading.Thread] = []
    proxy = None
    try:
        base_env = {**os.environ, "BAILING_PGDATA": str(pgdata), "DATABASE_URL": ""}
        processes.start(
            "supervisor",
            [sys.executable, "-m", "bailing.db.embedded", "supervise"],
            env=base_env,
            log=work / "supervisor.log",
        )
        hub_port = free_port()
        hub_url = f"http://127.0.0.1:{hub_port}"
        front = processes.start(
            "front",
            [sys.executable, "-m", "front"],
            env={
                **base_env,
                "BAILING_BIND": f"127.0.0.1:{hub_port}",
                "BAILING_LOG_FORMAT": "json",
                "GUNICORN_WORKERS": str(workers),
            },
            log=work / "hub.log",
        )
        # The hub boots (gunicorn's workers load the URLconf) while the database is migrated.
        say(f"migrating the dedicated database on {pgdata}")
        call_command("migrate", interactive=False, verbosity=0)
        say(f"migrated in {time.monotonic() - began:.1f} s")
        wait_answering(hub_port, front)
        processes.start(
            "knowledge_worker",
            [sys.executable, "manage.py", "knowledge_worker"],
            env={**base_env, "BAILING_EMBEDDING_THREADS": "1"},
            log=work / "worker.log",
            stdout=subprocess.DEVNULL,
        )
        token = secrets.token_urlsafe(32)
        secret = _tool_secret()
        shop = _shop_start(processes, work, secret=secret, token=token, hub_url=hub_url)
        proxy = ResetProxy(shop.port).start()
        access = _seed(hub_url=hub_url, proxy_url=proxy.url, token=token, say=say)
        roles = _roles(processes, pgdata)
        say(f"ready {time.monotonic() - began:.1f} s after the start")
        say(
            f"hub on {hub_url} ({len(roles['gunicorn_worker'])} gunicorn workers), Demo Shop on "
            f"127.0.0.1:{shop.port} behind the reset proxy on {proxy.port}; {threads} agent threads "
            f"for {seconds:g} s, faults: {', '.join(faults) or 'none'}"
        )
        origin = time.monotonic()
        schedule = fault_schedule(seconds, faults)
        # The approver outlives the load: a write sent before the end is still decided.
        aux.append(threading.Thread(target=_approver, args=(shop, load, stop_aux), daemon=True))
        aux.append(
            threading.Thread(
                target=_sampler,
                args=(samples, bucket, origin, stop_aux),
                kwargs={"processes": processes, "pgdata": pgdata, "hub_port": hub_port, "shop": shop},
                daemon=True,
            )
        )
        aux.append(
            threading.Thread(
                target=_faults_thread,
                args=(schedule, origin, windows, stop_aux),
                kwargs={"pgdata": pgdata, "processes": processes, "proxy": proxy, "load": load, "say": say},
                daemon=True,
            )
        )
        for index in range(threads):
            agent = Agent(index, port=hub_port, token=access, load=load, interval=interval, seed=index)
            agents.append(threading.Thread(target=agent.loop, daemon=True))
        for thread in aux + agents:
            thread.start()
        reported = 0
        while time.monotonic() < origin + seconds:
            time.sleep(
                min(1.0, origin + seconds - time.monotonic()) if origin + seconds > time.monotonic() else 0
            )
            while len(samples) > reported:
                sample = samples[reported]
                reported += 1
                with load.lock:
                    done = len(load.answers)
                    errors = sum(a.status >= 500 for a in load.answers)
                say(
                    f"{sample['t'] - origin:6.0f} s: {done} requests, {errors} 5xx so far; RSS "
                    f"{sample['rss_kib_total'] / 1024:.0f} MiB (PSS {sample['pss_kib_total'] / 1024:.0f}); "
                    f"{sample['hub_connections']} connections; "
                    f"journal {sample['journal_writes']} / business {sample['business_writes']} writes"
                )
        load.stop.set()
        for thread in agents:
            thread.join(timeout=APPROVAL_WAIT + RECOVERY_TIMEOUT + 15)
        say(f"load stopped; the last agent thread ended {time.monotonic() - origin - seconds:.1f} s later")
        stop_aux.set()
        for thread in aux:
            thread.join(timeout=RECOVERY_TIMEOUT + 15)
        ended = time.monotonic()
        with load.lock:
            answers = list(load.answers)
        figures: dict[str, Any] = {
            "schema": SCHEMA,
            "options": options,
            "pgdata": str(pgdata),
            "machine": machine_info(),
            "git_commit": git_commit(Path(settings.BASE_DIR))["commit"],
            "kinds": list(KINDS),
            "seconds_run": round(ended - origin, 1),
            **figures_build(
                answers=answers,
                windows=windows,
                samples=samples,
                origin=origin,
                seconds=seconds,
                bucket=bucket,
            ),
        }
        figures["totals"] = {
            "requests": len(answers),
            "by_kind": {kind: sum(a.kind == kind for a in answers) for kind in KINDS},
            "statuses": dict(sorted(Counter(str(a.status) for a in answers).items())),
            "approver": dict(load.approvals),
            "write_retries": dict(load.retries),
            "not_ok_200_by_kind": dict(Counter(a.kind for a in answers if a.status == 200 and not a.ok)),
        }
        figures["writes"] = reconcile(shop, load)
        figures["faults"] = [
            {
                **{k: v for k, v in w.items() if k not in ("start_s", "recovered_s")},
                "start_s": round(w["start_s"] - origin, 2),
                "recovered_s": None if w["recovered_s"] is None else round(w["recovered_s"] - origin, 2),
                "requests_inside": sum(_inside(a, [w]) for a in answers),
                "statuses_inside": dict(
                    sorted(Counter(str(a.status) for a in answers if _inside(a, [w])).items())
                ),
                # The first failures other than 503 (a 502, no answer at all): what, and how long.
                "other_failures": [
                    {
                        "kind": a.kind,
                        "status": a.status,
                        "sent_s": round(a.sent - origin, 2),
                        "latency_ms": round(a.latency * 1000, 1),
                    }
                    for a in answers
                    if a.status not in (200, 503) and _inside(a, [w])
                ][:20],
            }
            for w in windows
        ]
        figures["outside_faults_failures"] = [
            {
                "kind": a.kind,
                "status": a.status,
                "sent_s": round(a.sent - origin, 2),
                "latency_ms": round(a.latency * 1000, 1),
            }
            for a in answers
            if (a.status >= 500 or a.status == 0) and not _inside(a, windows)
        ][:50]
        figures["proxy"] = {"accepted": proxy.accepted, "reset_connections": proxy.reset_connections}
        figures["verdict"] = verdict_build(figures, answers, windows)
        figures["hub_log"] = _log_figures(work / "hub.log")
    finally:
        load.stop.set()
        stop_aux.set()
        if proxy is not None:
            proxy.close()
        took = processes.stop_all()
        say(f"every process stopped {time.monotonic() - began:.1f} s after the start (seconds each: {took})")
        if logs is not None:
            logs.mkdir(parents=True, exist_ok=True)
            for name in ("hub.log", "shop.log", "worker.log", "supervisor.log"):
                with contextlib.suppress(OSError):
                    shutil.copy(work / name, logs / name)
    figures["processes"] = {role: pids for role, pids in processes.pids.items()}
    figures["processes_alive_after"] = processes.alive()
    return figures


def _log_figures(path: Path) -> dict[str, int]:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    records = []
    tracebacks = 0
    for line in text.splitlines():
        if line.startswith("Traceback"):
            tracebacks += 1
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                records.append(json.loads(line))
    return {
        "error_lines": sum(1 for r in records if r.get("level") == "ERROR"),
        "tracebacks": tracebacks + sum(1 for r in records if r.get("exc")),
        "database_unavailable_lines": sum(
            1 for r in records if str(r.get("message", "")).startswith("database unavailable: ")
        ),
        "status_500_lines": sum(1 for r in records if r.get("status") == 500),
    }


def summary_lines(figures: dict[str, Any]) -> list[str]:
    totals, writes = figures["totals"], figures["writes"]
    lines = [
        f"soak: {figures['seconds_run']} s, {totals['requests']} requests "
        + ", ".join(f"{kind} {n}" for kind, n in totals["by_kind"].items()),
        "statuses: " + ", ".join(f"{status}: {n}" for status, n in totals["statuses"].items()),
        f"approver: {totals['approver']}",
    ]
    for fault in figures["faults"]:
        lines.append(
            f"fault {fault['fault']} at {fault['start_s']} s: "
            + (f"recovered after {fault['recovery_seconds']} s" if fault["recovered"] else "NOT RECOVERED")
            + f"; inside: {fault['statuses_inside']}"
        )
    lines.append(
        f"writes: journal {writes['journal_writes']}, business {writes['business_writes']}, lost "
        f"{writes['lost']}, duplicated {writes['duplicated']}, business-only {writes['business_only']}; "
        f"journal states {writes['journal_states']}; client states {writes['client_final_states']}"
    )
    lines.append(f"governed calls in the journal: {writes['journal_outcomes']}")
    for bucket in figures["buckets"]:
        lines.append(
            f"  [{bucket['start_s']:6.0f}-{bucket['end_s']:6.0f} s] {bucket['rps']:7.1f} req/s, p99 "
            f"{bucket['p99_ms_outside_faults']} ms (outside faults), 5xx in/out "
            f"{bucket['5xx_inside_faults']}/{bucket['5xx_outside_faults']}, RSS "
            f"{(bucket['rss_kib_total'] or 0) / 1024:.0f} MiB "
            f"(PSS {(bucket['pss_kib_total'] or 0) / 1024:.0f}), "
            f"conns {bucket['hub_connections']}"
        )
    lines.append(f"hub log: {figures['hub_log']}")
    for goal, result in figures["verdict"].items():
        rest = {k: v for k, v in result.items() if k != "pass"}
        lines.append(f"goal {goal}: {'pass' if result['pass'] else 'MISSED'} {rest}")
    return lines


def plot(path: Path, figures: dict[str, Any]) -> None:
    """req/s, p99 per kind and RSS per process role over time, fault windows shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets = figures["buckets"]
    middle = [(b["start_s"] + b["end_s"]) / 2 for b in buckets]
    figure, (top, mid, low) = plt.subplots(3, 1, figsize=(12, 10), sharex=True)
    top.plot(middle, [b["rps"] for b in buckets], marker="o", label="req/s (all kinds)")
    top.set_ylabel("req/s")
    top.set_title(
        f"Soak: {figures['options']['seconds']:g} s, buckets of {figures['options']['bucket_seconds']:g} s"
    )
    for kind in figures["kinds"]:
        mid.plot(middle, [b["kinds"][kind]["p99_ms"] for b in buckets], marker=".", label=kind)
    mid.set_ylabel("p99 (ms)")
    mid.set_yscale("log")
    roles = sorted({role for b in buckets if b["rss_kib"] for role in b["rss_kib"]})
    ends = [b["end_s"] for b in buckets]  # sampled at each bucket's end
    for role in roles:
        low.plot(ends, [(b["rss_kib"] or {}).get(role, 0) / 1024 for b in buckets], marker=".", label=role)
    low.plot(
        ends,
        [(b["pss_kib_total"] or 0) / 1024 for b in buckets],
        "k--",
        label="PSS, all processes (the goal's)",
    )
    low.set_ylabel("RSS (MiB)")
    low.set_xlabel("seconds since the load started")
    for axis in (top, mid, low):
        for fault in figures["faults"]:
            end = fault["recovered_s"] if fault["recovered_s"] is not None else figures["seconds_run"]
            axis.axvspan(fault["start_s"], max(end, fault["start_s"] + 0.5), color="red", alpha=0.15)
        axis.legend(fontsize=7, loc="best", ncol=4)
        axis.grid(alpha=0.3)
    for fault in figures["faults"]:
        top.text(
            fault["start_s"],
            0.02,
            fault["fault"],
            transform=top.get_xaxis_transform(),
            fontsize=7,
            rotation=90,
        )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
