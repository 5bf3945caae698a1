"""The ``db-restart`` chaos scenario: a real hub keeps answering while its PostgreSQL goes away.

Run by ``manage.py bailing_chaos --scenario db-restart`` inside a process whose settings point at a
dedicated embedded server (the command starts one on a fresh data directory; the shared one, a
running demo's or the tests', is never touched). Here, against that server:

1. migrate, create a client, a workspace and an agent session;
2. start the supervisor the demo runs (``python -m bailing.db.embedded supervise``) and the hub under
   gunicorn through the benchmarks' launcher (:func:`benchmarks.harness.gunicorn_running`), its log
   captured to a file;
3. drive a steady stream: turn writers (``POST /agent-api/v1/workspaces/<route>/turns``, each turn
   retried with the same idempotency ids until it answers 200, as a client honouring 503 does) and
   readers (bootstrap, workspace list, ``/health``);
4. stop PostgreSQL — a fast shutdown, then a crash (SIGKILL of the postmaster) — and let the supervisor
   bring it back, timing when it accepts connections again and when the hub answers its first 200;
5. count in the database afterwards: every turn a writer sent exists exactly once (runs and the user
   messages they carry), the ones confirmed before the first outage included.

Figures: requests by status (500 must be 0, and nothing but 200 and 503), per outage the seconds
until the server runs again and until the first 200 after that, rows lost or duplicated, and the
hub log's ``database unavailable`` lines and tracebacks (none). The hub logs in JSON and every
request carries its own ``X-Request-Id``, so each outage line is paired with the request it belongs
to: one line for each 503 a client saw, none for any other answer, none twice (a probe outside the
stream, such as the launcher's, is counted apart). The log's lines are counted, never printed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.db import connections

from agent_runtime.models import AgentRun, Client, Route, VisibleMessage
from bailing.db import embedded
from benchmarks.fixtures import agent_session_open
from benchmarks.harness import gunicorn_running
from chaos.live import HubConnection, accepting, wait_for
from front.launcher import stop_process

ROUTE_KEY = "chaos"
CLIENT_APP_ID = "chaos-agent"
OUTAGES = {
    "fast": "fast shutdown",
    "crash": "crash (SIGKILL of the postmaster)",
}
# How long one phase may take before the scenario gives up (the server back, the first 200, a
# writer finishing the turn in hand).
PHASE_TIMEOUT = 60.0
RETRY_PAUSE = 0.05


@dataclass
class Answer:
    kind: str  # "turn" | "read"
    sent: float
    done: float
    status: int  # 0: no HTTP answer (connection refused, reset, timed out)
    request_id: str = ""


@dataclass
class Stream:
    """What the load threads share with the timeline: every answer, and the turns they sent."""

    answers: list[Answer] = field(default_factory=list)
    # (conversation id, turn id) of every turn a writer sent, and the run id of those answered 200.
    sent: set[tuple[str, str]] = field(default_factory=set)
    confirmed: dict[tuple[str, str], str] = field(default_factory=dict)
    confirmed_at: dict[tuple[str, str], float] = field(default_factory=dict)
    retried_after_503: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    answered: threading.Condition = field(init=False)

    def __post_init__(self):
        self.answered = threading.Condition(self.lock)

    def record(self, answer: Answer) -> None:
        with self.answered:
            self.answers.append(answer)
            self.answered.notify_all()

    def first_200(self, *, sent_after: float, done_after: float, timeout: float) -> float | None:
        """When the first 200 answered to a request sent after ``sent_after`` arrived (at or after
        ``done_after``), waiting up to ``timeout`` seconds for one."""
        deadline = time.monotonic() + timeout
        with self.answered:
            while True:
                done = [
                    a.done
                    for a in self.answers
                    if a.status == 200 and a.sent > sent_after and a.done >= done_after
                ]
                if done:
                    return min(done)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self.answered.wait(remaining)


def _turn_body(conversation: str, n: int) -> bytes:
    return json.dumps(
        {
            "client_conversation_id": conversation,
            "client_turn_id": f"turn-{n}",
            "user_message_id": f"{conversation}-message-{n}",
            "user_input": f"Chaos turn {n} of {conversation}: where is my order?",
        }
    ).encode("ascii")


def _writer(index: int, *, port: int, token: str, stream: Stream, stop: threading.Event, interval: float):
    conn = HubConnection(port, token, f"chaos-writer-{index}")
    conversation = f"chaos-{index}"
    path = f"/agent-api/v1/workspaces/{ROUTE_KEY}/turns"
    n = 0
    try:
        while not stop.is_set():
            n += 1
            key = (conversation, f"turn-{n}")
            body = _turn_body(conversation, n)
            with stream.lock:
                stream.sent.add(key)
            saw_503 = False
            give_up = None
            while True:
                sent = time.monotonic()
                status, data = conn.request("POST", path, body)
                done = time.monotonic()
                stream.record(Answer("turn", sent, done, status, conn.last_request_id))
                if status == 200:
                    with stream.lock:
                        stream.confirmed[key] = json.loads(data)["run_id"]
                        stream.confirmed_at[key] = done
                        stream.retried_after_503 += saw_503
                    break
                saw_503 = saw_503 or status == 503
                # The same turn again, with the same ids, until it is answered; once the stream is
                # stopping, for at most PHASE_TIMEOUT more seconds.
                if stop.is_set():
                    give_up = give_up or time.monotonic() + PHASE_TIMEOUT
                    if time.monotonic() > give_up:
                        break
                time.sleep(RETRY_PAUSE)
            stop.wait(interval)
    finally:
        conn.close()


def _reader(index: int, *, port: int, token: str, stream: Stream, stop: threading.Event, interval: float):
    conn = HubConnection(port, token, f"chaos-reader-{index}")
    paths = (
        f"/agent-api/v1/workspaces/{ROUTE_KEY}/bootstrap",
        "/agent-api/v1/workspaces",
        "/health",
    )
    try:
        n = 0
        while not stop.is_set():
            path = paths[n % len(paths)]
            n += 1
            sent = time.monotonic()
            status, _ = conn.request("GET", path)
            stream.record(Answer("read", sent, time.monotonic(), status, conn.last_request_id))
            stop.wait(interval)
    finally:
        conn.close()


def _fixtures() -> str:
    """A client, a workspace and a live agent session on the fresh database; the access token."""
    client = Client.objects.create(
        app_id=CLIENT_APP_ID, name="Chaos agent", hub_consent=True, allowed_routes=[ROUTE_KEY]
    )
    Route.objects.create(
        route_key=ROUTE_KEY,
        name="Chaos workspace",
        target_config={"system_prompt": "You answer order questions."},
        agent_client={"enabled": True},
    )
    _, access = agent_session_open(
        client=client, routes=[ROUTE_KEY], subject="chaos", device_label="chaos", access_hours=2
    )
    return access


def _count_rows(stream: Stream, before_outage: set[tuple[str, str]]) -> dict[str, Any]:
    """Turns and user messages in the database, against what the writers sent and were told."""
    connections.close_all()  # this process's own connection did not survive the outages
    runs = Counter()
    run_ids: dict[tuple[str, str], set[str]] = {}
    rows = AgentRun.objects.filter(session__client__app_id=CLIENT_APP_ID).values_list(
        "conversation__client_conversation_id", "client_turn_id", "run_id"
    )
    for conversation, turn, run_id in rows:
        runs[(conversation, turn)] += 1
        run_ids.setdefault((conversation, turn), set()).add(str(run_id))
    messages = Counter(
        VisibleMessage.objects.filter(
            run__session__client__app_id=CLIENT_APP_ID, direction=VisibleMessage.Direction.IN
        ).values_list("run__conversation__client_conversation_id", "run__client_turn_id")
    )
    sent = stream.sent
    lost = sorted(key for key in sent if runs[key] == 0)
    duplicated = sum(count - 1 for count in runs.values() if count > 1)
    unexpected = sum(count for key, count in runs.items() if key not in sent)
    # A 200 names the run the client will go on with: it must be the stored one.
    mismatched = sum(1 for key, run_id in stream.confirmed.items() if run_ids.get(key) != {run_id})
    return {
        "sent": len(sent),
        "confirmed": len(stream.confirmed),
        "unconfirmed": len(sent - set(stream.confirmed)),
        "retried_after_503": stream.retried_after_503,
        "confirmed_before_first_outage": len(before_outage),
        "before_first_outage_present": sum(1 for key in before_outage if runs[key] == 1),
        "rows": sum(runs.values()),
        "lost": len(lost) + unexpected,
        "duplicated": duplicated,
        "run_id_mismatches": mismatched,
        "messages_lost": sum(1 for key in sent if messages[key] == 0),
        "messages_duplicated": sum(count - 1 for count in messages.values() if count > 1),
    }


def _log_records(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The hub's JSON log records, and the other lines of the file (gunicorn's own, raw output)."""
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    records, other = [], []
    for line in text.splitlines():
        try:
            record = json.loads(line) if line.startswith("{") else None
        except ValueError:
            record = None
        if isinstance(record, dict):
            records.append(record)
        else:
            other.append(line)
    return records, other


