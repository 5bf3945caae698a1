"""Seal the audit ledger's committed events (docs/audit.md): once, or every ``--every`` seconds.

Appends ask for a seal after they commit, so this is the safety net for events left behind when a
process stopped between its commit and its seal, or a burst ended while another sealer held the lock.
"""

import time

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection

from bailing.audit.ledger import audit_seal


class Command(BaseCommand):
    help = "Seal the committed audit events: once, or every --every seconds until stopped."

    def add_arguments(self, parser):
        parser.add_argument("--every", type=float, default=0.0, metavar="SECONDS", help="repeat forever")

    def handle(self, *args, **options):
        every = options["every"]
        if every < 0:
            raise CommandError("--every must not be negative")
        while True:
            try:
                report = audit_seal(wait=True)
            except DatabaseError as exc:
                if not every:
                    raise CommandError(f"sealing failed: {type(exc).__name__}") from exc
                self.stderr.write(f"sealing failed ({type(exc).__name__}); trying again")
                connection.close()
            else:
                if report.sealed or not every:
                    self.stdout.write(f"sealed {report.sealed} audit events in {report.batches} batches")
                if report.mismatched:
                    self.stderr.write(
                        f"{len(report.mismatched)} sealed event(s) do not match their content hash: "
                        "run approvals_audit_verify"
                    )
            if not every:
                return
            time.sleep(every)
