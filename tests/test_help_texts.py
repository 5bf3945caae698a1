"""Every command of the project describes itself: each management command of the project's own apps
has ``help``, and every positional argument, option and subcommand of it — and of every argparse
command line the project ships (``python -m …``) — has non-empty help text. Django's standard options
are Django's to describe. Each command line is also asked for ``--help`` once, as a user would."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

ROOT = Path(__file__).resolve().parents[1]
PROJECT_APPS = {"bailing", "agent_runtime", "knowledge", "mcp_server", "approvals", "benchmarks", "chaos"}
# BaseCommand's own options (and argparse's -h).
DJANGO_STANDARD = {
    "help",
    "version",
    "verbosity",
    "settings",
    "pythonpath",
    "traceback",
    "no_color",
    "force_color",
    "skip_checks",
}
# Hidden on purpose: how bailing_chaos and bailing_soak hand their child process a server, never typed
# by hand.
HIDDEN = {("bailing_chaos", "--dedicated-server"), ("bailing_soak", "--dedicated-server")}


def _cli_parsers() -> dict[str, argparse.ArgumentParser]:
    import agent_client
    import bailing.audit.export_verify
    import bailing.db.embedded
    import chaos.slow_clients
    import demo_business.__main__
    import front.__main__
    import knowledge.embeddings

    return {
        "agent_client": agent_client.build_parser(),
        "bailing.audit.export_verify": bailing.audit.export_verify.build_parser(),
        "chaos.slow_clients": chaos.slow_clients.build_parser(),
        "bailing.db.embedded": bailing.db.embedded.build_parser(),
        "front": front.__main__.build_parser(),
        "demo_business": demo_business.__main__.build_parser(),
        "knowledge.embeddings": knowledge.embeddings.build_parser(),
    }


def _project_commands() -> list[tuple[str, str]]:
    return sorted((name, app) for name, app in get_commands().items() if app in PROJECT_APPS)


def _undescribed(parser: argparse.ArgumentParser, where: str, command: str) -> list[str]:
    """Every action of ``parser`` (and its subcommands) without help, as ``where option`` strings."""
    missing = []
    for action in parser._actions:
        if action.dest in DJANGO_STANDARD:
            continue
        name = action.option_strings[-1] if action.option_strings else action.dest
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest for choice in action._choices_actions}
            for sub, subparser in action.choices.items():
                if sub not in listed:
                    missing.append(f"{where} {sub} (subcommand without help)")
                missing += _undescribed(subparser, f"{where} {sub}", command)
            continue
        if action.help == argparse.SUPPRESS and (command, name) in HIDDEN:
            continue
        if not isinstance(action.help, str) or not action.help.strip() or action.help == argparse.SUPPRESS:
            missing.append(f"{where} {name}")
    return missing


def test_the_project_has_the_commands_this_test_walks():
    names = {name for name, _ in _project_commands()}
    assert {"bailing_user", "bailing_apply", "knowledge_eval", "knowledge_ingest"} <= names
    assert len(names) >= 15


@pytest.mark.parametrize(("name", "app"), _project_commands(), ids=[n for n, _ in _project_commands()])
def test_every_management_command_describes_itself_and_every_argument(name, app):
    command = load_command_class(app, name)
    assert isinstance(command.help, str) and command.help.strip(), f"{name} has no help ="
    parser = command.create_parser("manage.py", name)
    assert _undescribed(parser, name, name) == []


@pytest.mark.parametrize("module", sorted(_cli_parsers()))
def test_every_command_line_describes_every_argument(module):
    parser = _cli_parsers()[module]
    assert parser.description and parser.description.strip(), f"python -m {module} has no description"
    assert _undescribed(parser, module, module) == []


def test_every_argparse_command_line_is_in_the_walk():
    """A new ``argparse.ArgumentParser(`` outside the management commands must join the list above."""
    known = {
        "agent_client/__init__.py",
        "bailing/audit/export_verify.py",
        "chaos/slow_clients.py",
        "bailing/db/embedded.py",
        "front/__main__.py",
        "demo_business/__main__.py",
        "knowledge/embeddings.py",
    }
    found = set()
    for package in (
        "bailing",
        "agent_runtime",
        "knowledge",
        "mcp_server",
        "approvals",
        "front",
        "benchmarks",
        "chaos",
        "demo_business",
        "agent_client",
    ):
        for path in (ROOT / package).rglob("*.py"):
            if "management" in path.parts or "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "ArgumentParser"
                ):
                    found.add(path.relative_to(ROOT).as_posix())
    assert found == known


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "agent_client", "--help"],
        ["-m", "agent_client", "invoke", "--help"],
        ["-m", "front", "--help"],
        ["-m", "bailing.db.embedded", "--help"],
        ["-m", "demo_business", "--help"],
        ["-m", "knowledge.embeddings", "--help"],
        ["bailing/audit/export_verify.py", "--help"],
        ["manage.py", "approvals_audit_export", "--help"],
        ["manage.py", "bailing_user", "reactivate", "--help"],
        ["manage.py", "knowledge_eval", "--help"],
    ],
    ids=lambda argv: " ".join(argv[1:]),
)
def test_help_prints_and_exits_zero(argv):
    result = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:") and "Traceback" not in result.stderr
