"""Config as code: create or update clients, tool providers and routes from a validated config document.

``bailing_apply`` (and later the console's import) call :func:`config_apply`. A document is validated
whole before anything is written; then every item is upserted in one transaction, so a file is
applied completely or not at all. Applying is declarative and idempotent: an item whose stored
configuration already equals the file is left untouched (no write, no audit event), which makes
re-applying the same file a no-op.

Lock order: all existing rows named by the document are locked up front, clients, then tool
providers, then routes, each in primary-key order; the audit chain lock is taken last by
``audit_record``.

Tool providers: the secret is read from ``secret_env``/``secret_file`` and inline specs are compiled
*before* the transaction (so a missing secret or a spec that does not compile is a ``ConfigError``
and nothing is written). The secret is compared with the decrypted stored one, so an unchanged
secret is ``unchanged``; a changed one is sealed by ``provider_set_secret`` and shows up as the field
name ``secret`` (never a value). An inline spec that differs from the provider's current spec is
stored through ``provider_spec_store`` in the same transaction. URL specs are never fetched here
(no network inside the transaction): the plan notes ``bailing_provider_refresh``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, models, transaction

from agent_runtime.config import (
    ConfigError,
    ConfigSection,
    check_clients_config,
    config_section_register,
    config_sections,
    validate_client_config,
    validate_document,
    validate_route_config,
    validate_tool_provider_config,
)
from agent_runtime.config.clients import CLIENT_FIELDS
from agent_runtime.config.routes import ROUTE_FIELDS
from agent_runtime.models import Client, Route, ToolProvider
from agent_runtime.services.providers import (
    provider_secret_matches,
    provider_secret_problem,
    provider_set_secret,
)
from agent_runtime.services.tool_specs import provider_spec_store
from agent_runtime.tools.compiler import CompileResult, compile_spec
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record

# The secret is not a column a file sets: it is read from secret_env/secret_file and compared and
# stored sealed (see the module docstring).
PROVIDER_CONFIG_FIELDS = (
    "description",
    "enabled",
    "base_url",
    "spec_source",
    "spec_url",
    "spec_inline",
    "spec_access_policy",
    "timeout_ms",
    "rate_limit_per_min",
    "max_concurrent_calls",
    "auto_refresh_min",
)
# A secret file holds one line; anything bigger is the wrong file.
_SECRET_FILE_MAX_BYTES = 64 * 1024


@dataclass
class PlanItem:
    """What applying one config item did (or, in a dry run, would do)."""

    kind: str  # client | provider | knowledge_base | route
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


def _audit_rows(
    actor: Actor, *, entity: str, target_type: str, key: str, scope: str | None = None
) -> Callable[[str, models.Model, list[str]], None]:
    """The audit callback for one kind of configured row: ``agent_runtime.<entity>.<verb>`` with the
    changed field names, aimed at the row's ``key`` (repeated under ``scope``, the ledger's client or
    route column, where the row has one)."""

    def audit(verb: str, row: models.Model, changed: list[str]) -> None:
        value = getattr(row, key)
        audit_record(
            action=f"agent_runtime.{entity}.{verb}",
            actor=actor,
            target_type=target_type,
            target_id=value,
            data={"fields": changed},
            **({scope: value} if scope else {}),
        )

    return audit


def mcp_sign_in_holder(*, except_app_id: str) -> str | None:
    """The App ID of the client other than ``except_app_id`` that has ``mcp_sign_in``, if any."""
    return (
        Client.objects.filter(mcp_sign_in=True)
        .exclude(app_id=except_app_id)
        .values_list("app_id", flat=True)
        .first()
    )


def _client_upsert(*, data: dict, actor: Actor, path: str = "") -> tuple[Client, str, list[str]]:
    # At most one client has mcp_sign_in (a partial unique index). Moving it within one document
    # works when the old holder is listed first with mcp_sign_in: false; otherwise say so instead of
    # failing on the index.
    if data["mcp_sign_in"]:
        holder = mcp_sign_in_holder(except_app_id=data["app_id"])
        if holder is not None:
            raise ConfigError(
                f"{path or 'client'}.mcp_sign_in",
                f"client {holder} already has it: set it to false there first (earlier in this document)",
            )
    return _upsert(
        model=Client,
        key_field="app_id",
        fields=CLIENT_FIELDS,
        data=data,
        audit=_audit_rows(actor, entity="client", target_type="client", key="app_id", scope="client_app_id"),
    )


def _route_upsert(*, data: dict, actor: Actor, path: str = "") -> tuple[Route, str, list[str]]:
    return _upsert(
        model=Route,
        key_field="route_key",
        fields=ROUTE_FIELDS,
        data=data,
        audit=_audit_rows(actor, entity="route", target_type="route", key="route_key", scope="route_key"),
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
class _ProviderInputs:
    """What a provider item needs beyond its columns, resolved before the transaction."""

    secret: str | None = field(default=None, repr=False)
    compiled: CompileResult | None = None


def _read_secret(data: dict, path: str) -> str | None:
    if data["secret_env"] is not None:
        where = f"{path}.secret_env"
        value = os.environ.get(data["secret_env"])
        if value is None:
            raise ConfigError(where, "names an environment variable that is not set")
    elif data["secret_file"] is not None:
        where = f"{path}.secret_file"
        file = Path(data["secret_file"])
        if not file.is_absolute():
            file = Path(settings.BASE_DIR) / file
        try:
            if file.stat().st_size > _SECRET_FILE_MAX_BYTES:
                raise ConfigError(where, f"names a file larger than {_SECRET_FILE_MAX_BYTES} bytes")
            value = file.read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise ConfigError(where, "names a file that does not exist") from None
        except UnicodeDecodeError:
            raise ConfigError(where, "names a file that is not UTF-8 text") from None
        except OSError:
            raise ConfigError(where, "names a file that cannot be read") from None
        # Files written by editors and `echo` end with a newline that is not part of the secret.
        value = value.rstrip("\r\n")
    else:
        return None
    problem = provider_secret_problem(value)
    if problem:
        raise ConfigError(where, f"gives a secret that {problem}")
    return value


def _providers_prepare(items: list[dict]) -> list[dict]:
    """Resolve secrets and compile inline specs; raise ``ConfigError`` at the item's path."""
    prepared = []
    for i, data in enumerate(items):
        path = f"tool_providers[{i}]"
        compiled = None
        if data["spec_inline"] is not None:
            compiled = compile_spec(data["spec_inline"], provider=data["name"])
            if compiled.fatal:
                raise ConfigError(f"{path}.spec", "is not a usable OpenAPI 3.0/3.1 document (spec_invalid)")
        inputs = _ProviderInputs(secret=_read_secret(data, path), compiled=compiled)
        prepared.append({**data, "_inputs": inputs})
    return prepared