def _log_figures(path: Path, answers: list[Answer]) -> dict[str, int]:
    """The outage lines paired with the requests they belong to (by ``request_id``)."""
    records, other = _log_records(path)
    outage_lines = Counter(
        record.get("request_id", "")
        for record in records
        if str(record.get("message", "")).startswith("database unavailable: ")
    )
    status_of = {answer.request_id: answer.status for answer in answers}
    stream_lines = {rid: n for rid, n in outage_lines.items() if rid in status_of}
    return {
        "database_unavailable_lines": sum(outage_lines.values()),
        # Lines of requests this stream sent: one for each 503 it saw, none for anything else.
        "stream_outage_lines": sum(stream_lines.values()),
        "answers_503_without_line": sum(
            1 for rid, status in status_of.items() if status == 503 and rid not in stream_lines
        ),
        "lines_for_other_answers": sum(n for rid, n in stream_lines.items() if status_of[rid] != 503),
        "requests_logged_twice": sum(1 for n in stream_lines.values() if n > 1),
        # Requests from outside the stream (the launcher's readiness probe): counted, not judged.
        "lines_outside_stream": sum(n for rid, n in outage_lines.items() if rid not in status_of),
        "tracebacks": sum(line.startswith("Traceback") for line in other)
        + sum(1 for record in records if record.get("exc")),
        "error_lines": sum(1 for record in records if record.get("level") == "ERROR"),
    }


