"""``bailing_bench --suite front``: the server as shipped (the front before gunicorn) against gunicorn
alone, on the same endpoints, interleaved (issue 26).

Two hubs run side by side on the same database with the same gunicorn options: ``python -m front``
(the front on a loopback port, its own gunicorn behind it on a private unix socket, as production and
the demo run it) and gunicorn alone on a loopback port (what ``bailing_bench`` measures). Every round
runs each endpoint on both, the order alternating per round; one of the two is idle while the other
is measured. Per run: req/s, p50/p99 and CPU per request of the whole hub (front + gunicorn +
PostgreSQL), and of the front's own process alone. Per endpoint the report gives the median over
rounds of front req/s ÷ direct req/s (goal on the bare endpoint: ≥ :data:`FRONT_GOAL`).

Then the idle connections: ``--idle`` keep-alive connections (default 2,000) are opened to the front,
each sends one ``GET /health`` and reads its answer, and then stays open and silent. Measured: the
front's resident memory before and after (KiB per idle connection), its CPU while they are held, the
bare endpoint's throughput and p99 through the front while they are held (goal: p99 within
:data:`IDLE_P99_GOAL` × the median p99 of the rounds without them), and how many of them are still
open at the end. For this the front runs with ``BAILING_FRONT_KEEPALIVE_TIMEOUT`` raised to
:data:`IDLE_KEEPALIVE_SECONDS`: with the shipped 5 s it would close them itself after 5 s.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness import CLOCK_TICKS, median, process_table, tree_ticks
from front.launcher import free_port, stop_process, wait_answering

FRONT_SCHEMA = "bailing_bench.front.v1"
FRONT_KEYS = ("bare", "workspaces", "bootstrap", "knowledge_search")  # --only narrows it
FRONT_GOAL = 0.9  # through the front ≥ 0.9 × gunicorn alone on the bare endpoint
IDLE_P99_GOAL = 1.25  # the bare endpoint's p99 with the idle connections held, ÷ without
IDLE_KEEPALIVE_SECONDS = 600
TOPOLOGIES = ("direct", "front")
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class FrontHub:
    port: int
    pid: int  # the front's process; its gunicorn master is its child


@contextlib.contextmanager
def front_hub(server_options: Mapping, extra_env: Mapping[str, str]) -> Iterator[FrontHub]:
    """``python -m front`` on a free loopback port with the benchmark's gunicorn options (workers and
    threads; workers never recycled, ``BAILING_DEBUG`` off)."""
    port = free_port()
    env = {
        **os.environ,
        **extra_env,
        "BAILING_BIND": f"127.0.0.1:{port}",
        "BAILING_DEBUG": "false",
        "GUNICORN_MAX_REQUESTS": "0",
        "BAILING_FRONT_KEEPALIVE_TIMEOUT": str(IDLE_KEEPALIVE_SECONDS),
    }
    if server_options.get("workers"):
        env["GUNICORN_WORKERS"] = str(server_options["workers"])
    if server_options.get("threads"):
        env["GUNICORN_THREADS"] = str(server_options["threads"])
    process = subprocess.Popen(
        [sys.executable, "-m", "front"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_answering(port, process)
        yield FrontHub(port, process.pid)
    finally:
        stop_process(process, timeout=45)


def own_ticks(pid: int) -> int | None:
    """CPU ticks of one process's own threads (not its children)."""
    stat = process_table().get(pid)
    return None if stat is None else stat.own_ticks


def rss_kib(pid: int) -> int | None:
    """Resident memory of one process in KiB (``VmRSS`` of ``/proc/<pid>/status``)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _file_limit_for(count: int) -> None:
    """Raise this process's open-file limit (inherited by the hubs it starts) to hold ``count``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count + 512
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            raise RuntimeError(
                f"--idle {count} needs an open-file limit of {wanted}; the hard limit is {hard}"
            )
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


@contextlib.contextmanager
def idle_connections(port: int, count: int, progress: Callable[[str], None]) -> Iterator[list[socket.socket]]:
    """``count`` keep-alive connections, each after one answered ``GET /health``, then silent."""
    request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"
    held: list[socket.socket] = []
    try:
        for index in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            held.append(sock)
            sock.sendall(request)
            _read_one_answer(sock)
            if (index + 1) % 500 == 0:
                progress(f"idle connections: {index + 1}/{count} open")
        yield held
    finally:
        for sock in held:
            sock.close()


