"""``manage.py bailing_chaos --scenario db-restart|slow-clients [--json FILE]``: break things on purpose
against a real hub and print what happened (figures, not a test; it exits 1 when a rule broke).

``db-restart`` (:mod:`chaos.db_restart`) needs a PostgreSQL it may kill, so it
never uses the configured one: it starts a dedicated embedded server on a fresh data directory under
the system's temporary directory, re-runs itself in a child process whose settings point there
(``BAILING_PGDATA``), and removes the server and its directory afterwards, however the run ended.
It prints requests by status, the recovery seconds of a fast shutdown and of a crash, and the turns
lost or duplicated as counted in the database.

``slow-clients`` runs ``chaos.slow_clients.run`` (slow and stalled clients against the
gunicorn topology); without that module it says so and exits 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from chaos.live import dedicated_run, dedicated_server_check


class Command(BaseCommand):
    help = "Chaos scenarios against a real hub: db-restart (PostgreSQL stopped and killed), slow-clients."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scenario",
            required=True,
            choices=("db-restart", "slow-clients"),
            help="db-restart: stop the database under traffic and watch it come back; slow-clients: "
            "many slow and idle connections against the front",
        )
        parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE as JSON")
        db = parser.add_argument_group("db-restart")
        db.add_argument(
            "--outages",
            default="fast,crash",
            help="comma-separated, in order: fast (pg_ctl fast shutdown), crash (SIGKILL of the postmaster)",
        )
        db.add_argument("--writers", type=int, default=4, help="threads creating turns")
        db.add_argument("--readers", type=int, default=2, help="threads reading (bootstrap, lists, health)")
        db.add_argument("--workers", type=int, default=2, help="gunicorn workers")
        db.add_argument("--warmup", type=float, default=3.0, help="seconds of traffic before an outage")
        db.add_argument("--settle", type=float, default=3.0, help="seconds of traffic after each recovery")
        db.add_argument("--interval", type=float, default=0.02, help="pause of each thread between requests")
        db.add_argument("--timeout", type=float, default=300.0, help="the whole run may take this long")
        # How the parent hands the child its server; never given by hand.
        db.add_argument("--dedicated-server", metavar="DIR", help=argparse.SUPPRESS)
        slow = parser.add_argument_group("slow-clients")
        slow.add_argument(
            "--connections", type=int, default=200, help="slow and idle connections held open at once"
        )
        slow.add_argument("--seconds", type=float, default=20.0, help="how long the slow clients run")

    def handle(self, *args, **options) -> None:
        if options["scenario"] == "slow-clients":
            figures = self._slow_clients(options)
            self._write_json(options["json"], figures)
            return
        outages = [name.strip() for name in options["outages"].split(",") if name.strip()]
        from chaos.db_restart import OUTAGES

        if not outages or any(name not in OUTAGES for name in outages):
            raise CommandError(f"--outages takes {', '.join(OUTAGES)} (comma-separated)")
        if min(options["writers"], options["workers"]) < 1 or options["readers"] < 0:
            raise CommandError("--writers and --workers must be at least 1, --readers at least 0")
        if options["dedicated_server"]:
            self._db_restart_here(options, outages)
        else:
            self._db_restart_dedicated(options)

    # --- db-restart ----------------------------------------------------------------------------------

    def _db_restart_dedicated(self, options: dict[str, Any]) -> None:
        """Run the scenario in a child process bound to a fresh embedded server, then remove both."""
        command = [
            "bailing_chaos",
            "--scenario=db-restart",
            f"--outages={options['outages']}",
            f"--writers={options['writers']}",
            f"--readers={options['readers']}",
            f"--workers={options['workers']}",
            f"--warmup={options['warmup']}",
            f"--settle={options['settle']}",
            f"--interval={options['interval']}",
        ]
        if options["json"]:
            command.append(f"--json={Path(options['json']).resolve()}")
        code, _ = dedicated_run(
            command=command, write=self.stdout.write, timeout=options["timeout"], label="db-restart"
        )
        if code != 0:
            raise CommandError(f"db-restart failed (exit {code})")

    def _db_restart_here(self, options: dict[str, Any], outages: list[str]) -> None:
        from chaos import db_restart

        pgdata = dedicated_server_check(options["dedicated_server"])
        if pgdata is None:
            raise CommandError("--dedicated-server must be the fresh embedded server these settings use")

        def say(text: str) -> None:
            self.stdout.write(text)
            self.stdout.flush()

        figures = db_restart.run(
            say=say,
            pgdata=pgdata,
            outages=outages,
            writers=options["writers"],
            readers=options["readers"],
            workers=options["workers"],
            warmup=options["warmup"],
            settle=options["settle"],
            interval=options["interval"],
        )
        for line in db_restart.summary_lines(figures):
            self.stdout.write(line)
        self._write_json(options["json"], figures)
        if not figures["ok"]:
            raise CommandError("db-restart broke a rule (see the figures above)")

    # --- slow-clients --------------------------------------------------------------------------------

    def _slow_clients(self, options: dict[str, Any]) -> dict[str, Any]:
        try:
            module = importlib.import_module("chaos.slow_clients")
        except ModuleNotFoundError as exc:
            if exc.name not in ("chaos", "chaos.slow_clients"):
                raise
            raise CommandError(
                "the slow-clients scenario is not available: chaos.slow_clients is missing",
                returncode=2,
            ) from None
        figures = module.run(
            stdout=self.stdout, connections=options["connections"], seconds=options["seconds"]
        )
        for key, value in _flatten(figures):
            self.stdout.write(f"{key}: {value}")
        return figures

    def _write_json(self, path: str | None, figures: dict[str, Any]) -> None:
        if path:
            Path(path).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            self.stdout.write(f"figures written to {path}")


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        items: list[tuple[str, Any]] = []
        for key, inner in value.items():
            items += _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
        return items
    return [(prefix, value)]
