"""Seal the audit ledger's committed events, then verify the whole chain (docs/audit.md).

Exit status: 0 — every sealed link holds and every unsealed event matches its content hash;
1 — the chain is broken (the first broken event is named); 3 — intact, but with
``--max-unsealed-age`` the oldest unsealed event is older than that (sealing is stuck behind
something: no sealer running, or the lock held).
"""

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from bailing.audit.ledger import audit_chain_verify, audit_seal

EXIT_BROKEN = 1
EXIT_STALE_TAIL = 3


class Command(BaseCommand):
    help = (
        "Seal the committed audit events, then recompute the hash chain: name the first broken link, "
        "report the unsealed tail."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-seal", action="store_true", help="verify only: leave unsealed events as they are"
        )
        parser.add_argument(
            "--max-unsealed-age",
            type=float,
            default=None,
            metavar="SECONDS",
            help=f"exit {EXIT_STALE_TAIL} when an unsealed event is older than this",
        )

    def handle(self, *args, **options):
        if not options["no_seal"]:
            try:
                sealed = audit_seal(wait=True)
            except DatabaseError as exc:  # the lock is held too long: verify what is sealed
                self.stderr.write(f"sealing skipped ({type(exc).__name__}); verifying as it stands")
            else:
                if sealed.mismatched:
                    self.stderr.write(
                        f"sealed {len(sealed.mismatched)} event(s) whose content does not match their "
                        "content hash"
                    )
                if options["verbosity"] >= 2:
                    self.stdout.write(f"sealed {sealed.sealed} events in {sealed.batches} batches")
        report = audit_chain_verify()
        if not report.ok:
            raise CommandError(
                f"audit chain broken at event {report.first_broken_id}: {report.reason} "
                f"({report.checked} events verified before it)",
                returncode=EXIT_BROKEN,
            )
        line = f"audit chain ok: {report.checked} events verified"
        age = report.oldest_unsealed_age()
        if report.unsealed:
            line += f"; {report.unsealed} unsealed (content hashes verified), the oldest {age:.1f} s old"
        self.stdout.write(line)
        limit = options["max_unsealed_age"]
        if limit is not None and age is not None and age > limit:
            raise CommandError(
                f"{report.unsealed} audit events unsealed, the oldest {age:.1f} s old (over {limit:g} s)",
                returncode=EXIT_STALE_TAIL,
            )
