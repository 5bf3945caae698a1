"""``generateschema``: DRF's own generator cannot describe this hub (and needs ``inflection``); this
name prints the hub's OpenAPI 3.1 document, the one ``/api/schema/`` serves, built by drf-spectacular.
``python manage.py spectacular [--validate]`` is the full command (docs/api.md "API reference")."""

from __future__ import annotations

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Print the hub's OpenAPI 3.1 document (drf-spectacular; see `manage.py spectacular --help`)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--format",
            dest="format",
            choices=["openapi", "openapi-json"],
            default="openapi",
            help="openapi (YAML, the default) or openapi-json",
        )
        parser.add_argument("--file", dest="file", default=None, help="write to this file instead of stdout")

    def handle(self, *args, **options):
        self.stderr.write(
            "generateschema prints drf-spectacular's document; `manage.py spectacular` has more options."
        )
        call_command(
            "spectacular",
            format=options["format"],
            file=options["file"],
            stdout=self.stdout,
            stderr=self.stderr,
        )
