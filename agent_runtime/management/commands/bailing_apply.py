"""Apply a clients/routes config file (YAML or JSON): ``manage.py bailing_apply FILE [--dry-run]``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError

from agent_runtime.config import ConfigError
from agent_runtime.services.config_apply import ApplyPlan, config_apply
from bailing.audit.actor import Actor

# Config files are operator-written but may be large exports; anything beyond this is a mistake.
MAX_FILE_BYTES = 16 * 1024 * 1024


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate mapping keys instead of keeping the last one."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    mapping: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in mapping
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "found an unhashable key", key_node.start_mark
            ) from None
        if duplicate:
            raise yaml.constructor.ConstructorError(None, None, "found a duplicate key", key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    result: dict = {}
    for key, value in pairs:
        if key in result:
            raise ValueError("duplicate key in JSON object")
        result[key] = value
    return result


def _reject_constant(name: str) -> None:
    raise ValueError("NaN and Infinity are not JSON")


def load_config_file(path: Path) -> Any:
    """Parse ``path`` as YAML (``.yaml``/``.yml``) or JSON (``.json``); raise CommandError if unreadable.

    Error messages give the position and the parser's problem, never the file's content.
    """
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise CommandError(f"{path}: the file must end in .yaml, .yml or .json")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise CommandError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise CommandError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise CommandError(f"{path}: not valid UTF-8") from None
    except OSError as exc:
        raise CommandError(f"{path}: cannot read ({exc.strerror})") from None
    if suffix == ".json":
        try:
            return json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            raise CommandError(
                f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
        except ValueError as exc:
            raise CommandError(f"{path}: invalid JSON: {exc}") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise CommandError(f"{path}: invalid YAML{where}: {problem}") from None


def format_plan(plan: ApplyPlan) -> list[str]:
    lines = []
    for item in plan.items:
        line = f"{item.kind} {item.key}: {item.action}"
        if item.fields:
            line += f" (fields: {', '.join(item.fields)})"
        lines.append(line)
        lines.extend(f"  note: {note}" for note in item.notes)
    counts = ", ".join(f"{plan.count(action)} {action}" for action in ("created", "updated", "unchanged"))
    if plan.dry_run:
        lines.append(f"dry run: {counts}; nothing was written")
    else:
        lines.append(f"applied: {counts}")
    return lines


class Command(BaseCommand):
    help = (
        "Create or update clients and routes from a YAML or JSON config file. The whole file is "
        "validated first; any error means nothing is changed. Client Tokens are never read from the "
        "file: issue them with bailing_client_token."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="config file (.yaml, .yml or .json)")
        parser.add_argument("--dry-run", action="store_true", help="show the plan without writing anything")

    def handle(self, *args, **options):
        document = load_config_file(options["file"])
        try:
            plan = config_apply(
                document=document, dry_run=options["dry_run"], actor=Actor.system("bailing_apply")
            )
        except ConfigError as exc:
            self.stderr.write(f"error at {exc.path}: {exc.reason}")
            raise CommandError("the configuration is invalid; nothing was changed") from None
        for line in format_plan(plan):
            self.stdout.write(line)
