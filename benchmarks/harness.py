"""What the benchmark commands share: a free loopback port, a gunicorn process under the real config,
waiting for ``/health``, latency percentiles, CPU time of process trees from ``/proc``, the SQL a
request sends (libpq's protocol trace), the load generators (wrk with a Lua script, or a Python loop),
the ratio arithmetic and the plot. Benchmarks print figures; they are never tests."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import math
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from django.conf import settings

from front.launcher import free_port, stop_process


def wait_ready(port: int, timeout: float = 30.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {process.returncode} before it was ready")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.2)
    raise RuntimeError("gunicorn did not become ready")


@dataclasses.dataclass(frozen=True)
class GunicornServer:
    """A running gunicorn: where it listens, the master's pid (its workers are its children) and the
    settings it was started with (``None``: the config file's value)."""

    port: int
    pid: int
    workers: int | None
    threads: int | None
    worker_class: str | None
    max_requests: int | None


@contextlib.contextmanager
def gunicorn_server(
    *,
    workers: int | None = None,
    threads: int | None = None,
    worker_class: str | None = None,
    max_requests: int | None = None,
    port: int | None = None,
    debug: bool | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[GunicornServer]:
    """Run the hub under ``bailing/gunicorn.conf.py`` on a loopback port (``port`` or a free one);
    yields the server and stops it (and waits for it) on exit.

    ``workers`` / ``threads`` / ``worker_class`` / ``max_requests`` are passed on gunicorn's command
    line, which wins over the config file (``max_requests=0``: workers are never recycled). ``debug``
    sets ``BAILING_DEBUG`` for the server whatever the caller's environment says."""
    if port:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                raise RuntimeError(f"127.0.0.1:{port} is in use") from None
    port = port or free_port()
    env = {**os.environ, "BAILING_BIND": f"127.0.0.1:{port}", **(extra_env or {})}
    if debug is not None:
        env["BAILING_DEBUG"] = "true" if debug else "false"
    if workers:
        env["GUNICORN_WORKERS"] = str(workers)
    argv = [
        str(Path(sys.executable).with_name("gunicorn")),
        "-c",
        str(settings.BASE_DIR / "bailing" / "gunicorn.conf.py"),
    ]
    if workers:
        argv += ["--workers", str(workers)]
    if threads:
        argv += ["--threads", str(threads)]
    if worker_class:
        argv += ["--worker-class", worker_class]
    if max_requests is not None:
        argv += ["--max-requests", str(max_requests)]
    argv.append("bailing.wsgi")
    server = subprocess.Popen(
        argv, cwd=settings.BASE_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_ready(port, process=server)
        yield GunicornServer(port, server.pid, workers, threads, worker_class, max_requests)
    finally:
        stop_process(server, timeout=30)


@contextlib.contextmanager
def gunicorn_running(
    *, workers: int | None = None, extra_env: Mapping[str, str] | None = None, **options
) -> Iterator[int]:
    """:func:`gunicorn_server`, yielding only the port."""
    with gunicorn_server(workers=workers, extra_env=extra_env, **options) as server:
        yield server.port


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values (0 for none)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


# --- CPU accounting ------------------------------------------------------------------------------------
# A process's CPU time from /proc/<pid>/stat, in clock ticks: utime + stime of its own threads, and
# cutime + cstime of the children it has waited for (so a backend or worker that exits during a run is
# still counted, by its parent). Summed over a process tree, each tick is counted exactly once.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclasses.dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    comm: str
    own_ticks: int  # utime + stime
    reaped_ticks: int  # cutime + cstime


def parse_proc_stat(pid: int, text: str) -> ProcStat:
    """One ``/proc/<pid>/stat`` line (the command name may hold spaces and parentheses)."""
    head, _, rest = text.rpartition(")")
    comm = head.partition("(")[2]
    fields = rest.split()
    # fields[0] is field 3 (state) of proc(5): ppid is 4, utime..cstime are 14..17.
    return ProcStat(
        pid=pid,
        ppid=int(fields[1]),
        comm=comm,
        own_ticks=int(fields[11]) + int(fields[12]),
        reaped_ticks=int(fields[13]) + int(fields[14]),
    )


def process_table(proc: Path = Path("/proc")) -> dict[int, ProcStat]:
    """Every process visible in ``/proc`` (empty where there is no /proc)."""
    table: dict[int, ProcStat] = {}
    try:
        entries = list(proc.iterdir())
    except OSError:
        return table
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            table[int(entry.name)] = parse_proc_stat(int(entry.name), (entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return table


def tree_ticks(table: Mapping[int, ProcStat], roots: Sequence[int]) -> int:
    """CPU ticks of the roots and all their descendants (own + reaped children's)."""
    children: dict[int, list[int]] = {}
    for stat in table.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    seen: set[int] = set()
    stack = [pid for pid in roots if pid in table]
    total = 0
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += table[pid].own_ticks + table[pid].reaped_ticks
        stack.extend(children.get(pid, ()))
    return total


def postmaster_pid(cursor) -> int | None:
    """The local PostgreSQL postmaster serving ``cursor``'s connection, or ``None`` when the server's
    processes are not visible here (another host or container). Read from ``postmaster.pid`` in the
    data directory when it is readable, else as the parent of this connection's backend."""
    cursor.execute("SELECT pg_backend_pid()")
    backend = int(cursor.fetchone()[0])
    table = process_table()
    if backend not in table or not table[backend].comm.startswith("postgres"):
        return None
    candidates = []
    try:
        cursor.execute("SHOW data_directory")
        first = (Path(cursor.fetchone()[0]) / "postmaster.pid").read_text().split("\n", 1)[0]
        candidates.append(int(first))
    except Exception:  # noqa: S110 - not superuser, or the data directory is elsewhere
        pass
    candidates.append(table[backend].ppid)
    for pid in candidates:
        if pid in table and table[backend].ppid == pid:
            return pid
    return None


# --- SQL round trips of one request ---------------------------------------------------------------------
_TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "START TRANSACTION", "END")


def is_transaction_control(statement: str) -> bool:
    return statement.lstrip().upper().startswith(_TRANSACTION_CONTROL)


@dataclasses.dataclass(frozen=True)
class SqlCount:
    """What a client sent the server, read from libpq's protocol trace: ``round_trips`` are the
    messages that wait for the server (a simple ``Query``, or a ``Sync`` ending an extended-protocol
    batch; a pipeline would send several statements per ``Sync``); ``statements`` are the statements
    executed, without transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE)."""

    statements: int
    round_trips: int
    transaction_control: int
    texts: tuple[str, ...]


def libpq_messages(trace: str) -> list[tuple[str, str, str]]:
    """A libpq trace (``PQtrace``, timestamps suppressed) as (direction F/B, message type, argument);
    a statement text spanning several lines is one message."""
    messages: list[list[str]] = []
    for line in trace.splitlines():
        parts = line.split("\t", 3)
        if len(parts) >= 3 and parts[0] in ("F", "B") and parts[1].isdigit():
            messages.append([parts[0], parts[2], parts[3] if len(parts) > 3 else ""])
        elif messages:
            messages[-1][2] += "\n" + line
    return [(direction, kind, argument) for direction, kind, argument in messages]


def _statement_text(kind: str, argument: str) -> str:
    text = argument.strip()
    if kind == "Parse":  # Parse "<name>" "<statement>" <number of types> <types...>
        text = re.sub(r'"\s+\d+(?:\s+\w+)*$', "", text.split('" "', 1)[-1])
    text = text.strip().strip('"')
    return " ".join(text.split())


def parse_libpq_trace(trace: str) -> SqlCount:
    """Count what the frontend sent in a libpq trace (see :class:`SqlCount`)."""
    statements: list[str] = []
    control = trips = 0
    pending: str | None = None  # the statement of the last Parse (extended protocol)
    for direction, kind, argument in libpq_messages(trace):
        if direction != "F":
            continue
        if kind == "Query":
            trips += 1
            text = _statement_text(kind, argument)
            if is_transaction_control(text):
                control += 1
            else:
                statements.append(text)
        elif kind == "Parse":
            pending = _statement_text(kind, argument)
        elif kind == "Execute":
            if pending is not None and is_transaction_control(pending):
                control += 1
            else:
                statements.append(pending or "(prepared statement)")
        elif kind == "Sync":
            trips += 1
    return SqlCount(len(statements), trips, control, tuple(statements))


@contextlib.contextmanager
def libpq_traced(connection) -> Iterator[list[str]]:
    """Trace what Django's ``connection`` sends while the block runs; the list holds the trace text
    afterwards. The connection must not be replaced inside the block (its trace would be lost)."""
    from psycopg import pq

    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    out: list[str] = []
    fd, path = tempfile.mkstemp(prefix="bailing-bench-trace-")
    try:
        pgconn.trace(fd)
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield out
        finally:
            if connection.connection is not None and connection.connection.pgconn is pgconn:
                pgconn.untrace()
            else:
                raise RuntimeError("the database connection was replaced while it was traced")
    finally:
        os.close(fd)
        out.append(Path(path).read_text(errors="replace"))
        os.unlink(path)


# --- load generation --------------------------------------------------------------------------------------
# Request bodies may hold two markers, replaced on every request: ``%N%`` by a number unique within the
# whole benchmark (run base + thread * 1e6 + counter) and ``%HEX%`` by 64 hex digits unique the same way.
# With several bodies, each request takes the next one (threads start at different offsets).
NUMBER_MARK = "%N%"
HEX_MARK = "%HEX%"
RUN_NUMBER_SPAN = 10_000_000
# An answer slower than this is an error (wrk's own default, 2 s, is too short for a loaded machine).
LOAD_TIMEOUT_SECONDS = 30


@dataclasses.dataclass(frozen=True)
class LoadSpec:
    method: str
    path: str
    headers: Mapping[str, str]
    bodies: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class LoadResult:
    requests: int
    seconds: float
    errors: int  # non-2xx/3xx answers, socket errors and timeouts
    p50_ms: float
    p99_ms: float
    tool: str
    timeouts: int = 0  # requests without an answer within LOAD_TIMEOUT_SECONDS (part of errors)
    p95_ms: float | None = None  # None only from a wrk script that did not print it

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def body_for(body: str, *, number: int, hex_nonce: str, thread: int, counter: int) -> str:
    """The body of one request (the Python load generator's side of the Lua script below)."""
    return body.replace(NUMBER_MARK, str(number)).replace(HEX_MARK, f"{hex_nonce}{thread:08x}{counter:08x}")


def _lua_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


_LUA_DONE = """
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH_RESULT %d %d %d %d %d %d %d %.1f %.1f %.1f\\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(95)))
end
"""

_LUA_BODIES = """
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local counter = 0
function request()
  counter = counter + 1
  local body = bodies[(counter + tid * 7) % #bodies + 1]
  local number = base + tid * 1000000 + counter
  body = string.gsub(body, "%%N%%", tostring(number))
  body = string.gsub(body, "%%HEX%%", nonce .. string.format("%08x%08x", tid, counter))
  return wrk.format(nil, nil, nil, body)
end
"""


def wrk_script(spec: LoadSpec, *, base: int, hex_nonce: str) -> str:
    """The wrk Lua script of one run: method, rotating bodies and a ``done`` hook printing the figures."""
    lines = [f"wrk.method = {_lua_string(spec.method)}"]
    if spec.bodies:
        lines.append("bodies = {" + ", ".join(_lua_string(body) for body in spec.bodies) + "}")
        lines.append(f"base = {base}")
        lines.append(f"nonce = {_lua_string(hex_nonce)}")
        lines.append(_LUA_BODIES)
    lines.append(_LUA_DONE)
    return "\n".join(lines)


def parse_wrk_result(out: str) -> LoadResult:
    # p50, p99, then p95 (added later: a result without it still parses).
    match = re.search(r"^BENCH_RESULT ([\d ]+) ([\d.]+) ([\d.]+)(?: ([\d.]+))?$", out, re.M)
    if not match:
        raise RuntimeError(f"wrk printed no result: {out[-500:]!r}")
    requests, duration_us, *errors = (int(value) for value in match.group(1).split())
    return LoadResult(
        requests=requests,
        seconds=duration_us / 1e6,
        errors=sum(errors),
        timeouts=errors[-1],
        p50_ms=float(match.group(2)) / 1000,
        p99_ms=float(match.group(3)) / 1000,
        p95_ms=float(match.group(4)) / 1000 if match.group(4) else None,
        tool="wrk",
    )


def wrk_load(
    port: int, spec: LoadSpec, *, seconds: float, connections: int, base: int, hex_nonce: str
) -> LoadResult:
    """One wrk run (2 threads, or 1 for one connection; wrk counts whole seconds)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(wrk_script(spec, base=base, hex_nonce=hex_nonce))
    cmd = [
        "wrk",
        f"-t{min(2, connections)}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "-s",
        handle.name,
    ]
    cmd.append(f"--timeout={LOAD_TIMEOUT_SECONDS}s")
    for name, value in spec.headers.items():
        cmd += ["-H", f"{name}: {value}"]
    cmd.append(f"http://127.0.0.1:{port}{spec.path}")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=seconds + 60).stdout
    finally:
        os.unlink(handle.name)
    return parse_wrk_result(out)


def python_load(
    port: int, spec: LoadSpec, *, seconds: float, connections: int, base: int, hex_nonce: str
) -> LoadResult:
    """Keep-alive request loop on ``connections`` threads (when wrk is not installed)."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    started_at = time.monotonic()
    stop_at = started_at + seconds

    def worker(thread: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=LOAD_TIMEOUT_SECONDS)
        local: list[float] = []
        failed = counter = 0
        try:
            while time.monotonic() < stop_at:
                counter += 1
                body = None
                if spec.bodies:
                    template = spec.bodies[(counter + thread * 7) % len(spec.bodies)]
                    number = base + thread * 1_000_000 + counter
                    text = body_for(
                        template, number=number, hex_nonce=hex_nonce, thread=thread, counter=counter
                    )
                    body = text.encode()
                started = time.perf_counter()
                try:
                    conn.request(spec.method, spec.path, body=body, headers=dict(spec.headers))
                    response = conn.getresponse()
                    response.read()
                    failed += not 200 <= response.status < 400
                except OSError:
                    failed += 1
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=LOAD_TIMEOUT_SECONDS)
                    continue
                local.append(time.perf_counter() - started)
        finally:
            conn.close()
        with lock:
            latencies.extend(local)
            errors[0] += failed

    threads = [threading.Thread(target=worker, args=(index + 1,)) for index in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started_at
    latencies.sort()
    return LoadResult(
        requests=len(latencies),
        seconds=elapsed,
        errors=errors[0],
        p50_ms=percentile(latencies, 0.50) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
        p95_ms=percentile(latencies, 0.95) * 1000,
        tool="python",
    )


# --- figures ------------------------------------------------------------------------------------------------
def median(values: Sequence[float | None]) -> float | None:
    """The median of the values that are known (``None`` when none is)."""
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


def round_figures(bare: Sequence[Mapping], run: Mapping) -> dict[str, float | None]:
    """One endpoint run against the bare runs of the same round (each ``{"requests", "seconds",
    "cpu_ticks"}``; ``cpu_ticks`` may be ``None`` when the processes were not visible):

    * ``ratio`` — endpoint req/s ÷ the mean req/s of the round's bare runs;
    * ``cpu_ms`` — CPU milliseconds per request (gunicorn + PostgreSQL);
    * ``cpu_ratio`` — bare CPU per request ÷ endpoint CPU per request: the req/s ratio CPU alone would
      allow, comparable with ``ratio`` and the goals (1 = as cheap as the bare endpoint);
    * ``cpu_x`` — its inverse, the endpoint's CPU per request as a multiple of the bare one's.
    """
    bare_rps = statistics.fmean(item["requests"] / item["seconds"] for item in bare)
    rps = run["requests"] / run["seconds"]
    cpu_ms = cpu_per_request_ms(run)
    bare_requests = sum(item["requests"] for item in bare)
    bare_cpu = None
    if bare_requests and all(item.get("cpu_ticks") is not None for item in bare):
        bare_cpu = sum(item["cpu_ticks"] for item in bare) * 1000 / CLOCK_TICKS / bare_requests
    known = cpu_ms is not None and bare_cpu is not None and cpu_ms > 0 and bare_cpu > 0
    return {
        "ratio": rps / bare_rps if bare_rps else None,
        "cpu_ms": cpu_ms,
        "cpu_ratio": bare_cpu / cpu_ms if known else None,
        "cpu_x": cpu_ms / bare_cpu if known else None,
    }


def cpu_per_request_ms(run: Mapping) -> float | None:
    if run.get("cpu_ticks") is None or not run["requests"]:
        return None
    return run["cpu_ticks"] * 1000 / CLOCK_TICKS / run["requests"]


def git_commit(cwd: Path) -> dict[str, str | bool | None]:
    def git(*args: str) -> str | None:
        try:
            return subprocess.run(
                ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": git("rev-parse", "HEAD"),
        "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        "dirty": bool(status) if status is not None else None,
    }


def machine_info() -> dict:
    info: dict = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "clock_ticks_per_second": CLOCK_TICKS,
    }
    with contextlib.suppress(OSError):
        info["load_average"] = list(os.getloadavg())
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem = Path("/proc/meminfo").read_text().splitlines()[0]
        info["memory_kib"] = int(mem.split()[1])
    return info


# --- the plot ------------------------------------------------------------------------------------------
def plot_ratios(path: Path, result: Mapping, baseline: Mapping | None = None) -> None:
    """A PNG of each endpoint's median req/s ratio and CPU ratio (against the bare endpoint), with
    ``baseline``'s beside them (matched by endpoint key) and the goal of each endpoint as a red mark.
    Needs matplotlib (the ``dev`` extra); drawn with the Agg backend, no display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    endpoints = [item for item in result["endpoints"] if item["key"] != "bare"]
    before = {item["key"]: item for item in (baseline or {}).get("endpoints", [])}
    series: list[tuple[str, str, str, str]] = []  # (label, source, figure, colour)
    if baseline is not None:
        series += [
            ("req/s ratio, before", "before", "ratio", "#9ecae1"),
            ("CPU ratio, before", "before", "cpu_ratio", "#fdd0a2"),
        ]
    series += [("req/s ratio", "now", "ratio", "#2171b5"), ("CPU ratio", "now", "cpu_ratio", "#d94801")]
    if baseline is not None:
        series[2:] = [(f"{label}, after", *rest) for label, *rest in series[2:]]
    height = 0.8 / len(series)
    floored = [item for item in endpoints if item.get("floor_ratio")]
    rows_tall = 0.5 + 0.55 * len(endpoints) * len(series) / 2 + 1.2
    if floored:
        fig, (ax, floor_ax) = plt.subplots(
            2,
            1,
            figsize=(11, rows_tall + 0.6 + 0.5 * len(floored)),
            gridspec_kw={"height_ratios": [len(endpoints) * len(series) / 2, max(1.5, len(floored))]},
        )
    else:
        fig, ax = plt.subplots(figsize=(11, rows_tall))
    for row, item in enumerate(endpoints):
        for index, (_, source, figure, colour) in enumerate(series):
            figures = item if source == "now" else before.get(item["key"])
            value = (figures or {}).get("median", {}).get(figure)
            if value is None:
                continue
            y = row + (index - (len(series) - 1) / 2) * height
            ax.barh(y, value, height=height * 0.95, color=colour)
            ax.text(value + 0.005, y, f"{value:.2f}", va="center", fontsize=7)
        if item.get("goal") is not None:
            ax.plot([item["goal"], item["goal"]], [row - 0.45, row + 0.45], color="red", linewidth=2)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour) for *_, colour in series]
    handles.append(plt.Line2D([0], [0], color="red", linewidth=2))
    labels = [label for label, *_ in series] + ["goal (req/s ratio)"]
    ax.legend(handles, labels, loc="lower right", fontsize=8)
    ax.set_yticks(range(len(endpoints)), [item["name"] for item in endpoints], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max([1.05, *((item["median"].get("ratio") or 0) * 1.1 for item in endpoints)]))
    ax.set_xlabel(
        "× the bare DRF endpoint (median of per-round ratios; CPU ratio = bare CPU/request ÷ endpoint's)"
    )
    commit = (result.get("git") or {}).get("commit") or "?"
    title = f"bailing_bench: {result['options']['rounds']} interleaved rounds, commit {commit[:10]}"
    if baseline is not None:
        title += f" (before: {((baseline.get('git') or {}).get('commit') or '?')[:10]})"
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    if floored:
        _plot_floor_ratios(floor_ax, floored, before)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_floor_ratios(ax, endpoints: list[Mapping], before: Mapping[str, Mapping]) -> None:
    """The lower panel: each work path's cost ÷ its floor's (time and CPU, lower is better), the
    baseline's beside them when it has one, and the floor goal as a red mark."""
    import matplotlib.pyplot as plt

    series = [("time ÷ floor", "time", "#2171b5"), ("CPU ÷ floor", "cpu", "#d94801")]
    sources = [("now", "")]
    if any((before.get(item["key"]) or {}).get("floor_ratio") for item in endpoints):
        sources = [("before", ", before"), ("now", ", after")]
    bars = [
        (source, suffix, label, figure, colour)
        for source, suffix in sources
        for label, figure, colour in series
    ]
    height = 0.8 / len(bars)
    top = 1.0
    for row, item in enumerate(endpoints):
        for index, (source, _, _, figure, colour) in enumerate(bars):
            figures = item if source == "now" else before.get(item["key"]) or {}
            value = (figures.get("floor_ratio") or {}).get(figure)
            if value is None:
                continue
            top = max(top, value)
            y = row + (index - (len(bars) - 1) / 2) * height
            ax.barh(y, value, height=height * 0.95, color=colour, alpha=0.55 if source == "before" else 1)
            ax.text(value + 0.03, y, f"{value:.2f}", va="center", fontsize=7)
        goal = item.get("floor_goal")
        if goal is not None:
            ax.plot([goal, goal], [row - 0.45, row + 0.45], color="red", linewidth=2)
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=colour, alpha=0.55 if source == "before" else 1)
        for source, _, _, _, colour in bars
    ]
    handles.append(plt.Line2D([0], [0], color="red", linewidth=2))
    labels = [f"{label}{suffix}" for _, suffix, label, _, _ in bars] + ["floor goal"]
    ax.legend(handles, labels, loc="lower right", fontsize=8)
    ax.set_yticks(
        range(len(endpoints)), [f"{item['name']} (floor: {item['floor']})" for item in endpoints], fontsize=8
    )
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.12)
    ax.set_xlabel(
        "× the path's floor measured in the same run (median of per-round ratios; 1 = the floor itself)"
    )
    ax.grid(axis="x", alpha=0.3)