def _provider_diff(instance: models.Model | None, data: dict) -> list[str]:
    changed = _changed_fields(instance, data, PROVIDER_CONFIG_FIELDS)
    secret = data["_inputs"].secret
    if (
        instance is not None
        and secret is not None
        and not provider_secret_matches(provider=instance, secret=secret)
    ):
        changed.append("secret")
    return changed


def _provider_upsert(*, data: dict, actor: Actor, path: str = "") -> tuple[ToolProvider, str, list[str]]:
    inputs: _ProviderInputs = data["_inputs"]
    with transaction.atomic():
        provider, action, changed = _upsert(
            model=ToolProvider,
            key_field="name",
            fields=PROVIDER_CONFIG_FIELDS,
            data=data,
            audit=_audit_rows(actor, entity="provider", target_type="tool_provider", key="name"),
        )
        if inputs.secret is not None and provider_set_secret(
            provider=provider, secret=inputs.secret, actor=actor
        ):
            changed = [*changed, "secret"]
            if action == "unchanged":
                action = "updated"
        if inputs.compiled is not None and provider.spec_json != data["spec_inline"]:
            provider_spec_store(
                provider=provider,
                spec=data["spec_inline"],
                result=inputs.compiled,
                actor=actor,
            )
    return provider, action, changed


def provider_upsert(*, data: dict, actor: Actor, secret: str | None = None) -> tuple[ToolProvider, str]:
    """Create or update the provider ``data["name"]`` from validated config
    (``validate_tool_provider_config``) and, when given, its ``secret`` (plaintext, sealed here).

    Returns the provider and ``"created" | "updated" | "unchanged"``. An inline spec is compiled and,
    when it differs from the current spec, stored; raises ``ConfigError`` if it does not compile.
    """
    [prepared] = _providers_prepare([{**data, "secret_env": None, "secret_file": None}])
    prepared["_inputs"] = _ProviderInputs(secret=secret, compiled=prepared["_inputs"].compiled)
    provider, action, _ = _provider_upsert(data=prepared, actor=actor)
    return provider, action


@dataclass(frozen=True)
class NoteContext:
    """What notes are computed from: every section's keys known after this document (rows and items),
    the rows as they were before, and whether this is a dry run."""

    known: dict[str, set[str]]
    before: dict[str, dict[str, models.Model]]
    dry_run: bool


def _provider_notes(data: dict, instance: models.Model | None, action: str, ctx: NoteContext) -> list[str]:
    notes: list[str] = []
    name = data["name"]
    inputs: _ProviderInputs = data["_inputs"]
    if inputs.secret is None and (instance is None or not instance.secret_encrypted):
        notes.append(
            "no secret yet: set secret_env or secret_file (tool calls and signed spec fetches need it)"
        )
    before = ctx.before["tool_providers"].get(name)
    if inputs.compiled is not None:
        if before is None or before.spec_json != data["spec_inline"]:
            verb = "will be compiled and stored" if ctx.dry_run else "compiled and stored"
            notes.append(
                f"inline spec {verb}: {len(inputs.compiled.tools)} tools, "
                f"{len(inputs.compiled.warnings)} warnings"
            )
    elif action != "unchanged" or before is None or before.spec_json is None:
        notes.append(f"the spec is not fetched by apply: run manage.py bailing_provider_refresh {name}")
    return notes


