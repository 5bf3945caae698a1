"""A whole config document: its sections, in apply order, and validating it before anything is written.

Each section is declared once, as a :class:`ConfigSection`, by the app that owns its rows:
``agent_runtime`` declares clients, tool providers and routes (``agent_runtime.apps``), ``knowledge``
declares knowledge bases (``knowledge.apps``). This module knows no section by name, so the apps
above ``agent_runtime`` plug their sections in without ``agent_runtime`` importing them. Apply
order: clients (writers of knowledge bases), tool providers and knowledge bases (named by routes),
then routes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_runtime.config.fields import ConfigError, field_path, item_path, read_object


@dataclass(frozen=True)
class ConfigSection:
    """One list of a config document (``clients``, ``routes``…) and how it is validated and applied.

    ``validate(item, path=…)`` returns the item's column values. The apply side
    (``agent_runtime.services.config_apply``) calls ``upsert(data=…, actor=…, path=…)`` →
    ``(row, action, changed_fields)`` and, in a dry run, ``diff(row_or_None, data)`` → changed
    fields; ``check_dry_run(changed, path=…)`` may refuse a change a dry run must report (a locked
    field); ``prepare(items)`` runs before the transaction (reading secrets, compiling specs);
    ``notes(data, row, action, ctx)`` explains what an operator still has to do;
    ``check_items(items)`` checks rules across the section's validated items (raises ``ConfigError``).
    """

    name: str
    kind: str
    key_field: str
    order: int
    validate: Callable[..., dict]
    model: type
    upsert: Callable[..., tuple[Any, str, list[str]]]
    diff: Callable[[Any, dict], list[str]]
    prepare: Callable[[list[dict]], list[dict]] | None = None
    check_dry_run: Callable[[list[str], str], None] | None = None
    notes: Callable[..., list[str]] | None = field(default=None)
    check_items: Callable[[list[dict]], None] | None = None


_SECTIONS: dict[str, ConfigSection] = {}


def config_section_register(section: ConfigSection) -> None:
    """Declare a section (from the owning app's ``ready()``); registering the same name again
    replaces it, so a reloaded app never doubles a section."""
    _SECTIONS[section.name] = section


def config_sections() -> list[ConfigSection]:
    """Every registered section, in apply order."""
    return sorted(_SECTIONS.values(), key=lambda section: section.order)


def validate_document(document: Any) -> dict[str, list[dict]]:
    """Validate a whole config document; return ``{section: [validated items]}`` for every section.

    Every item is checked before anything is applied, so one bad item anywhere means nothing is
    written. A key listed twice in a section is an error at the second occurrence.
    """
    sections = config_sections()
    data = read_object(document, "", allowed=tuple(section.name for section in sections))
    result: dict[str, list[dict]] = {}
    for section in sections:
        items = data.get(section.name, [])
        if not isinstance(items, list):
            raise ConfigError(section.name, "must be a list")
        validated: list[dict] = []
        first_seen: dict[str, int] = {}
        for i, item in enumerate(items):
            path = item_path(section.name, i)
            checked = section.validate(item, path=path)
            key = checked[section.key_field]
            if key in first_seen:
                raise ConfigError(
                    field_path(path, section.key_field),
                    f"duplicate {section.key_field} (first used at {section.name}[{first_seen[key]}])",
                )
            first_seen[key] = i
            validated.append(checked)
        if section.check_items is not None:
            section.check_items(validated)
        result[section.name] = validated
    return result
