"""Seed the demo: roles, the demo administrator, the demo agent client and the demo workspace.

Idempotent: run it any number of times. The administrator's password is generated once, kept in
``var/demo-admin-password`` (mode 0600) and printed on every run, so ``make demo`` always tells you
how to sign in.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from agent_runtime.config import ConfigError
from agent_runtime.services.clients import Actor
from agent_runtime.services.config_apply import config_apply
from bailing.roles import ADMINISTRATOR, roles_sync

DEMO_CONFIG = Path(settings.BASE_DIR) / "examples" / "demo.yaml"
DEMO_ADMIN = "alice"


def _demo_password() -> tuple[str, bool]:
    path = Path(settings.BASE_DIR) / "var" / "demo-admin-password"
    if path.exists():
        return path.read_text().strip(), False
    path.parent.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(12)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(password)
    return password, True


class Command(BaseCommand):
    help = "Seed (or refresh) the demo workspace, demo agent client and demo administrator."

    def add_arguments(self, parser):
        parser.add_argument("--public-url", default=settings.BAILING_PUBLIC_URL)

    def handle(self, *args, **options):
        public_url = options["public_url"].rstrip("/")
        roles_sync()
        document = yaml.safe_load(DEMO_CONFIG.read_text(encoding="utf-8"))
        try:
            plan = config_apply(document=document, dry_run=False, actor=Actor.system("bailing_demo"))
        except ConfigError as exc:  # the shipped demo file is tested; this guards local edits
            raise SystemExit(f"examples/demo.yaml: error at {exc.path}: {exc.reason}") from exc
        password, fresh = _demo_password()
        User = get_user_model()
        with transaction.atomic():
            user, created = User.objects.get_or_create(username=DEMO_ADMIN, defaults={"is_active": True})
            if created or fresh or not user.check_password(password):
                user.set_password(password)
                user.save()
            user.groups.add(Group.objects.get(name=ADMINISTRATOR))
        changed = sum(1 for item in plan.items if item.action != "unchanged")
        line = "=" * 72
        self.stdout.write(
            "\n".join(
                [
                    line,
                    "Bailing Hub demo is ready.",
                    "",
                    f"  Console        {public_url}/console/",
                    f"  Sign in as     {DEMO_ADMIN} / {password}",
                    "",
                    "  Connect an agent (PKCE loopback sign-in, approved on the hub's consent page):",
                    f"    hub URL      {public_url}",
                    "    client       demo-agent",
                    "    workspace    demo",
                    "  or try the reference agent client:",
                    f"    .venv/bin/python -m bailing.agent_client login --hub {public_url} "
                    "--client demo-agent --workspace demo",
                    "",
                    f"  Config applied from examples/demo.yaml ({changed} item(s) changed).",
                    line,
                ]
            )
        )