def _route_notes(data: dict, instance: models.Model | None, action: str, ctx: NoteContext) -> list[str]:
    notes: list[str] = []
    sources = (data["tools"] or {}).get("sources") or []
    unknown = [
        source["provider"] for source in sources if source["provider"] not in ctx.known["tool_providers"]
    ]
    if unknown:
        notes.append("tools.sources names tool providers that do not exist: " + ", ".join(unknown))
    knowledge = data["knowledge"] or {}
    kb_ids = knowledge.get("kb_ids") or ([knowledge["kb_id"]] if knowledge.get("kb_id") else [])
    # Knowledge bases are another app's section; without it, no knowledge base exists.
    known_kbs = ctx.known.get("knowledge_bases", set())
    missing_kbs = [kb_id for kb_id in kb_ids if kb_id not in known_kbs]
    if missing_kbs:
        notes.append("knowledge names knowledge bases that do not exist: " + ", ".join(missing_kbs))
    return notes


def _client_notes(data: dict, instance: models.Model | None, action: str, ctx: NoteContext) -> list[str]:
    notes: list[str] = []
    if instance is None or not instance.token_hash:
        notes.append(f"no Client Token yet: run manage.py bailing_client_token {data['app_id']}")
    missing = [key for key in data["allowed_routes"] if key != "*" and key not in ctx.known["routes"]]
    if missing:
        notes.append("allowed_routes names routes that do not exist: " + ", ".join(missing))
    return notes


def changed_fields_diff(fields: tuple[str, ...]) -> Callable[[models.Model | None, dict], list[str]]:
    """The dry-run comparison of a section whose config is exactly ``fields`` (column by column)."""
    return lambda instance, data: _changed_fields(instance, data, fields)


def config_sections_register_builtin() -> None:
    """Declare the agent runtime's own sections (called from ``agent_runtime.apps``)."""
    config_section_register(
        ConfigSection(
            name="clients",
            kind="client",
            key_field="app_id",
            order=10,
            validate=validate_client_config,
            model=Client,
            upsert=_client_upsert,
            diff=changed_fields_diff(CLIENT_FIELDS),
            notes=_client_notes,
            check_items=check_clients_config,
        )
    )
    config_section_register(
        ConfigSection(
            name="tool_providers",
            kind="provider",
            key_field="name",
            order=20,
            validate=validate_tool_provider_config,
            model=ToolProvider,
            upsert=_provider_upsert,
            diff=_provider_diff,
            prepare=_providers_prepare,
            notes=_provider_notes,
        )
    )
    config_section_register(
        ConfigSection(
            name="routes",
            kind="route",
            key_field="route_key",
            order=40,
            validate=validate_route_config,
            model=Route,
            upsert=_route_upsert,
            diff=changed_fields_diff(ROUTE_FIELDS),
            notes=_route_notes,
        )
    )


def config_apply(*, document: Any, dry_run: bool, actor: Actor) -> ApplyPlan:
    """Validate ``document`` (``{"clients": [...], "tool_providers": [...], "routes": [...], ...}``) and
    apply it in one transaction.

    Raises ``agent_runtime.config.ConfigError`` before writing anything if any item is invalid. With
    ``dry_run`` the same plan is computed from the current rows and nothing is written or locked.
    """
    sections = config_sections()
    items = validate_document(document)
    # Secrets and inline specs are read and compiled before anything is locked or written.
    for section in sections:
        if section.prepare is not None:
            items[section.name] = section.prepare(items[section.name])
    plan = ApplyPlan(dry_run=dry_run)
    with transaction.atomic():
        existing: dict[str, dict[str, models.Model]] = {}
        for section in sections:
            keys = [item[section.key_field] for item in items[section.name]]
            rows = section.model.objects.filter(**{f"{section.key_field}__in": keys}).order_by("pk")
            if not dry_run:
                rows = rows.select_for_update()
            existing[section.name] = {getattr(row, section.key_field): row for row in rows}

        known = {}
        for section in sections:
            names = set(section.model.objects.values_list(section.key_field, flat=True))
            names.update(item[section.key_field] for item in items[section.name])
            known[section.name] = names
        ctx = NoteContext(known=known, before=existing, dry_run=dry_run)

        for section in sections:
            for i, data in enumerate(items[section.name]):
                key = data[section.key_field]
                path = f"{section.name}[{i}]"
                if dry_run:
                    instance = existing[section.name].get(key)
                    changed = section.diff(instance, data)
                    if section.check_dry_run is not None and instance is not None:
                        section.check_dry_run(changed, path=path)
                    action = "created" if instance is None else ("updated" if changed else "unchanged")
                else:
                    instance, action, changed = section.upsert(data=data, actor=actor, path=path)
                notes = section.notes(data, instance, action, ctx) if section.notes is not None else []
                plan.items.append(
                    PlanItem(
                        kind=section.kind,
                        key=key,
                        action=action,
                        fields=changed if action == "updated" else [],
                        notes=notes,
                    )
                )
    return plan