def _status_figures(answers: list[Answer]) -> dict[str, Any]:
    by_status = Counter(str(a.status) if a.status else "no_answer" for a in answers)
    return {
        "total": len(answers),
        "turns": sum(a.kind == "turn" for a in answers),
        "reads": sum(a.kind == "read" for a in answers),
        "by_status": dict(sorted(by_status.items())),
        "200": by_status.get("200", 0),
        "503": by_status.get("503", 0),
        "500": by_status.get("500", 0),
        "other": sum(count for status, count in by_status.items() if status not in ("200", "503")),
    }


def run(
    *,
    say: Callable[[str], None],
    pgdata: Path,
    outages: list[str],
    writers: int = 4,
    readers: int = 2,
    workers: int = 2,
    warmup: float = 3.0,
    settle: float = 3.0,
    interval: float = 0.02,
) -> dict[str, Any]:
    pgdata = Path(pgdata).resolve()
    work = pgdata.parent
    say(f"migrating the dedicated database on {pgdata}")
    call_command("migrate", interactive=False, verbosity=0)
    token = _fixtures()
    hub_log = work / "hub.log"
    supervisor_log = work / "supervisor.log"
    started = time.monotonic()
    stream = Stream()
    stop = threading.Event()
    figures: dict[str, Any] = {"scenario": "db-restart", "outages": []}
    before_outage: set[tuple[str, str]] = set()
    with supervisor_log.open("w") as supervisor_out:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "bailing.db.embedded", "supervise"],
            cwd=settings.BASE_DIR,
            env={**os.environ, "BAILING_PGDATA": str(pgdata), "DATABASE_URL": ""},
            stdout=supervisor_out,
            stderr=supervisor_out,
        )
    threads: list[threading.Thread] = []
    try:
        # The hub's own log (Django's and gunicorn's) goes to a file, so its lines can be counted.
        extra_env = {
            "GUNICORN_CMD_ARGS": f"--capture-output --error-logfile {hub_log}",
            "BAILING_LOG_FORMAT": "json",  # records carry the request id each line belongs to
        }
        with gunicorn_running(workers=workers, extra_env=extra_env) as port:
            say(f"hub on 127.0.0.1:{port}, {workers} gunicorn workers: {writers} writers, {readers} readers")
            load = {"port": port, "token": token, "stream": stream, "stop": stop, "interval": interval}
            threads += [threading.Thread(target=_writer, args=(i,), kwargs=load) for i in range(writers)]
            threads += [threading.Thread(target=_reader, args=(i,), kwargs=load) for i in range(readers)]
            for thread in threads:
                thread.start()
            time.sleep(warmup)
            with stream.lock:
                before_outage = set(stream.confirmed)
            for kind in outages:
                figures["outages"].append(_outage(kind, pgdata=pgdata, stream=stream, say=say))
                time.sleep(settle)
            stop.set()
            for thread in threads:
                thread.join(timeout=PHASE_TIMEOUT + 10)
    finally:
        stop.set()
        stop_process(supervisor, timeout=20)
    figures["seconds"] = round(time.monotonic() - started, 1)
    _attribute_answers(figures["outages"], stream.answers)
    figures["requests"] = _status_figures(stream.answers)
    figures["turns"] = _count_rows(stream, before_outage)
    figures["hub_log"] = _log_figures(hub_log, stream.answers)
    figures["supervisor_restarts_seconds"] = [
        float(value) for value in re.findall(r"restarted in ([\d.]+) s", supervisor_log.read_text())
    ]
    figures["ok"] = _verdict(figures)
    return figures


