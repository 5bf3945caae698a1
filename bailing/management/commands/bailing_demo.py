"""Seed the demo: roles, the demo administrator, the demo agent client, the Demo Shop tool provider,
the demo knowledge base and the demo workspace, then refresh the Demo Shop's tool spec and load the
demo knowledge (examples/demo-knowledge/).

Idempotent: run it any number of times. The administrator's password is generated once, kept in
``var/demo-admin-password`` (mode 0600) and printed on every run, so ``make demo`` always tells you
how to sign in. The Demo Shop's HMAC secret lives in ``var/demo-tool-secret`` (mode 0600, created
here or by ``scripts/run-demo``, whichever runs first); ``examples/demo.yaml`` only names the file.

The demo agent client's Client Token lives in ``var/demo-client-token`` too, shared with the Demo Shop,
which verifies the hub's approval webhooks and posts decisions with it. A second hub user, ``manager``,
holds the approver role: the agent acts on behalf of whoever signs it in, and nobody approves their
own call.

``scripts/run-demo`` starts the Demo Shop before running this command, so the refresh normally
succeeds. Without it (tests, a first look) the refresh fails and the banner says so; seeding never
depends on the business system being up.
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
from agent_runtime.models import Client, ToolProvider
from agent_runtime.services.clients import client_token_plaintext, client_token_set
from agent_runtime.services.config_apply import config_apply
from agent_runtime.services.providers import RefreshOutcome, provider_refresh
from bailing.audit.actor import Actor
from bailing.roles import ADMINISTRATOR, APPROVER, roles_sync
from knowledge.models import Document, KnowledgeBase
from knowledge.services.documents import documents_put_files
from knowledge.services.indexing import documents_index

DEMO_CONFIG = Path(settings.BASE_DIR) / "examples" / "demo.yaml"
DEMO_ADMIN = "alice"
# A second hub user who decides approvals: nobody approves a call made on their own behalf, and the
# demo agent acts on behalf of whoever signs it in (alice, in the walk-through).
DEMO_APPROVER = "manager"
DEMO_CLIENT = "demo-agent"
# The demo agent client's Client Token, shared with the Demo Shop (it verifies approval webhooks and
# posts decisions with it); created here or by scripts/run-demo, mode 0600.
DEMO_CLIENT_TOKEN = Path(settings.BASE_DIR) / "var" / "demo-client-token"
DEMO_PROVIDER = "demo-shop"
DEMO_TOOL_SECRET = Path(settings.BASE_DIR) / "var" / "demo-tool-secret"
DEMO_KB = "demo-handbook"
DEMO_SHOP_APPROVALS = "http://127.0.0.1:8100/approvals"
DEMO_KNOWLEDGE_DIR = Path(settings.BASE_DIR) / "examples" / "demo-knowledge"


def _point_at_shop(document: dict, shop_url: str) -> str:
    """Point the demo-shop provider, and every approval webhook under its base URL, at ``shop_url``
    (``--shop-url``: the shop on another port, as ``scripts/entrypoint`` runs it with ``DEMO_PORT``);
    return the approvals page's URL."""
    shop_url = shop_url.rstrip("/")
    provider = next(p for p in document.get("tool_providers", []) if p.get("name") == DEMO_PROVIDER)
    old_base = provider["base_url"].rstrip("/")
    provider["base_url"] = shop_url
    for route in document.get("routes", []):
        approval = (route.get("tools") or {}).get("approval") or {}
        if str(approval.get("url", "")).startswith(old_base + "/"):
            approval["url"] = shop_url + approval["url"][len(old_base) :]
    return f"{shop_url}/approvals"


def _demo_knowledge() -> list[str]:
    """Load examples/demo-knowledge/*.md into the demo KB and index what changed, in-process (a few
    seconds), so the demo answers at once even before ``knowledge_worker`` picks anything up."""
    kb = KnowledgeBase.objects.filter(kb_id=DEMO_KB).first()
    if kb is None:
        return [f"  Demo knowledge: knowledge base {DEMO_KB} is not configured."]
    queued = documents_put_files(
        kb=kb,
        paths=sorted(DEMO_KNOWLEDGE_DIR.glob("*.md")),
        source_prefix="demo:",
        actor=Actor.system("bailing_demo"),
    )
    if queued:
        documents_index(document_ids=queued)
    ready = Document.objects.filter(kb=kb, status=Document.Status.READY).count()
    return [f"  Demo knowledge: {ready} document(s) ready in {DEMO_KB} (indexed {len(queued)} now)."]


def _ensure_private_file(path: Path, make_value) -> tuple[str, bool]:
    """Read ``path`` or create it once with ``make_value()`` (mode 0600); return (value, created)."""
    if path.exists():
        return path.read_text().strip(), False
    path.parent.mkdir(parents=True, exist_ok=True)
    value = make_value()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value)
    return value, True


def _demo_password(name: str = "admin") -> tuple[str, bool]:
    return _ensure_private_file(
        Path(settings.BASE_DIR) / "var" / f"demo-{name}-password", lambda: secrets.token_urlsafe(12)
    )


