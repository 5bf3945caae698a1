"""``manage.py bailing_soak --minutes 20 [--seconds S] [--json FILE] [--plot FILE] [--faults LIST|none]``:
the shipped topology under a mixed agent workload for a given time, with scheduled faults, and its
figures per minute (per 10 s under 3 minutes) as JSON and a PNG (:mod:`chaos.soak`).

It never uses the configured database: like ``bailing_chaos --scenario db-restart`` it starts a
dedicated embedded PostgreSQL on a fresh temporary directory, re-runs itself in a child process whose
settings point there (:func:`chaos.live.dedicated_run`), and removes the server and its directory
afterwards, however the run ended (Ctrl-C included: the child stops everything it started on SIGTERM;
what a killed child left, by the pids it wrote down, is killed here). Missed goals are printed, not an
exit code: it exits non-zero only when the run itself failed.
"""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from chaos import soak
from chaos.live import dedicated_run, dedicated_server_check
from chaos.soak import FAULTS as FAULT_NAMES


class Command(BaseCommand):
    help = "Soak: the shipped topology under a mixed agent workload with scheduled faults; figures over time."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--minutes", type=float, default=20.0, help="how long the load runs (default 20)")
        parser.add_argument(
            "--seconds", type=float, help="how long the load runs, in seconds (wins over --minutes)"
        )
        parser.add_argument("--json", metavar="FILE", help="write the figures to FILE as JSON")
        parser.add_argument("--plot", metavar="FILE", help="write the plot to FILE (PNG)")
        parser.add_argument(
            "--faults",
            default=",".join(FAULT_NAMES),
            help="comma-separated: db-restart, worker-kill, business-reset; or none",
        )
        parser.add_argument(
            "--logs", metavar="DIR", help="copy the processes' logs (hub, shop, worker, supervisor) to DIR"
        )
        parser.add_argument("--threads", type=int, default=4, help="agent threads")
        parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
        parser.add_argument(
            "--interval", type=float, default=0.02, help="pause of each thread between requests"
        )
        parser.add_argument("--dedicated-server", metavar="DIR", help=argparse.SUPPRESS)

    def handle(self, *args, **options) -> None:
        seconds = options["seconds"] if options["seconds"] is not None else options["minutes"] * 60
        if seconds < 30:
            raise CommandError("the soak runs at least 30 seconds")
        faults = (
            []
            if options["faults"].strip() == "none"
            else [f.strip() for f in options["faults"].split(",") if f.strip()]
        )
        if any(name not in FAULT_NAMES for name in faults):
            raise CommandError(f"--faults takes {', '.join(FAULT_NAMES)} (comma-separated) or none")
        if min(options["threads"], options["workers"]) < 1:
            raise CommandError("--threads and --workers must be at least 1")
        if options["dedicated_server"]:
            self._here(options, seconds, faults)
            return
        command = [
            "bailing_soak",
            f"--seconds={seconds}",
            f"--faults={options['faults']}",
            f"--threads={options['threads']}",
            f"--workers={options['workers']}",
            f"--interval={options['interval']}",
        ]
        for name in ("json", "plot", "logs"):
            if options[name]:
                command.append(f"--{name}={Path(options[name]).resolve()}")

        def write(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        try:
            code, _ = dedicated_run(command=command, write=write, timeout=seconds + 600, label="soak")
        except KeyboardInterrupt:
            # dedicated_run stopped the child (which stops what it started) and removed the server.
            raise CommandError(
                "interrupted: every process the soak started is stopped", returncode=130
            ) from None
        if code != 0:
            raise CommandError(f"the soak failed (exit {code})")

    def _here(self, options: dict[str, Any], seconds: float, faults: list[str]) -> None:
        pgdata = dedicated_server_check(options["dedicated_server"])
        if pgdata is None:
            raise CommandError("--dedicated-server must be the fresh embedded server these settings use")

        def stop(signum, frame):
            raise SystemExit(128 + signum)

        # The parent stops this process with SIGTERM (Ctrl-C there, or its timeout): unwind, so that
        # everything started here is stopped on the way out.
        signal.signal(signal.SIGTERM, stop)

        def say(text: str) -> None:
            self.stdout.write(text)
            self.stdout.flush()

        figures = soak.run(
            say=say,
            pgdata=pgdata,
            seconds=seconds,
            faults=faults,
            threads=options["threads"],
            workers=options["workers"],
            interval=options["interval"],
            logs=Path(options["logs"]) if options["logs"] else None,
        )
        for line in soak.summary_lines(figures):
            say(line)
        if options["json"]:
            Path(options["json"]).write_text(
                json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
            say(f"figures written to {options['json']}")
        if options["plot"]:
            soak.plot(Path(options["plot"]), figures)
            say(f"plot written to {options['plot']}")