def _outage(kind: str, *, pgdata: Path, stream: Stream, say: Callable[[str], None]) -> dict[str, Any]:
    """Stop PostgreSQL one way, wait for the supervisor to bring it back and for the hub's first 200."""
    label = OUTAGES[kind]
    say(f"{label}: stopping PostgreSQL")
    killed = time.monotonic()
    if kind == "fast":
        embedded.embedded_server_stop(pgdata)
    else:
        embedded.embedded_server_kill(pgdata)
    stopped = time.monotonic()
    back = wait_for(accepting, timeout=PHASE_TIMEOUT)
    first = None
    if back is not None:
        first = stream.first_200(sent_after=stopped, done_after=back, timeout=PHASE_TIMEOUT)
    figures: dict[str, Any] = {
        "kind": kind,
        "recovered": first is not None,
        "stop_seconds": round(stopped - killed, 2),
        "server_back_after_seconds": None if back is None else round(back - killed, 2),
        "first_200_after_restart_seconds": None if first is None else round(first - back, 2),
        "first_200_after_stop_seconds": None if first is None else round(first - killed, 2),
        "_times": (killed, back),
    }
    if back is None:
        say(f"{label}: PostgreSQL did not come back within {PHASE_TIMEOUT:g} s")
    elif first is None:
        say(f"{label}: PostgreSQL back after {back - killed:.2f} s, but no 200 within {PHASE_TIMEOUT:g} s")
    else:
        say(
            f"{label}: PostgreSQL back after {back - killed:.2f} s, "
            f"first 200 {first - back:.2f} s later ({first - killed:.2f} s after the stop)"
        )
    return figures


