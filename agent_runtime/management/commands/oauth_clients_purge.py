"""``manage.py oauth_clients_purge``: delete OAuth clients that never completed a sign-in and are past
``OAUTH_REGISTER_PENDING_TTL`` (registrations also purge them lazily; this is for a cron job)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from agent_runtime.services.agent_auth.oauth import oauth_clients_purge


class Command(BaseCommand):
    help = "Delete expired OAuth clients (registrations and metadata document clients never signed in)."

    def handle(self, *args, **options):
        total = 0
        while True:
            deleted = oauth_clients_purge()
            total += deleted
            if deleted == 0:
                break
        self.stdout.write(f"oauth_clients_purge: {total} deleted")
