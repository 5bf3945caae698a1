"""Issue (or re-issue) a client's Client Token: ``manage.py bailing_client_token APP_ID``."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from agent_runtime.models import Client
from agent_runtime.services.clients import client_token_rotate
from bailing.audit.actor import Actor


class Command(BaseCommand):
    help = (
        "Give a client a new Client Token and print it once; any previous token stops working at once. "
        "The token alone is printed on stdout so scripts can capture it."
    )

    def add_arguments(self, parser):
        parser.add_argument("app_id", help="the client's app_id")

    def handle(self, *args, **options):
        client = Client.objects.filter(app_id=options["app_id"]).first()
        if client is None:
            raise CommandError("no client has that app_id")
        token = client_token_rotate(client=client, actor=Actor.system("bailing_client_token"))
        # Guidance goes to stderr so that `TOKEN=$(manage.py bailing_client_token x)` captures only
        # the token. The hub keeps only its hash: this is the one time it can be read.
        self.stderr.write(
            f"New Client Token for {client.app_id} (shown once; the previous token no longer works):"
        )
        self.stdout.write(token)