def _attribute_answers(outages: list[dict[str, Any]], answers: list[Answer]) -> None:
    """Each outage's share of the non-200 answers: those that arrived from its stop until the next
    outage's (a request sent just before a stop fails because of it)."""
    starts = [outage["_times"][0] for outage in outages] + [float("inf")]
    for index, outage in enumerate(outages):
        killed, back = outage.pop("_times")
        failed = [a for a in answers if killed <= a.done < starts[index + 1] and a.status != 200]
        outage["answered_503"] = sum(a.status == 503 for a in failed)
        outage["answered_other"] = sum(a.status != 503 for a in failed)
        last = max((a.done for a in failed), default=None)
        # When the last request of the outage failed, relative to the server running again: in-flight
        # requests and threads that were waiting on the dead server.
        outage["last_failure_after_restart_seconds"] = (
            None if last is None or back is None else round(last - back, 2)
        )


def _verdict(figures: dict[str, Any]) -> bool:
    requests, turns, log = figures["requests"], figures["turns"], figures["hub_log"]
    return (
        all(outage["recovered"] and outage["answered_other"] == 0 for outage in figures["outages"])
        and requests["500"] == 0
        and requests["other"] == 0
        and turns["lost"] == 0
        and turns["duplicated"] == 0
        and turns["unconfirmed"] == 0
        and turns["run_id_mismatches"] == 0
        and turns["messages_lost"] == 0
        and turns["messages_duplicated"] == 0
        and turns["before_first_outage_present"] == turns["confirmed_before_first_outage"]
        and log["tracebacks"] == 0
        and log["stream_outage_lines"] == requests["503"]
        and log["answers_503_without_line"] == 0
        and log["lines_for_other_answers"] == 0
        and log["requests_logged_twice"] == 0
    )


def summary_lines(figures: dict[str, Any]) -> list[str]:
    """The figures as the command prints them."""
    requests, turns, log = figures["requests"], figures["turns"], figures["hub_log"]
    lines = [
        f"db-restart: {figures['seconds']} s, {len(figures['outages'])} outages",
        f"requests answered: {requests['total']} ({requests['turns']} turns, {requests['reads']} reads): "
        f"200: {requests['200']}, 503: {requests['503']}, anything else: {requests['other']} "
        f"(500: {requests['500']})",
    ]
    for outage in figures["outages"]:
        label = OUTAGES[outage["kind"]]
        if not outage["recovered"]:
            lines.append(f"{label}: NOT RECOVERED")
            continue
        lines.append(
            f"{label}: server back after {outage['server_back_after_seconds']:.2f} s; first 200 "
            f"{outage['first_200_after_restart_seconds']:.2f} s after restart "
            f"({outage['first_200_after_stop_seconds']:.2f} s after the stop); "
            f"{outage['answered_503']} answered 503, {outage['answered_other']} anything else"
        )
    lines += [
        f"turns: {turns['sent']} sent, {turns['retried_after_503']} retried after a 503, "
        f"{turns['rows']} rows; lost {turns['lost']}, duplicated {turns['duplicated']} "
        f"(counted in the database; {turns['before_first_outage_present']} of "
        f"{turns['confirmed_before_first_outage']} turns from before the first outage present)",
        f"user messages: lost {turns['messages_lost']}, duplicated {turns['messages_duplicated']}",
        f"hub log: {log['database_unavailable_lines']} 'database unavailable' lines "
        f"({log['stream_outage_lines']} of the stream's requests, {log['lines_outside_stream']} of "
        f"others); 503s without a line: {log['answers_503_without_line']}, lines for other answers: "
        f"{log['lines_for_other_answers']}, requests logged twice: {log['requests_logged_twice']}; "
        f"{log['tracebacks']} tracebacks",
        "supervisor restarts (s): " + ", ".join(f"{s:.2f}" for s in figures["supervisor_restarts_seconds"]),
        "verdict: " + ("ok" if figures["ok"] else "FAILED"),
    ]
    return lines