def _demo_user(username: str, role: str, password: str, fresh: bool) -> None:
    User = get_user_model()
    with transaction.atomic():
        user, created = User.objects.get_or_create(username=username, defaults={"is_active": True})
        if created or fresh or not user.check_password(password):
            user.set_password(password)
            user.save()
        user.groups.add(Group.objects.get(name=role))


def _demo_client_token() -> None:
    """Give the demo agent client the token in ``var/demo-client-token`` (once; re-runs change nothing)."""
    token, _ = _ensure_private_file(DEMO_CLIENT_TOKEN, lambda: secrets.token_urlsafe(32))
    client = Client.objects.filter(app_id=DEMO_CLIENT).first()
    if client is not None and client_token_plaintext(client) != token:
        client_token_set(client=client, token=token, actor=Actor.system("bailing_demo"))


def _tools_lines(outcome: RefreshOutcome | None) -> list[str]:
    if outcome is None:
        return [f"  Demo Shop tools: provider {DEMO_PROVIDER} is not configured."]
    if outcome.ok:
        probe = outcome.probe.get("status", "")
        authz = outcome.authz_probe.get("status", "")
        return [
            f"  Demo Shop tools: {outcome.tools} compiled ({outcome.warnings} warnings), "
            f"spec access probe: {probe}, authorization probe: {authz}."
        ]
    return [
        f"  Demo Shop tools: refresh failed: {outcome.error} ({outcome.message}).",
        "    Start the Demo Shop (make demo does) and run:",
        f"    .venv/bin/python manage.py bailing_provider_refresh {DEMO_PROVIDER}",
    ]


class Command(BaseCommand):
    help = "Seed (or refresh) the demo workspace, demo agent client and demo administrator."

    def add_arguments(self, parser):
        parser.add_argument(
            "--public-url",
            default=settings.BAILING_PUBLIC_URL,
            help="the hub's URL as browsers reach it, for the printed links (default: BAILING_PUBLIC_URL)",
        )
        parser.add_argument(
            "--shop-url",
            default="",
            help="Base URL of the Demo Shop (default: examples/demo.yaml's, http://127.0.0.1:8100).",
        )

    def handle(self, *args, **options):
        public_url = options["public_url"].rstrip("/")
        roles_sync()
        # examples/demo.yaml reads the provider secret from this file; create it before applying.
        _ensure_private_file(DEMO_TOOL_SECRET, lambda: secrets.token_urlsafe(32))
        document = yaml.safe_load(DEMO_CONFIG.read_text(encoding="utf-8"))
        shop_approvals = DEMO_SHOP_APPROVALS
        if options["shop_url"]:
            shop_approvals = _point_at_shop(document, options["shop_url"])
        try:
            plan = config_apply(document=document, dry_run=False, actor=Actor.system("bailing_demo"))
        except ConfigError as exc:  # the shipped demo file is tested; this guards local edits
            raise SystemExit(f"examples/demo.yaml: error at {exc.path}: {exc.reason}") from exc
        password, fresh = _demo_password()
        _demo_user(DEMO_ADMIN, ADMINISTRATOR, password, fresh)
        approver_password, approver_fresh = _demo_password("manager")
        _demo_user(DEMO_APPROVER, APPROVER, approver_password, approver_fresh)
        _demo_client_token()
        provider = ToolProvider.objects.filter(name=DEMO_PROVIDER).first()
        outcome = None
        if provider is not None:
            # After the seed's transactions: a refresh uses the network and must not run inside one.
            outcome = provider_refresh(provider=provider, actor=Actor.system("bailing_demo"))
        knowledge_lines = _demo_knowledge()
        changed = sum(1 for item in plan.items if item.action != "unchanged")
        line = "=" * 72
        self.stdout.write(
            "\n".join(
                [
                    line,
                    "Bailing Hub demo is ready.",
                    "",
                    f"  Console        {public_url}/console/",
                    f"  Sign in as     {DEMO_ADMIN} / {password}  (administrator)",
                    f"  Approver       {DEMO_APPROVER} / {approver_password}  (decides tool-call approvals)",
                    f"  Demo Shop      approvals page at {shop_approvals}",
                    "",
                    "  Connect an agent (PKCE loopback sign-in, approved on the hub's consent page):",
                    f"    hub URL      {public_url}",
                    "    client       demo-agent",
                    "    workspace    demo",
                    "  or try the reference agent client:",
                    f"    .venv/bin/python -m agent_client login --hub {public_url} "
                    "--client demo-agent --workspace demo",
                    "",
                    "  Connect an MCP client (Claude Code, Cursor, the MCP SDK): give it only the URL",
                    f"    MCP URL      {public_url}/mcp/demo  (standard OAuth sign-in on the consent page)",
                    "    smoke check  .venv/bin/python -m agent_client mcp-check "
                    f"--url {public_url}/mcp/demo",
                    "",
                    f"  Config applied from examples/demo.yaml ({changed} item(s) changed).",
                    *_tools_lines(outcome),
                    *knowledge_lines,
                    line,
                ]
            )
        )
