"""Seal the audit ledger's committed events, then verify the whole chain (docs/audit.md); or, with
``--file EXPORT --public-key PEM``, verify an export offline (the standalone verifier's checks,
``bailing/audit/export_verify.py``: no database).

Exit status: 0 — every sealed link holds and every unsealed event matches its content hash;
1 — the chain is broken (the first broken event is named); 3 — intact, but with
``--max-unsealed-age`` the oldest unsealed event is older than that (sealing is stuck behind
something: no sealer running, or the lock held). With ``--file``: 0 — the export verifies; 1 — it
does not (the first bad line is named with its failure code); 2 — the file or the key is unreadable.
"""

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from bailing.audit import export_verify
from bailing.audit.ledger import audit_chain_verify, audit_seal

EXIT_BROKEN = 1
EXIT_USAGE = 2
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
        parser.add_argument(
            "--file",
            metavar="EXPORT",
            help="verify this export of approvals_audit_export instead of the database (needs --public-key)",
        )
        parser.add_argument(
            "--public-key", metavar="PEM", help="with --file: the exporter's Ed25519 public key (PEM)"
        )

    def handle(self, *args, **options):
        if options["file"] or options["public_key"]:
            self._verify_file(options["file"], options["public_key"])
            return
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

    def _verify_file(self, path: str | None, public_key_path: str | None) -> None:
        """The standalone verifier's checks, on the file alone."""
        if not (path and public_key_path):
            raise CommandError("--file and --public-key go together", returncode=EXIT_USAGE)
        try:
            with open(public_key_path, "rb") as handle:
                public_key = export_verify.load_public_key(handle.read())
        except (OSError, ValueError) as exc:
            raise CommandError(
                f"cannot read the public key {public_key_path}: {exc}", returncode=EXIT_USAGE
            ) from None
        try:
            with open(path, "rb") as stream:
                summary = export_verify.verify_export(stream, public_key)
        except OSError as exc:
            raise CommandError(
                f"cannot read the export {path}: {exc.strerror}", returncode=EXIT_USAGE
            ) from None
        except export_verify.ExportBroken as broken:
            raise CommandError(
                f"audit export broken at line {broken.line}: {broken.code}: {broken.reason}",
                returncode=EXIT_BROKEN,
            ) from None
        self.stdout.write(export_verify.describe(summary))