def _read_one_answer(sock: socket.socket) -> None:
    """Read one HTTP answer with a Content-Length body (what /health sends)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the front closed a connection before it answered")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the front closed a connection mid-answer")
        body += chunk


def still_open(held: list[socket.socket]) -> int:
    """How many of ``held`` the server has not closed (a closed one is readable with EOF)."""
    poller = select.poll()  # select() takes no descriptor above 1023
    for sock in held:
        poller.register(sock, select.POLLIN)
    readable = {descriptor for descriptor, _ in poller.poll(0)}
    open_count = 0
    for sock in held:
        if sock.fileno() not in readable:
            open_count += 1
            continue
        try:
            if sock.recv(1, socket.MSG_PEEK):
                open_count += 1  # data we did not ask for: open, but not idle
        except OSError:
            pass
    return open_count


def run(
    command, targets: list, options: dict, server_options: dict, nonce: str, postgres: int | None
) -> dict:
    """The front suite over ``targets`` (the bare endpoint first); ``command`` is the ``bailing_bench``
    command (its runs and output), ``postgres`` the local postmaster's pid (``None``: not visible, CPU
    figures without it)."""
    from django.db import connection

    from bailing.db.urls import database_url
    from benchmarks.harness import gunicorn_server

    env = {"BAILING_BENCH_ENDPOINTS": "true", "DATABASE_URL": database_url(connection.settings_dict)}
    idle = options["idle"]
    _file_limit_for(idle)
    with (
        gunicorn_server(**server_options, extra_env=env) as direct,
        front_hub(server_options, env) as front,
    ):
        command._progress(
            f"gunicorn alone on 127.0.0.1:{direct.port} (pid {direct.pid}); the front on "
            f"127.0.0.1:{front.port} (pid {front.pid}, its gunicorn behind it); "
            f"{server_options['workers']} workers each"
        )
        hubs = {
            "direct": (direct.port, {"gunicorn": direct.pid, "postgres": postgres}),
            "front": (front.port, {"gunicorn": front.pid, "postgres": postgres}),
        }
        runs = _rounds(command, targets, hubs, front.pid, options, nonce)
        bare = next(target for target in targets if target.key == "bare")
        idle_figures = _idle(command, bare, front, hubs["front"][1], options, nonce, idle)
    return _result(targets, runs, idle_figures, options)


def _rounds(command, targets, hubs, front_pid: int, options: dict, nonce: str) -> list[dict]:
    run_index = 0
    if options["warmup"] > 0:
        for target in targets:
            for topology in TOPOLOGIES:
                port, roots = hubs[topology]
                command._progress(f"warm-up  {topology:6} {target.name}: {options['warmup']:.0f} s")
                command._run(port, target, options["warmup"], options, run_index, nonce, roots)
                run_index += 1
    runs = []
    for number in range(options["rounds"]):
        shift = number % len(targets)
        for target in targets[shift:] + targets[:shift]:
            order = TOPOLOGIES if (number + targets.index(target)) % 2 == 0 else TOPOLOGIES[::-1]
            for topology in order:
                port, roots = hubs[topology]
                front_before = own_ticks(front_pid)
                figures = command._run(port, target, options["duration"], options, run_index, nonce, roots)
                front_after = own_ticks(front_pid)
                run_index += 1
                front_ticks = (
                    front_after - front_before
                    if topology == "front" and None not in (front_before, front_after)
                    else None
                )
                figures["cpu_ticks_front"] = front_ticks
                command._progress(
                    f"round {number + 1}/{options['rounds']} {topology:6} {target.name[:40]:40} "
                    f"{figures['rps']:8.1f} req/s  p50 {figures['p50_ms']:7.2f} ms  "
                    f"p99 {figures['p99_ms']:7.2f} ms  {_cpu_text(figures)}  errors {figures['errors']}"
                )
                runs.append({"round": number + 1, "key": target.key, "topology": topology, **figures})
    return runs


def _cpu_text(figures: dict) -> str:
    requests = figures["requests"] or 0
    if not requests or figures["cpu_ticks"] is None:
        return "CPU n/a"
    text = f"{figures['cpu_ticks'] * 1000 / CLOCK_TICKS / requests:6.2f} ms CPU/req"
    if figures.get("cpu_ticks_front") is not None:
        text += f" (front {figures['cpu_ticks_front'] * 1000 / CLOCK_TICKS / requests:5.2f})"
    return text


def _idle(command, bare, front: FrontHub, roots, options: dict, nonce: str, count: int) -> dict | None:
    if count <= 0:
        return None
    rss_before = rss_kib(front.pid)
    started = time.monotonic()
    with idle_connections(front.port, count, command._progress) as held:
        opened_seconds = time.monotonic() - started
        time.sleep(1.0)  # let the front settle its buffers
        rss_held = rss_kib(front.pid)
        ticks_before = own_ticks(front.pid)
        quiet_seconds = 5.0
        time.sleep(quiet_seconds)
        ticks_quiet = own_ticks(front.pid)
        command._progress(f"{count} idle connections held; the bare endpoint through the front meanwhile")
        figures = command._run(front.port, bare, options["duration"], options, 10_000, nonce, roots)
        open_after = still_open(held)
    tree = process_table()
    return {
        "connections": count,
        "opened_seconds": round(opened_seconds, 2),
        "front_rss_kib_before": rss_before,
        "front_rss_kib_held": rss_held,
        "kib_per_connection": (
            round((rss_held - rss_before) / count, 2) if None not in (rss_held, rss_before) else None
        ),
        "front_cpu_ms_per_second_idle": (
            round((ticks_quiet - ticks_before) * 1000 / CLOCK_TICKS / quiet_seconds, 2)
            if None not in (ticks_quiet, ticks_before)
            else None
        ),
        "still_open": open_after,
        "bare_under_idle": figures,
        "hub_cpu_ticks_total": tree_ticks(tree, [front.pid]),
    }


def _result(targets, runs, idle: dict | None, options: dict) -> dict:
    endpoints = []
    for target in targets:
        rounds = sorted({run["round"] for run in runs if run["key"] == target.key})
        ratios, front_ms, p99_ratios = [], [], []
        per_topology: dict[str, dict] = {}
        for topology in TOPOLOGIES:
            mine = [run for run in runs if run["key"] == target.key and run["topology"] == topology]
            per_topology[topology] = {
                "rps": median([run["rps"] for run in mine]),
                "p50_ms": median([run["p50_ms"] for run in mine]),
                "p99_ms": median([run["p99_ms"] for run in mine]),
                "cpu_ms_per_request": median(
                    [
                        run["cpu_ticks"] * 1000 / CLOCK_TICKS / run["requests"]
                        if run["cpu_ticks"] is not None and run["requests"]
                        else None
                        for run in mine
                    ]
                ),
                "errors": sum(run["errors"] for run in mine),
            }
        for number in rounds:
            pair = {
                run["topology"]: run for run in runs if run["key"] == target.key and run["round"] == number
            }
            if pair["direct"]["rps"]:
                ratios.append(pair["front"]["rps"] / pair["direct"]["rps"])
            if pair["direct"]["p99_ms"]:
                p99_ratios.append(pair["front"]["p99_ms"] / pair["direct"]["p99_ms"])
            front_run = pair["front"]
            if front_run.get("cpu_ticks_front") is not None and front_run["requests"]:
                front_ms.append(front_run["cpu_ticks_front"] * 1000 / CLOCK_TICKS / front_run["requests"])
        ratio = median(ratios)
        endpoints.append(
            {
                "key": target.key,
                "name": target.name,
                **per_topology,
                "front_over_direct_rps": ratio,
                "front_over_direct_p99": median(p99_ratios),
                "front_cpu_ms_per_request": median(front_ms),
                "goal": FRONT_GOAL if target.key == "bare" else None,
                "meets_goal": (ratio is not None and ratio >= FRONT_GOAL) if target.key == "bare" else None,
            }
        )
    if idle is not None:
        bare_p99 = next(e for e in endpoints if e["key"] == "bare")["front"]["p99_ms"]
        under = idle["bare_under_idle"]["p99_ms"]
        idle["p99_over_without"] = round(under / bare_p99, 3) if bare_p99 else None
        idle["meets_goal"] = bool(
            idle["still_open"] == idle["connections"]
            and idle["bare_under_idle"]["errors"] == 0
            and idle["p99_over_without"] is not None
            and idle["p99_over_without"] <= IDLE_P99_GOAL
        )
    return {"schema": FRONT_SCHEMA, "endpoints": endpoints, "idle": idle, "runs": runs}


def plot_front(path: Path, result: Mapping) -> None:
    """Front ÷ direct per endpoint (req/s and p99) with the goal, and the idle-connection figures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    endpoints = result["endpoints"]
    names = [endpoint["name"][:34] for endpoint in endpoints]
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    positions = range(len(endpoints))
    width = 0.38
    rps = [endpoint["front_over_direct_rps"] or 0 for endpoint in endpoints]
    p99 = [endpoint["front_over_direct_p99"] or 0 for endpoint in endpoints]
    left.bar([x - width / 2 for x in positions], rps, width, label="req/s, front ÷ gunicorn alone")
    left.bar([x + width / 2 for x in positions], p99, width, label="p99, front ÷ gunicorn alone")
    left.axhline(
        FRONT_GOAL, color="red", linestyle="--", linewidth=1, label=f"goal (bare, req/s) {FRONT_GOAL}"
    )
    left.axhline(1.0, color="grey", linewidth=0.8)
    left.set_xticks(list(positions), names, rotation=15, ha="right", fontsize=8)
    left.set_title("Through the front vs gunicorn alone (median of rounds)")
    left.legend(fontsize=8)
    idle = result.get("idle")
    right.axis("off")
    if idle:
        lines = [
            f"{idle['connections']} idle keep-alive connections to the front",
            f"opened in {idle['opened_seconds']} s, still open at the end: {idle['still_open']}",
            f"front RSS {idle['front_rss_kib_before']} → {idle['front_rss_kib_held']} KiB",
            f"  = {idle['kib_per_connection']} KiB per idle connection",
            f"front CPU while they idle: {idle['front_cpu_ms_per_second_idle']} ms/s",
            f"bare endpoint meanwhile: {idle['bare_under_idle']['rps']:.0f} req/s,",
            f"  p99 {idle['bare_under_idle']['p99_ms']:.1f} ms = {idle['p99_over_without']}× without"
            f" (goal ≤ {IDLE_P99_GOAL})",
        ]
        right.text(0, 0.95, "\n".join(lines), va="top", family="monospace", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