def plot_policy_pairs(path: Path, result: Mapping) -> None:
    """A PNG of ``bailing_bench --suite data-policy``: per endpoint, the median req/s with the data
    policy off and on (left) and each round's on ÷ off ratio with their median and the goal (right).
    Needs matplotlib (the ``dev`` extra); drawn with the Agg backend, no display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    endpoints = list(result["endpoints"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 1.6 + 0.9 * max(1, len(endpoints))))
    names = [item["name"] for item in endpoints]
    for row, item in enumerate(endpoints):
        for offset, variant, colour in ((-0.2, "off", "#9ecae1"), (0.2, "on", "#2171b5")):
            value = item[variant].get("rps")
            if value is None:
                continue
            left.barh(
                row + offset, value, height=0.38, color=colour, label=f"policy {variant}" if not row else None
            )
            p95 = item[variant].get("p95_ms")
            label = f"{value:.1f} req/s" + (f", p95 {p95:.0f} ms" if p95 is not None else "")
            left.text(value, row + offset, " " + label, va="center", fontsize=7)
        ratios = [entry["ratio"] for entry in item["ratios"] if entry["ratio"] is not None]
        right.scatter(
            ratios, [row] * len(ratios), color="#6baed6", s=18, zorder=3, label="rounds" if not row else None
        )
        if item["ratio"] is not None:
            right.barh(
                row,
                item["ratio"],
                height=0.5,
                color="#2171b5",
                alpha=0.35,
                label="median" if not row else None,
            )
            right.text(item["ratio"], row - 0.3, f"{item['ratio']:.3f}", fontsize=8, ha="center")
        if item.get("cpu_ratio") is not None:
            right.scatter(
                [item["cpu_ratio"]],
                [row + 0.3],
                color="#d94801",
                marker="D",
                s=26,
                zorder=3,
                label="CPU ratio (off ÷ on CPU/request)" if not row else None,
            )
        right.plot([item["goal"], item["goal"]], [row - 0.45, row + 0.45], color="red", linewidth=2)
    for ax in (left, right):
        ax.set_yticks(range(len(endpoints)), names if ax is left else [""] * len(endpoints), fontsize=8)
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
    left.set_xlabel("req/s (median of rounds)")
    left.set_xlim(
        0, max([1.0, *((item[v].get("rps") or 0) * 1.8 for item in endpoints for v in ("off", "on"))])
    )
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize=8)
    right.set_xlabel("policy on ÷ policy off req/s (red: goal 0.9)")
    low = min(
        [0.8, *(entry["ratio"] - 0.05 for item in endpoints for entry in item["ratios"] if entry["ratio"])]
    )
    right.set_xlim(
        max(0.0, low),
        max(
            [
                1.15,
                *(entry["ratio"] + 0.05 for item in endpoints for entry in item["ratios"] if entry["ratio"]),
            ]
        ),
    )
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, fontsize=8)
    commit = (result.get("git") or {}).get("commit") or "?"
    options = result["options"]
    fig.suptitle(
        f"bailing_bench --suite data-policy: {options['rounds']} rounds of {options['duration']:.0f} s, "
        f"{options['connections']} connections, commit {commit[:10]}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
