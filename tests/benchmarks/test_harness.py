"""The benchmark harness (benchmarks/harness.py): CPU accounting from /proc, the ratio arithmetic, the
SQL count read from libpq's trace, and the load generators' rotating, never-repeating bodies. Figures
themselves are never asserted (benchmarks print them); only that they are computed right."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection, transaction

from benchmarks.harness import (
    CLOCK_TICKS,
    LoadSpec,
    ProcStat,
    body_for,
    median,
    parse_libpq_trace,
    parse_proc_stat,
    parse_wrk_result,
    postmaster_pid,
    process_table,
    python_load,
    round_figures,
    tree_ticks,
    wrk_load,
    wrk_script,
)
from tests.support.threaded_server import ServerThread


def test_a_proc_stat_line_is_read_even_when_the_command_name_has_spaces_and_parentheses():
    line = "4242 (gunicorn: (worker) x) S 4000 4242 4242 0 -1 4194560 100 0 0 0 " + "17 5 3 2 20 0 6 0 1 2 3"
    stat = parse_proc_stat(4242, line)
    assert stat == ProcStat(pid=4242, ppid=4000, comm="gunicorn: (worker) x", own_ticks=22, reaped_ticks=5)


def test_tree_ticks_sum_a_process_and_all_its_descendants_once():
    table = {
        10: ProcStat(10, 1, "master", own_ticks=5, reaped_ticks=2),
        11: ProcStat(11, 10, "worker", own_ticks=3, reaped_ticks=0),
        12: ProcStat(12, 11, "grandchild", own_ticks=1, reaped_ticks=0),
        20: ProcStat(20, 1, "someone else", own_ticks=100, reaped_ticks=50),
    }
    assert tree_ticks(table, [10]) == 11
    assert tree_ticks(table, [11]) == 4
    assert tree_ticks(table, [10, 11]) == 11  # a root inside another root's tree is not counted twice
    assert tree_ticks(table, [99]) == 0


_BURN = """
import subprocess, sys, time
def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
child = subprocess.Popen([sys.executable, "-c", "import time\\nstart = time.process_time()\\n"
                          "while time.process_time() - start < 0.3: pass"])
