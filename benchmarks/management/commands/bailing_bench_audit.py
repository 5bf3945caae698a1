"""Benchmark of the audit ledger: audited actions per second, hub-wide, with 1, 2, 4 and 8 threads.

Each thread has its own database connection and, for ``--seconds``, runs one short transaction after
another: record one event with ``audit_record`` (optionally plus a tiny row write into a scratch
table, ``--row-write``) and commit. A barrier starts every thread at once, after a warm-up. Each
thread count is one run; after it, what the after-commit seals left unsealed is counted, everything
is sealed (``audit_seal``) and the ledger is verified end to end (``audit_chain_verify``), and the
time each takes is reported.

Its floor (issue 26), measured interleaved with it at every thread count (which goes first alternates):
the same threads committing a bare one-row ``INSERT`` into a scratch table, one transaction each — what
a durable commit costs here. The report gives audited actions/s ÷ that rate against the goal
(≥ :data:`FLOOR_GOAL`); ``--no-floor`` skips it.

The events are real audit events (action ``bailing.bench.audit``) and stay in the ledger, which is
append-only: run this against a development database, never a production one. Figures are only
comparable within one run on one machine (the machine may be shared: the load average is printed
before and after).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import threading
import time
import uuid
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_chain_verify, audit_record, audit_seal
from bailing.audit.models import AuditEvent
from benchmarks.harness import percentile

ACTION = "bailing.bench.audit"
SCRATCH_TABLE = "bailing_bench_audit_rows"
INSERT_ROW = "INSERT INTO bailing_bench_audit_rows (n) VALUES (%s)"
FLOOR_TABLE = "bailing_bench_audit_floor"
INSERT_FLOOR = "INSERT INTO bailing_bench_audit_floor (n) VALUES (%s)"
FLOOR_GOAL = 0.7  # issue 26: audited actions hub-wide at least 0.7 × the bare commit rate
WARM_UP = 5  # transactions per thread before the barrier


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


class Command(BaseCommand):
    help = "Benchmark audited actions per second hub-wide with 1, 2, 4, 8 threads, then verify the chain."

    def add_arguments(self, parser):
        parser.add_argument("--threads", default="1,2,4,8", help="comma-separated thread counts")
        parser.add_argument("--seconds", type=float, default=5.0, help="duration of each run")
        parser.add_argument(
            "--row-write", action="store_true", help="also insert one row into a scratch table per action"
        )
        parser.add_argument(
            "--no-floor",
            dest="floor",
            action="store_false",
            help="skip the floor: a bare one-row INSERT + COMMIT at the same thread counts, interleaved",
        )
        parser.add_argument("--json", dest="json_path", default="", help="write the figures to this file")

    def handle(self, *args, **options):
        try:
            counts = [int(part) for part in options["threads"].split(",") if part.strip()]
        except ValueError as error:
            raise CommandError("--threads takes comma-separated integers") from error
        if not counts or min(counts) < 1 or options["seconds"] <= 0:
            raise CommandError("--threads must be positive integers and --seconds positive")
        row_write = options["row_write"]
        with connection.cursor() as cursor:
            for table in [SCRATCH_TABLE] * row_write + [FLOOR_TABLE] * options["floor"]:
                cursor.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} "
                    "(id bigserial PRIMARY KEY, n integer NOT NULL, at timestamptz NOT NULL DEFAULT now())"
                )
        load_before = _load()
        self.stdout.write(
            f"audit ledger benchmark: {options['seconds']:.0f} s per run, "
            f"{'event + row write' if row_write else 'event only'} per transaction; load {load_before}"
        )
        rows = []
        try:
            for index, threads in enumerate(counts):
                floor = None
                if options["floor"] and index % 2:
                    floor = self._run(threads, options["seconds"], row_write, floor=True)
                row = self._run(threads, options["seconds"], row_write)
                if options["floor"] and floor is None:
                    floor = self._run(threads, options["seconds"], row_write, floor=True)
                if floor is not None:
                    row["floor"] = floor
                    row["floor_ratio"] = (
                        row["per_second"] / floor["per_second"] if floor["per_second"] else None
                    )
                rows.append(row)
        finally:
            with connection.cursor() as cursor:
                for table in (SCRATCH_TABLE, FLOOR_TABLE):
                    cursor.execute(f"DROP TABLE IF EXISTS {table}")
        load_after = _load()
        self._report(rows, load_before, load_after, options)

    # --- one run -------------------------------------------------------------------------------------
    def _run(self, threads: int, seconds: float, row_write: bool, *, floor: bool = False) -> dict:
        run_id = uuid.uuid4().hex[:12]
        label = "floor: bare INSERT + COMMIT" if floor else "audited actions"
        self.stdout.write(f"  {label}, {threads} thread(s) for {seconds:.0f} s ...")
        self.stdout.flush()
        barrier = threading.Barrier(threads + 1)
        stop = threading.Event()
        latencies: list[list[float]] = [[] for _ in range(threads)]
        failures: list[BaseException] = []

        def action(index: int, n: int) -> None:
            if floor:
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute(INSERT_FLOOR, [n])
                return
            with transaction.atomic():
                audit_record(
                    actor=Actor.system("bailing_bench_audit"),
                    action=ACTION,
                    target_type="bench_run",
                    target_id=run_id,
                    data={"thread": index, "n": n},
                )
                if row_write:
                    with connection.cursor() as cursor:
                        cursor.execute(INSERT_ROW, [n])

        def worker(index: int) -> None:
            mine = latencies[index]
            try:
                for n in range(WARM_UP):
                    action(index, -1 - n)
                barrier.wait(timeout=60)
                n = 0
                while not stop.is_set():
                    started = time.perf_counter()
                    action(index, n)
                    mine.append(time.perf_counter() - started)
                    n += 1
            except BaseException as error:  # reported after the run
                failures.append(error)
                stop.set()
                barrier.abort()
            finally:
                connection.close()

        workers = [threading.Thread(target=worker, args=(index,)) for index in range(threads)]
        for thread in workers:
            thread.start()
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=60)
        started = time.perf_counter()
        stop.wait(seconds)
        stop.set()
        for thread in workers:
            thread.join()
        elapsed = time.perf_counter() - started
        if failures:
            raise CommandError(f"{threads} thread(s): {type(failures[0]).__name__}: {failures[0]}")
        done = sorted(value * 1000 for mine in latencies for value in mine)
        rate = {
            "threads": threads,
            "actions": len(done),
            "seconds": elapsed,
            "per_second": len(done) / elapsed,
            "p50_ms": percentile(done, 0.50),
            "p99_ms": percentile(done, 0.99),
        }
        if floor:
            return rate
        recorded = AuditEvent.objects.filter(action=ACTION, target_id=run_id).count()
        expected = len(done) + threads * WARM_UP
        if recorded != expected:
            raise CommandError(f"{threads} thread(s): {recorded} events in the ledger, {expected} committed")

        left_unsealed = AuditEvent.objects.filter(chain_seq__isnull=True).count()
        seal_started = time.perf_counter()
        sealed = audit_seal(wait=True)
        seal_seconds = time.perf_counter() - seal_started
        verify_started = time.perf_counter()
        report = audit_chain_verify()
        verify_seconds = time.perf_counter() - verify_started
        return {
            **rate,
            "mean_ms": statistics.fmean(done) if done else 0.0,
            "left_unsealed": left_unsealed,
            "sealed_after": sealed.sealed,
            "seal_seconds": seal_seconds,
            "verified": report.checked,
            "unsealed_after": report.unsealed,
            "verify_ok": report.ok and not report.unsealed,
            "verify_seconds": verify_seconds,
        }

    # --- output --------------------------------------------------------------------------------------
    def _report(self, rows: list[dict], load_before: str, load_after: str, options) -> None:
        out = self.stdout.write
        out("")
        out(
            f"{'threads':>7} {'actions':>8} {'actions/s':>10} {'p50 ms':>8} {'p99 ms':>8} "
            f"{'unsealed':>9} {'seal s':>7} {'verified':>9} {'verify s':>9}  chain"
        )
        for row in rows:
            out(
                f"{row['threads']:7d} {row['actions']:8d} {row['per_second']:10.0f} {row['p50_ms']:8.2f} "
                f"{row['p99_ms']:8.2f} {row['left_unsealed']:9d} {row['seal_seconds']:7.2f} "
                f"{row['verified']:9d} {row['verify_seconds']:9.2f}  "
                f"{'ok' if row['verify_ok'] else 'BROKEN'}"
            )
        out("unsealed: events the after-commit seals had left when the run stopped (then all sealed)")
        floors = [row for row in rows if row.get("floor")]
        if floors:
            out("")
            out(f"{'threads':>7} {'floor/s':>9} {'floor p50':>10} {'audited ÷ floor':>16} {'goal':>6}")
            for row in floors:
                ratio = row["floor_ratio"]
                mark = "" if ratio is not None and ratio >= FLOOR_GOAL else "!"
                out(
                    f"{row['threads']:7d} {row['floor']['per_second']:9.0f} {row['floor']['p50_ms']:10.2f} "
                    f"{ratio if ratio is not None else 0:16.2f} {'≥' + format(FLOOR_GOAL, '.1f') + mark:>6}"
                )
            out(
                "floor: the same threads committing a bare one-row INSERT each, interleaved with the audited "
                "runs; '!' = below the goal"
            )
        out(f"load average before {load_before}, after {load_after} (1, 5, 15 min)")
        if options["json_path"]:
            Path(options["json_path"]).write_text(
                json.dumps(
                    {
                        "seconds": options["seconds"],
                        "row_write": options["row_write"],
                        "floor_goal": FLOOR_GOAL if options["floor"] else None,
                        "load_before": load_before,
                        "load_after": load_after,
                        "runs": rows,
                    },
                    indent=2,
                )
                + "\n"
            )
            out(f"figures written to {options['json_path']}")
        if not all(row["verify_ok"] for row in rows):
            raise CommandError("the audit chain did not verify after the benchmark")
