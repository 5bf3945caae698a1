"""Refresh tool provider specs: ``manage.py bailing_provider_refresh [NAME ...] [--all]``.

One line per provider, e.g. ``[1/3] demo-shop: ok (6 tools, 0 warnings)`` or
``[2/3] billing: failed: spec_not_protected (...)``; the exit status is non-zero when any refresh
failed. Lines carry only codes and fixed texts from ``provider_refresh``, never a secret or a body.
"""

from __future__ import annotations

import re

from django.core.management.base import BaseCommand, CommandError

from agent_runtime.models import ToolProvider
from agent_runtime.patterns import RESOURCE_NAME
from agent_runtime.services.providers import RefreshOutcome, provider_refresh
from bailing.audit.actor import Actor

_NAME_RE = re.compile(RESOURCE_NAME)


def format_outcome(outcome: RefreshOutcome) -> str:
    if outcome.ok:
        return f"ok ({outcome.tools} tools, {outcome.warnings} warnings)"
    return f"failed: {outcome.error} ({outcome.message})"


class Command(BaseCommand):
    help = (
        "Fetch (URL providers, with the access probes of their spec_access_policy) or recompile "
        "(inline providers) tool provider specs. A failed refresh keeps the last good spec."
    )

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", metavar="NAME", help="provider names")
        parser.add_argument("--all", action="store_true", help="refresh every enabled provider")

    def handle(self, *args, **options):
        names: list[str] = options["names"]
        if options["all"] == bool(names):
            raise CommandError("name one or more providers, or pass --all (not both)")
        if options["all"]:
            providers = list(ToolProvider.objects.filter(enabled=True).order_by("name"))
            if not providers:
                self.stdout.write("no enabled tool providers")
                return
        else:
            found = {provider.name: provider for provider in ToolProvider.objects.filter(name__in=names)}
            unknown = [
                name if _NAME_RE.fullmatch(name) else "(invalid name)" for name in names if name not in found
            ]
            if unknown:
                raise CommandError("unknown tool providers: " + ", ".join(unknown))
            # Keep the order given, once per name.
            providers = [found[name] for name in dict.fromkeys(names)]

        actor = Actor.system("bailing_provider_refresh")
        failed = 0
        for position, provider in enumerate(providers, start=1):
            outcome = provider_refresh(provider=provider, actor=actor)
            failed += not outcome.ok
            self.stdout.write(f"[{position}/{len(providers)}] {provider.name}: {format_outcome(outcome)}")
        if failed:
            raise CommandError(
                f"{failed} of {len(providers)} refreshes failed; the last good specs were kept"
            )