child.wait()          # its CPU time moves to our cutime/cstime
burn(0.3)
print("done", flush=True)
sys.stdin.read()
"""


def test_the_cpu_of_a_real_process_tree_counts_its_exited_children_too():
    process = subprocess.Popen(
        [sys.executable, "-c", _BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout.readline().strip() == "done"
        ticks = tree_ticks(process_table(), [process.pid])
    finally:
        process.stdin.close()
        process.wait(timeout=10)
        process.stdout.close()
    seconds = ticks / CLOCK_TICKS
    # 0.3 s in the exited grandchild + 0.3 s here, plus interpreter start-up of both.
    assert 0.55 <= seconds < 5, seconds


def test_round_figures_divide_by_the_same_rounds_bare_runs():
    bare = [
        {"requests": 1000, "seconds": 5.0, "cpu_ticks": 100},
        {"requests": 1200, "seconds": 5.0, "cpu_ticks": 120},
    ]
    run = {"requests": 220, "seconds": 5.0, "cpu_ticks": 88}
    figures = round_figures(bare, run)
    assert figures["ratio"] == pytest.approx(44 / 220)  # 44 req/s against the bare runs' mean 220
    bare_ms = 220 * 1000 / CLOCK_TICKS / 2200
    assert figures["cpu_ms"] == pytest.approx(88 * 1000 / CLOCK_TICKS / 220)
    assert figures["cpu_ratio"] == pytest.approx(bare_ms / figures["cpu_ms"]) == pytest.approx(0.25)
    assert figures["cpu_x"] == pytest.approx(4.0)


def test_round_figures_without_cpu_figures_leave_the_cpu_ratio_unknown():
    bare = [{"requests": 100, "seconds": 1.0, "cpu_ticks": None}]
    figures = round_figures(bare, {"requests": 50, "seconds": 1.0, "cpu_ticks": 10})
    assert figures["ratio"] == pytest.approx(0.5)
    assert figures["cpu_ratio"] is None and figures["cpu_x"] is None
    assert round_figures(bare, {"requests": 0, "seconds": 1.0, "cpu_ticks": 10})["cpu_ms"] is None


def test_median_of_known_values():
    assert median([0.3, None, 0.1, 0.2]) == pytest.approx(0.2)
    assert median([0.4, 0.1]) == pytest.approx(0.25)
    assert median([None, None]) is None


@pytest.mark.django_db(transaction=True)
def test_the_sql_of_a_block_is_read_from_libpqs_trace():
    from benchmarks.harness import libpq_traced

    with libpq_traced(connection) as trace:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT %s", [1])
            with transaction.atomic():
                cursor.execute("SELECT\n  2\n  AS two")
        with connection.cursor() as cursor:
            cursor.execute("SELECT 3")
    count = parse_libpq_trace(trace[0])
    assert count.statements == 3
    # Server-side binding (the default, DB_SERVER_SIDE_BINDING): parameters travel apart from the text.
    assert count.texts == ("SELECT $1", "SELECT 2 AS two", "SELECT 3")
    assert count.transaction_control == 4  # BEGIN, SAVEPOINT, RELEASE SAVEPOINT, COMMIT
    assert count.round_trips == 7


def test_an_extended_protocol_trace_counts_one_round_trip_per_sync():
    trace = "\n".join(
        [
            'F\t30\tParse\t "" "SELECT $1" 0',
            "F\t20\tBind\t ...",
            'F\t6\tExecute\t "" 0',
            'F\t20\tParse\t "" "COMMIT" 0',
            'F\t6\tExecute\t "" 0',
            "F\t4\tSync",
            "B\t5\tReadyForQuery\t I",
        ]
    )
    count = parse_libpq_trace(trace)
    assert (count.statements, count.transaction_control, count.round_trips) == (1, 1, 1)
    assert count.texts == ("SELECT $1",)


@pytest.mark.django_db
def test_the_postmaster_of_the_test_database_is_found_and_its_backends_are_its_children():
    with connection.cursor() as cursor:
        postmaster = postmaster_pid(cursor)
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    assert postmaster is not None
    table = process_table()
    assert table[backend].ppid == postmaster
    assert tree_ticks(table, [postmaster]) >= table[backend].own_ticks


def test_wrk_output_is_read_from_the_done_hook():
    out = "Running 1s test\n  2 threads\nBENCH_RESULT 812 1003412 0 1 0 3 0 1520.5 20311.0\n"
    result = parse_wrk_result(out)
    assert result.requests == 812 and result.errors == 4
    assert result.seconds == pytest.approx(1.003412)
    assert result.p50_ms == pytest.approx(1.5205) and result.p99_ms == pytest.approx(20.311)
    assert result.rps == pytest.approx(812 / 1.003412)


def test_wrk_output_carries_p95_after_p99_and_older_output_still_parses():
    result = parse_wrk_result("BENCH_RESULT 812 1003412 0 0 0 0 0 1520.5 20311.0 9800.0\n")
    assert result.p50_ms == pytest.approx(1.5205) and result.p99_ms == pytest.approx(20.311)
    assert result.p95_ms == pytest.approx(9.8)
    assert parse_wrk_result("BENCH_RESULT 812 1003412 0 0 0 0 0 1520.5 20311.0\n").p95_ms is None
    assert "latency:percentile(95)" in wrk_script(LoadSpec("GET", "/x", {}), base=0, hex_nonce="ab")


def test_the_wrk_script_rotates_the_bodies_and_fills_both_markers():
    spec = LoadSpec("POST", "/x", {}, ('{"q": "a %N%"}', '{"q": "b \\"quoted\\"", "id": "%HEX%"}'))
    script = wrk_script(spec, base=30_000_000, hex_nonce="ab" * 24)
    assert 'wrk.method = "POST"' in script and "base = 30000000" in script
    assert '"{\\"q\\": \\"b \\\\\\"quoted\\\\\\"\\", \\"id\\": \\"%HEX%\\"}"' in script
    assert "function done(" in script and "function request()" in script
    get = wrk_script(LoadSpec("GET", "/x", {}), base=0, hex_nonce="")
    assert "function request()" not in get  # wrk's pre-built request, the fastest path


def test_python_bodies_take_the_marker_values():
    body = body_for('{"a": "%N%", "b": "%HEX%"}', number=123, hex_nonce="f" * 48, thread=2, counter=7)
    assert json.loads(body) == {"a": "123", "b": "f" * 48 + "00000002" + "00000007"}


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    bodies: list[str] = []
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        with self.lock:
            self.bodies.append(body)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


# wrk where it is installed (the benchmark uses it then), the Python loop always.
LOADERS = [python_load] + ([wrk_load] if shutil.which("wrk") else [])


@pytest.mark.parametrize("load", LOADERS, ids=lambda load: load.__name__)
def test_a_load_run_sends_every_request_a_fresh_body_rotating_through_the_templates(load):
    _Recorder.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    running = ServerThread(server)
    templates = tuple(json.dumps({"q": f"question {i} 退款 (order %N%)", "id": "%HEX%"}) for i in range(5))
    try:
        result = load(
            server.server_address[1],
            LoadSpec("POST", "/bench", {"Content-Type": "application/json"}, templates),
            seconds=1,
            connections=4,
            base=20_000_000,
            hex_nonce="0123456789abcdef" * 3,
        )
    finally:
        running.stop()
    received = [json.loads(body) for body in _Recorder.bodies]
    assert result.requests > 10 and result.errors == 0
    assert len(received) >= result.requests
    assert len({item["q"] for item in received}) == len(received)  # no text twice
    assert len({item["id"] for item in received}) == len(received)
    assert all(re.fullmatch(r"[0-9a-f]{64}", item["id"]) for item in received)
    assert all(re.fullmatch(r"question \d 退款 \(order 2\d{7}\)", item["q"]) for item in received)
    assert len({item["q"].split(" (")[0] for item in received}) == len(templates)


def _result(commit: str, ratios: dict[str, tuple[float | None, float | None]]) -> dict:
    endpoints = [{"key": "bare", "name": "bare", "goal": None, "median": {"ratio": 1.0, "cpu_ratio": 1.0}}]
    for key, (ratio, cpu_ratio) in ratios.items():
        endpoints.append(
            {
                "key": key,
                "name": f"endpoint {key}",
                "goal": 0.3,
                "median": {"ratio": ratio, "cpu_ratio": cpu_ratio},
            }
        )
    return {"git": {"commit": commit}, "options": {"rounds": 3}, "endpoints": endpoints}


def test_the_plot_is_a_png_with_and_without_a_baseline(tmp_path):
    from benchmarks.harness import plot_ratios

    after = _result("b" * 40, {"search": (0.12, 0.2), "turn": (0.4, None), "new": (0.5, 0.6)})
    before = _result("a" * 40, {"search": (0.06, 0.1), "turn": (0.2, 0.3)})  # "new" did not exist
    for name, baseline in (("now.png", None), ("both.png", before)):
        plot_ratios(tmp_path / name, after, baseline)
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_floor_ratios_get_a_panel_of_their_own_and_make_the_plot_taller(tmp_path):
    from PIL import Image

    from benchmarks.harness import plot_ratios

    plain = _result("b" * 40, {"search": (0.12, 0.2), "turn": (0.4, 0.5)})
    floored = _result("b" * 40, {"search": (0.12, 0.2), "turn": (0.4, 0.5)})
    floored["endpoints"][1] |= {
        "floor": "floor.knowledge",
        "floor_goal": 1.5,
        "floor_ratio": {"time": 1.3, "cpu": 1.4},
    }
    before = _result("a" * 40, {"search": (0.06, 0.1)})
    before["endpoints"][1] |= {
        "floor": "floor.knowledge",
        "floor_goal": 1.5,
        "floor_ratio": {"time": 2.1, "cpu": 1.9},
    }
    heights = {}
    for name, result, baseline in (("plain.png", plain, None), ("floors.png", floored, before)):
        plot_ratios(tmp_path / name, result, baseline)
        with Image.open(tmp_path / name) as image:
            assert image.format == "PNG"
            heights[name] = image.size[1]
    assert heights["floors.png"] > heights["plain.png"]
