"""Config as code: create or update clients and routes from a validated config document.

``bailing_apply`` (and later the console's import) call :func:`config_apply`. A document is validated
whole before anything is written; then every item is upserted in one transaction, so a file is
applied completely or not at all. Applying is declarative and idempotent: an item whose stored
configuration already equals the file is left untouched (no write, no audit event), which makes
re-applying the same file a no-op.

Lock order: all existing rows named by the document are locked up front, clients before routes,
each in primary-key order; the audit chain lock is taken last by ``audit_record``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, models, transaction

from agent_runtime.config import validate_document
from agent_runtime.models import Client, Route
from agent_runtime.services.clients import Actor
from approvals.services.audit import audit_record

# Columns a config file controls. Token columns are deliberately absent: a Client Token is issued
# only by ``bailing_client_token`` and never read from or compared with a file.
CLIENT_CONFIG_FIELDS = (
    "name",
    "description",
    "enabled",
    "allowed_routes",
    "allowed_channels",
    "rate_limit_per_min",
    "budget",
    "agent_authorize_url",
    "hub_consent",
)
ROUTE_CONFIG_FIELDS = (
    "name",
    "description",
    "enabled",
    "target",
    "target_config",
    "permission",
    "audience",
    "memory",
    "knowledge",
    "tools",
    "agent_client",
    "run_config",
)


@dataclass
class PlanItem:
    """What applying one config item did (or, in a dry run, would do)."""

    kind: str  # client | route
    key: str
    action: str  # created | updated | unchanged
    fields: list[str] = field(default_factory=list)  # changed column names, never values
    notes: list[str] = field(default_factory=list)


@dataclass
class ApplyPlan:
    """The outcome of :func:`config_apply`, item by item in document order."""

    dry_run: bool
    items: list[PlanItem] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(1 for item in self.items if item.action == action)

    @property
    def changed(self) -> bool:
        return any(item.action != "unchanged" for item in self.items)


def _changed_fields(instance: models.Model | None, data: dict, fields: tuple[str, ...]) -> list[str]:
    if instance is None:
        return list(fields)
    # JSON columns compare as Python values: key order is irrelevant and jsonb round-trips the
    # validated types (int stays int, float stays float), so equal configs compare equal.
    return [name for name in fields if getattr(instance, name) != data[name]]


def _upsert(
    *,
    model: type[models.Model],
    key_field: str,
    fields: tuple[str, ...],
    data: dict,
    audit: Callable[[str, models.Model, list[str]], None],
) -> tuple[models.Model, str, list[str]]:
    key = data[key_field]
    with transaction.atomic():
        instance = model.objects.select_for_update().filter(**{key_field: key}).first()
        if instance is None:
            try:
                # Savepoint: a concurrent apply may insert the same key first; then we fall through
                # and treat the row it created as the one to update.
                with transaction.atomic():
                    instance = model.objects.create(
                        **{key_field: key, **{name: data[name] for name in fields}}
                    )
            except IntegrityError:
                instance = model.objects.select_for_update().get(**{key_field: key})
            else:
                audit("created", instance, list(fields))
                return instance, "created", list(fields)
        changed = _changed_fields(instance, data, fields)
        if not changed:
            return instance, "unchanged", []
        for name in changed:
            setattr(instance, name, data[name])
        instance.save(update_fields=[*changed, "updated_at"])
        audit("updated", instance, changed)
        return instance, "updated", changed


def _audit_client(actor: Actor) -> Callable[[str, models.Model, list[str]], None]:
    def audit(verb: str, client: models.Model, changed: list[str]) -> None:
        audit_record(
            action=f"agent_runtime.client.{verb}",
            actor_type=actor.type,
            actor=actor.name,
            client_app_id=client.app_id,
            target_type="client",
            target_id=client.app_id,
            data={"fields": changed},
        )

    return audit


def _audit_route(actor: Actor) -> Callable[[str, models.Model, list[str]], None]:
    def audit(verb: str, route: models.Model, changed: list[str]) -> None:
        audit_record(
            action=f"agent_runtime.route.{verb}",
            actor_type=actor.type,
            actor=actor.name,
            route_key=route.route_key,
            target_type="route",
            target_id=route.route_key,
            data={"fields": changed},
        )

    return audit


def _client_upsert(*, data: dict, actor: Actor) -> tuple[Client, str, list[str]]:
    return _upsert(
        model=Client, key_field="app_id", fields=CLIENT_CONFIG_FIELDS, data=data, audit=_audit_client(actor)
    )


def _route_upsert(*, data: dict, actor: Actor) -> tuple[Route, str, list[str]]:
    return _upsert(
        model=Route, key_field="route_key", fields=ROUTE_CONFIG_FIELDS, data=data, audit=_audit_route(actor)
    )


def client_upsert(*, data: dict, actor: Actor) -> tuple[Client, str]:
    """Create or update the client ``data["app_id"]`` from validated config (``validate_client_config``).

    Returns the client and ``"created" | "updated" | "unchanged"``; the audit event
    (``agent_runtime.client.created|updated``) lists changed field names only. Token columns are
    never touched: a newly created client has no Client Token until ``bailing_client_token``.
    """
    client, action, _ = _client_upsert(data=data, actor=actor)
    return client, action


def route_upsert(*, data: dict, actor: Actor) -> tuple[Route, str]:
    """Create or update the route ``data["route_key"]`` from validated config (``validate_route_config``).

    Returns the route and ``"created" | "updated" | "unchanged"``. Audit data holds changed field
    names only: ``target_config`` may carry adapter settings that must not be copied into the ledger.
    """
    route, action, _ = _route_upsert(data=data, actor=actor)
    return route, action


@dataclass(frozen=True)
class _Section:
    kind: str
    model: type[models.Model]
    key_field: str
    fields: tuple[str, ...]
    upsert: Callable[..., tuple[models.Model, str, list[str]]]


# Apply order matches ``agent_runtime.config.CONFIG_SECTIONS``; tool_providers and knowledge_bases
# join here (before routes, which reference them) when their issues land.
_SECTIONS: dict[str, _Section] = {
    "clients": _Section("client", Client, "app_id", CLIENT_CONFIG_FIELDS, _client_upsert),
    "routes": _Section("route", Route, "route_key", ROUTE_CONFIG_FIELDS, _route_upsert),
}


def _notes(kind: str, data: dict, instance: models.Model | None, route_keys: set[str]) -> list[str]:
    notes: list[str] = []
    if kind != "client":
        return notes
    if instance is None or not instance.token_hash:
        notes.append(f"no Client Token yet: run manage.py bailing_client_token {data['app_id']}")
    missing = [key for key in data["allowed_routes"] if key != "*" and key not in route_keys]
    if missing:
        notes.append("allowed_routes names routes that do not exist: " + ", ".join(missing))
    return notes


def config_apply(*, document: Any, dry_run: bool, actor: Actor) -> ApplyPlan:
    """Validate ``document`` (``{"clients": [...], "routes": [...]}``) and apply it in one transaction.

    Raises ``agent_runtime.config.ConfigError`` before writing anything if any item is invalid. With
    ``dry_run`` the same plan is computed from the current rows and nothing is written or locked.
    """
    sections = validate_document(document)
    plan = ApplyPlan(dry_run=dry_run)
    with transaction.atomic():
        existing: dict[str, dict[str, models.Model]] = {}
        for name, section in _SECTIONS.items():
            keys = [item[section.key_field] for item in sections[name]]
            rows = section.model.objects.filter(**{f"{section.key_field}__in": keys}).order_by("pk")
            if not dry_run:
                rows = rows.select_for_update()
            existing[name] = {getattr(row, section.key_field): row for row in rows}

        route_keys = set(Route.objects.values_list("route_key", flat=True))
        route_keys.update(item["route_key"] for item in sections["routes"])

        for name, section in _SECTIONS.items():
            for data in sections[name]:
                key = data[section.key_field]
                if dry_run:
                    instance = existing[name].get(key)
                    changed = _changed_fields(instance, data, section.fields)
                    action = "created" if instance is None else ("updated" if changed else "unchanged")
                else:
                    instance, action, changed = section.upsert(data=data, actor=actor)
                plan.items.append(
                    PlanItem(
                        kind=section.kind,
                        key=key,
                        action=action,
                        fields=changed if action == "updated" else [],
                        notes=_notes(section.kind, data, instance, route_keys),
                    )
                )
    return plan
