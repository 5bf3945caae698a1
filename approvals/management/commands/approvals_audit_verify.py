"""Verify the audit hash chain; exit 1 naming the first broken link."""

from django.core.management.base import BaseCommand, CommandError

from bailing.audit.ledger import audit_chain_verify


class Command(BaseCommand):
    help = "Recompute the audit ledger's hash chain and name the first broken link, if any."

    def handle(self, *args, **options):
        report = audit_chain_verify()
        if not report.ok:
            raise CommandError(
                f"audit chain broken at event {report.first_broken_id}: {report.reason} "
                f"({report.checked} events verified before it)"
            )
        self.stdout.write(f"audit chain ok: {report.checked} events verified")
