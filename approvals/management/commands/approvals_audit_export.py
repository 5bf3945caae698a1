"""Export the sealed audit ledger with a signed manifest, for verification outside the hub
(docs/audit.md "Export and offline verification").

    manage.py approvals_audit_export --generate-key audit-export.pem     # once: the operator's key
    manage.py approvals_audit_export --key audit-export.pem --print-public-key > audit-export.pub
    manage.py approvals_audit_export --key audit-export.pem --output ledger.jsonl \\
        [--since 2026-01-01T00:00:00Z] [--until 2026-02-01T00:00:00Z] [--write-verifier DIR]

The auditor runs ``python3 verify-audit-export.py ledger.jsonl --public-key audit-export.pub``
(the copy ``--write-verifier`` writes of ``bailing/audit/export_verify.py``).
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from bailing.audit import export_verify
from bailing.audit.export import (
    ExportInconsistent,
    NothingToExport,
    SigningKeyError,
    audit_export,
    signing_key_generate,
    signing_key_load,
)
from bailing.audit.ledger import audit_seal
from bailing.progress import add_progress_argument, progress_bar

EXIT_FAILED = 1
EXIT_USAGE = 2
VERIFIER_NAME = "verify-audit-export.py"


def _moment(value: str) -> datetime:
    """An ISO 8601 date or date and time; without an offset it is UTC."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"not an ISO 8601 time: {value!r}", returncode=EXIT_USAGE) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = (
        "Write the sealed audit ledger (all of it, or a time range) as JSON Lines after a manifest "
        "signed with the operator's Ed25519 key, for the standalone verifier."
    )

    def add_arguments(self, parser):
        parser.add_argument("--output", "-o", metavar="FILE", help="the export to write (never overwritten)")
        parser.add_argument("--key", metavar="PEM", help="the Ed25519 private key that signs the manifest")
        parser.add_argument(
            "--since",
            metavar="ISO8601",
            help="from the first event (in chain order) recorded at or after this time (UTC if no offset)",
        )
        parser.add_argument(
            "--until",
            metavar="ISO8601",
            help="to the last event (in chain order) recorded before this time (UTC if no offset)",
        )
        parser.add_argument(
            "--generate-key",
            metavar="PEM",
            help="create a new Ed25519 private key in this file (mode 0600), print its public key, stop",
        )
        parser.add_argument(
            "--print-public-key", action="store_true", help="print the public key of --key (PEM) and stop"
        )
        parser.add_argument(
            "--write-verifier",
            metavar="DIR",
            help=f"write the standalone verifier to DIR/{VERIFIER_NAME} (with --output: besides the export)",
        )
        parser.add_argument(
            "--no-seal", action="store_true", help="export what is sealed: leave unsealed events as they are"
        )
        add_progress_argument(parser)

    def handle(self, *args, **options):
        if options["generate_key"]:
            self._generate(Path(options["generate_key"]))
            return
        if options["print_public_key"]:
            self.stdout.write(export_verify.public_key_pem(self._key(options).public_key()), ending="")
            return
        if options["write_verifier"]:
            self._write_verifier(Path(options["write_verifier"]))
            if not options["output"]:
                return
        if not options["output"]:
            raise CommandError(
                "give --output FILE (or --generate-key, --print-public-key, --write-verifier)",
                returncode=EXIT_USAGE,
            )
        key = self._key(options)
        since = _moment(options["since"]) if options["since"] else None
        until = _moment(options["until"]) if options["until"] else None
        if since and until and since >= until:
            raise CommandError("--since must be before --until", returncode=EXIT_USAGE)
        if not options["no_seal"]:
            try:
                audit_seal(wait=True)
            except DatabaseError as exc:  # the lock is held too long: export what is sealed
                self.stderr.write(f"sealing skipped ({type(exc).__name__}); exporting what is sealed")
        self._export(Path(options["output"]), key, since, until, progress=options["progress"])

    def _key(self, options):
        if not options["key"]:
            raise CommandError("give --key PEM (create one with --generate-key)", returncode=EXIT_USAGE)
        try:
            return signing_key_load(Path(options["key"]))
        except SigningKeyError as exc:
            raise CommandError(str(exc), returncode=EXIT_USAGE) from None

    def _generate(self, path: Path) -> None:
        try:
            key = signing_key_generate(path)
        except FileExistsError:
            raise CommandError(f"{path} exists: not overwritten", returncode=EXIT_USAGE) from None
        except OSError as exc:
            raise CommandError(f"cannot create {path}: {exc.strerror}", returncode=EXIT_USAGE) from None
        public = key.public_key()
        fingerprint = export_verify.public_key_sha256(public)
        self.stderr.write(
            f"wrote the Ed25519 private key {path} (mode 0600), key {fingerprint}; "
            "its public key, for the auditor:"
        )
        self.stdout.write(export_verify.public_key_pem(public), ending="")

    def _write_verifier(self, directory: Path) -> None:
        target = directory / VERIFIER_NAME
        try:
            directory.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(export_verify.__file__, target)
            target.chmod(0o755)
        except OSError as exc:
            raise CommandError(f"cannot write {target}: {exc.strerror}", returncode=EXIT_USAGE) from None
        self.stdout.write(f"wrote the standalone verifier {target}")

    def _export(self, path: Path, key, since, until, *, progress: bool) -> None:
        if path.exists():
            raise CommandError(f"{path} exists: not overwritten", returncode=EXIT_USAGE)
        # Written aside and renamed when complete: an interrupted export leaves no file of that name.
        partial = path.with_name(path.name + ".partial")
        bar = None

        def on_bounds(count: int) -> None:
            nonlocal bar
            bar = progress_bar(total=count, desc="exporting", unit="event", force=progress)

        try:
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise CommandError(f"cannot create {partial}: {exc.strerror}", returncode=EXIT_USAGE) from None
        try:
            with os.fdopen(descriptor, "wb", buffering=1024 * 1024) as out:
                report = audit_export(
                    out=out,
                    key=key,
                    since=since,
                    until=until,
                    on_bounds=on_bounds,
                    on_event=lambda: bar.update(1),
                )
            os.replace(partial, path)
        except (NothingToExport, ExportInconsistent) as exc:
            partial.unlink(missing_ok=True)
            raise CommandError(str(exc), returncode=EXIT_FAILED) from None
        except DatabaseError as exc:  # an outage: no half export is left behind
            partial.unlink(missing_ok=True)
            raise CommandError(
                f"the database is unavailable ({type(exc).__name__}); nothing exported",
                returncode=EXIT_FAILED,
            ) from None
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        finally:
            if bar is not None:
                bar.close()
        self.stdout.write(
            f"exported {report.count} sealed audit events (positions {report.first_seq}..{report.last_seq}, "
            f"head {report.head_hash}) to {path}, signed by key {report.key_sha256}"
        )
        if report.unsealed:
            self.stdout.write(
                f"{report.unsealed} unsealed events not exported (only sealed events are; "
                "a later export includes them once sealed)"
            )
