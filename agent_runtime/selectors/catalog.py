"""The authorized tool catalog of a workspace for one agent session, and the reads built on it.

One function decides what an agent may see (:func:`route_catalog`); bootstrap counts, the workspace
list, capability search, tool detail and the older ``/tools`` catalog all read its result, so they
can never disagree about the authorized set or its revision. Nothing here writes to the database.

The catalog is a pure function of the route's effective configuration, whether the session has a
trusted subject, and the rows of the route's providers and their tools. Built catalogs are kept in a
per-process cache (:data:`catalog_cache`, :mod:`bailing.versioned`) under exactly those
inputs: a digest of the full effective configuration, the subject flag and the ``(name, id,
version)`` of every provider it read, whose version a database trigger bumps on every write of the
provider or any of its tools. The versions come with the identity (the bearer statement reads
them with the route), so a request with an unchanged route and providers reuses the same catalog
without a query, and any change, even by raw SQL, reaches the very next request.

Exposure rules (docs/protocol.md "Catalog exposure"; spec "Write and approval semantics"; BailingHub's
``resolveSurface``):

* Business tools need ``tools.agent_direct.enabled``; without it the catalog is empty (bootstrap
  reports 0 tools, a knowledge-only workspace still works) and the tool surfaces answer 403
  ``agent_direct_disabled``.
* Only providers named in ``tools.sources`` that exist and are enabled contribute. A tool belongs
  to a source when its ``scope`` matches one ``allow`` entry: the exact scope, ``*``, or ``x.*``
  meaning ``x.`` followed by anything (as BailingHub's ``scopeAllowed``).
* A tool name that two sources would both expose (after the allow lists, before anything else) is
  withheld from the catalog entirely. BailingHub refuses such a route's whole tool surface;
  withholding only the ambiguous name fails closed for exactly the tool whose owner is unknown, never
  depends on source order, and matches the compiler's rule for an ``operationId`` used twice in one
  spec (docs/compatibility.md "Ambiguous tool names").
* Read-only tools need nothing more. A write (``readonly: false``) is exposed only when its name is
  in ``agent_direct.write_tools`` and the route permission is ``readwrite`` or ``full``.
* ``force_approval_tools`` sets ``approval_required: true`` on those tools' projections; it can only
  add approval. (BailingHub skips read-only tools here; the hub honours the list for any exposed
  tool, since listing a tool can only make it stricter: docs/compatibility.md "Forced approval of
  read-only tools".) The deprecated ``unattended_write_tools`` has already been converted by
  :func:`agent_runtime.config.route_effective`.
* A tool whose ACC declaration requires a subject is hidden from a session without a trusted
  ``on_behalf_of`` (BailingHub hides it too, and blocks it at invocation).

Tools are ordered by name the way BailingHub's ``localeCompare`` orders ASCII identifiers
(:func:`tool_name_sort_key`, docs/protocol.md "Tool order"). ``agent_client.active_tool_limit`` is
carried along for turns, which bound their active set with it; it never shrinks the authorized
catalog.

The capability revision (:func:`_revision`) is the canonical SHA-256 of the revision schema id, the
route key, effective permission and audience, the effective ``agent_direct`` policy (enabled, write
and forced-approval lists), every source (provider name, allow list and, when business tools are on,
whether the provider exists, whether it is enabled, SHA-256 of its base URL and its spec SHA-256) and
every exposed tool (name, provider, material digest = projection + bounded guidance + execution
fingerprint, and whether the route forces approval). So a change of projection, guidance, exposure
or governance changes it; route name, prompts, memory, knowledge, provider secrets, timeouts or rate
limits do not.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from agent_runtime import errors
from agent_runtime.config import route_effective
from agent_runtime.identity import AgentIdentity, route_dependencies
from agent_runtime.models import ProviderTool, Route, ToolProvider
from agent_runtime.selectors.routes import route_for_identity
from agent_runtime.selectors.runs import run_get_for_session, run_id_parse
from agent_runtime.tools.projection import PROJECTION_KEYS
from bailing import tracing
from bailing.api.hashing import canonical_sha256, sha256_hex
from bailing.versioned import VersionedCache, config_digest

CATALOG_SCHEMA = "bailing.agent-tool-catalog.v1"
SEARCH_SCHEMA = "bailing.agent-capability-search.v1"
DETAIL_SCHEMA = "bailing.agent-tool-detail.v1"
REVISION_SCHEMA = "bailing.agent-capability-revision.v1"

# Capability search bounds (docs/protocol.md "Capability search"; spec: at most 12 complete typed tools).
SEARCH_LIMIT_MAX = 12
SEARCH_QUERY_MAX_CHARS = 2000
SEARCH_BODY_MAX_BYTES = 8 * 1024

GUIDANCE_KEYS = ("text", "truncated", "source_chars", "max_chars", "source_bytes", "max_bytes")


# --- value objects ------------------------------------------------------------------------------------
def _json_copy(value: Any) -> Any:
    """Deep copy of decoded JSON (dicts, lists, scalars): several times cheaper than ``copy.deepcopy``,
    which matters when a search copies twelve input schemas per request."""
    if isinstance(value, dict):
        return {key: _json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_copy(item) for item in value]
    return value


@dataclass(frozen=True)
class CatalogTool:
    """One authorized tool as this route exposes it.

    ``projection`` already carries the route's tightening (forced approval); ``tool_id`` and
    ``material_digest`` let the detail read fetch exactly the stored row this catalog was built from.
    """

    name: str
    provider: str
    tool_id: int
    projection: dict[str, Any]
    readonly: bool
    forced_approval: bool
    material_digest: str

    @property
    def approval_required(self) -> bool:
        return bool(self.projection["approval_required"])

    def public(self) -> dict[str, Any]:
        """The agent-visible ``tool`` object (a fresh copy, safe to mutate)."""
        return _json_copy(self.projection)

    @cached_property
    def lexical_fields(self) -> tuple[str, str, str, str, frozenset[str]]:
        """Lower-cased name, scope, description, their haystack and every two-character substring of
        it: computed once per (cached) catalog instead of once per search."""
        name = self.name.lower()
        scope = self.projection["scope"].lower()
        description = self.projection["description"].lower()
        haystack = f"{name} {scope} {description}"
        return (
            name,
            scope,
            description,
            haystack,
            frozenset(haystack[i : i + 2] for i in range(len(haystack) - 1)),
        )


@dataclass(frozen=True)
class CatalogSource:
    """One ``tools.sources`` entry as the catalog resolved it (kept for ranking per source)."""

    provider: str
    allow: tuple[str, ...]
    retrieval: dict[str, Any]
    present: bool
    enabled: bool


@dataclass(frozen=True)
class Catalog:
    """The authorized business tools of one route for one agent session, with their revision.

    Immutable and self-contained: every read of one request (counts, search, detail) uses the same
    instance, so its counts always describe exactly the tools and revision it returns.
    """

    route_key: str
    revision: str
    agent_direct: bool
    active_limit: int
    sources: tuple[CatalogSource, ...]
    tools: tuple[CatalogTool, ...]
    # Usage guidance the detail read fetched, by (tool id, material digest): valid as long as this
    # catalog is, since both are built from the same provider versions.
    guidance: dict[tuple[int, str], dict[str, Any]] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    @property
    def authorized_total(self) -> int:
        return len(self.tools)

    def tool(self, name: str) -> CatalogTool | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def capabilities(self) -> dict[str, Any]:
        """The bootstrap ``capabilities`` block (spec "Bootstrap")."""
        return {
            "revision": self.revision,
            "authorized_total": self.authorized_total,
            "active_limit": self.active_limit,
            "readonly": sum(1 for tool in self.tools if tool.readonly),
            "writes": sum(1 for tool in self.tools if not tool.readonly),
            "approval_required": sum(1 for tool in self.tools if tool.approval_required),
        }


@dataclass
class _ProviderRows:
    """A provider row and its stored tools as the single catalog query returned them."""

    name: str
    enabled: bool
    base_url: str
    spec_sha256: str
    tools: list[dict[str, Any]]
    id: int = 0
    version: int = 0


ProviderMap = dict[str, _ProviderRows]


# --- rules --------------------------------------------------------------------------------------------
def scope_allowed(scope: str, allow: Iterable[str]) -> bool:
    """Does one ``allow`` entry admit ``scope``: exact, ``*``, or ``x.*`` = ``x.`` + anything."""
    for entry in allow:
        if entry == "*" or entry == scope:
            return True
        if entry.endswith(".*") and scope.startswith(entry[:-1]):
            return True
    return False


# Collation weights for tool-name characters as one translate table each (fast enough to sort every
# request): primary = ``_`` < digits < letters with case folded; tertiary = lower case before upper.
_PRIMARY = str.maketrans(
    {"_": "\x01", **{d: chr(2 + int(d)) for d in "0123456789"}}
    | {c: chr(20 + i) for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}
    | {c: chr(20 + i) for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ")}
)
_TERTIARY = str.maketrans(
    {c: "0" for c in "_0123456789abcdefghijklmnopqrstuvwxyz"} | {c: "1" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
)


@lru_cache(maxsize=4096)
def tool_name_sort_key(name: str) -> tuple[str, str]:
    """Sort key that orders tool names as BailingHub's ``String.localeCompare`` does.

    Tool names are ``[A-Za-z_][A-Za-z0-9_]*``; for those, Unicode root collation compares letters
    case-insensitively first (``_`` < digits < letters) and only then prefers lower case. Plain code
    point order would put every upper-case name first and diverge from BailingHub's catalogs.
    """
    return name.translate(_PRIMARY), name.translate(_TERTIARY)


def load_providers(names: Iterable[str]) -> ProviderMap:
    """Providers ``names`` and their stored tools, in one query (a LEFT JOIN of provider → tools).

    Only what catalogs need is read: not the compiled tool, not the guidance (the detail read fetches
    one tool's guidance on its own), not the spec.
    """
    names = sorted(set(names))
    if not names:
        return {}
    rows = ToolProvider.objects.filter(name__in=names).values_list(
        "id",
        "version",
        "name",
        "enabled",
        "base_url",
        "spec_sha256",
        "tools__id",
        "tools__name",
        "tools__scope",
        "tools__readonly",
        "tools__requires_subject",
        "tools__projection",
        "tools__material_digest",
    )
    providers: ProviderMap = {}
    for (
        pk,
        version,
        name,
        enabled,
        base_url,
        spec_sha,
        tool_id,
        tool_name,
        scope,
        readonly,
        subject,
        proj,
        digest,
    ) in rows:
        provider = providers.get(name)
        if provider is None:
            provider = providers[name] = _ProviderRows(name, enabled, base_url, spec_sha, [], pk, version)
        if tool_id is not None:
            provider.tools.append(
                {
                    "id": tool_id,
                    "name": tool_name,
                    "scope": scope,
                    "readonly": readonly,
                    "requires_subject": subject,
                    "projection": proj,
                    "material_digest": digest,
                }
            )
    return providers


def _direct_policy(effective: dict[str, Any]) -> dict[str, Any]:
    """The effective ``agent_direct`` policy as it governs exposure (and enters the revision).

    The deprecated ``unattended_write_tools`` list is left out: ``route_effective`` already turned it
    into ``force_approval_tools``, so migrating a route to the new field changes nothing an agent sees
    and must not invalidate its caches.
    """
    direct = effective["tools"]["agent_direct"]
    return {
        "enabled": bool(direct["enabled"]),
        "write_tools": list(direct["write_tools"]),
        "force_approval_tools": list(direct["force_approval_tools"]),
    }


def _revision(
    *,
    effective: dict[str, Any],
    direct: dict[str, Any],
    sources: Sequence[CatalogSource],
    providers: ProviderMap,
    tools: Sequence[CatalogTool],
) -> str:
    source_material = []
    for source in sources:
        item: dict[str, Any] = {"provider": source.provider, "allow": list(source.allow)}
        if direct["enabled"]:
            provider = providers.get(source.provider)
            item["present"] = provider is not None
            if provider is not None:
                item["enabled"] = provider.enabled
                item["base_url_sha256"] = sha256_hex(provider.base_url)
                item["spec_sha256"] = provider.spec_sha256
        source_material.append(item)
    return canonical_sha256(
        {
            "schema": REVISION_SCHEMA,
            "route": effective["route_key"],
            "permission": effective["permission"],
            "audience": effective["audience"],
            "agent_direct": direct,
            "sources": source_material,
            "tools": [
                {
                    "name": tool.name,
                    "provider": tool.provider,
                    "material_digest": tool.material_digest,
                    "forced_approval": tool.forced_approval,
                }
                for tool in tools
            ],
        }
    )


# Built catalogs by (effective config digest, trusted subject, provider versions); see the module
# docstring. ``catalog_cache.builds`` counts the builds.
catalog_cache: VersionedCache[Catalog] = VersionedCache("catalog", max_entries=128)


def _provider_key(names: set[str], providers: ProviderMap) -> tuple[tuple[str, int, int], ...]:
    return tuple(
        sorted((name, providers[name].id, providers[name].version) for name in names if name in providers)
    )


@tracing.traced("catalog")
def route_catalog(
    *,
    route: Route,
    identity: AgentIdentity | None,
    effective: dict[str, Any] | None = None,
    providers: ProviderMap | None = None,
) -> Catalog:
    """The authorized catalog of ``route`` for ``identity`` (rules in the module docstring).

    Does not run the route gate: callers resolve the route first. ``identity=None`` (the console's
    route-level view) is treated as a session with a trusted subject. ``effective`` and ``providers``
    may be passed in when the caller already has them (the workspace list loads every route's
    providers in one query).

    The result may be a cached instance shared with other requests: treat it as read-only (every
    public view of it, such as :meth:`CatalogTool.public`, is a fresh copy).
    """
    effective = effective if effective is not None else route_effective(route)
    direct = _direct_policy(effective)
    configured = effective["tools"]["sources"]
    has_subject = identity is None or bool(identity.session.on_behalf_of)
    base_key = (config_digest(effective), has_subject)
    if not direct["enabled"]:
        key = (*base_key, None)
        return catalog_cache.get_or_build(
            key,
            lambda: _catalog_build(effective=effective, direct=direct, has_subject=has_subject, providers={}),
        )
    names = {source["provider"] for source in configured}
    if providers is None:
        known = (route_dependencies(route) or {}).get("providers")
        if known is not None:
            cached = catalog_cache.get((*base_key, tuple(sorted(d for d in known if d[0] in names))))
            if cached is not None:
                return cached
        providers = load_providers(names)
    key = (*base_key, _provider_key(names, providers))
    return catalog_cache.get_or_build(
        key,
        lambda: _catalog_build(
            effective=effective, direct=direct, has_subject=has_subject, providers=providers
        ),
    )


def _catalog_build(
    *, effective: dict[str, Any], direct: dict[str, Any], has_subject: bool, providers: ProviderMap
) -> Catalog:
    configured = effective["tools"]["sources"]

    sources = []
    scoped: list[tuple[int, str, dict[str, Any]]] = []
    for index, source in enumerate(configured):
        provider = providers.get(source["provider"]) if direct["enabled"] else None
        sources.append(
            CatalogSource(
                provider=source["provider"],
                allow=tuple(source["allow"]),
                retrieval=dict(source["retrieval"]),
                present=provider is not None,
                enabled=bool(provider and provider.enabled),
            )
        )
        if provider is None or not provider.enabled:
            continue
        scoped.extend(
            (index, provider.name, row)
            for row in provider.tools
            if scope_allowed(row["scope"], source["allow"])
        )

    # Owners are counted per source entry, so even a provider listed twice cannot expose a tool twice.
    owners: dict[str, set[int]] = defaultdict(set)
    for index, _provider_name, row in scoped:
        owners[row["name"]].add(index)

    write_tools = set(direct["write_tools"])
    force = set(direct["force_approval_tools"])
    writes_allowed = effective["permission"] in ("readwrite", "full")
    tools = []
    for _index, provider_name, row in scoped:
        name = row["name"]
        if len(owners[name]) > 1:
            continue
        if row["requires_subject"] and not has_subject:
            continue
        if not row["readonly"] and not (writes_allowed and name in write_tools):
            continue
        stored = row["projection"]
        projection = {key: stored[key] for key in PROJECTION_KEYS}
        forced = name in force
        if forced:
            projection["approval_required"] = True
        tools.append(
            CatalogTool(
                name=name,
                provider=provider_name,
                tool_id=row["id"],
                projection=projection,
                readonly=bool(row["readonly"]),
                forced_approval=forced,
                material_digest=row["material_digest"],
            )
        )
    tools.sort(key=lambda tool: tool_name_sort_key(tool.name))
    return Catalog(
        route_key=effective["route_key"],
        revision=_revision(
            effective=effective, direct=direct, sources=sources, providers=providers, tools=tools
        ),
        agent_direct=direct["enabled"],
        active_limit=effective["agent_client"]["active_tool_limit"],
        sources=tuple(sources),
        tools=tuple(tools),
    )


def route_level_catalogs(routes: Sequence[Route]) -> list[tuple[Route, dict[str, Any], Catalog]]:
    """Every route in ``routes`` (in order) with its effective configuration and its route-level
    catalog (``identity=None``, as the console shows it): one query for every provider the routes
    with direct tool access name, however many routes there are (a route without it lists no tool)."""
    effectives = [route_effective(route) for route in routes]
    names = {
        source["provider"]
        for effective in effectives
        if effective["tools"]["agent_direct"]["enabled"]
        for source in effective["tools"]["sources"]
    }
    providers = load_providers(names)
    return [
        (
            route,
            effective,
            route_catalog(route=route, identity=None, effective=effective, providers=providers),
        )
        for route, effective in zip(routes, effectives, strict=True)
    ]


def route_catalogs(routes: Sequence[Route]) -> dict[str, Catalog]:
    """:func:`route_level_catalogs` keyed by route key."""
    return {route.route_key: catalog for route, _, catalog in route_level_catalogs(routes)}


# --- ranking ------------------------------------------------------------------------------------------
_NON_WORD = re.compile(r"[^\w]+")


def _lexical_scores(tools: Sequence[CatalogTool], query: str) -> dict[str, int]:
    """BailingHub's deterministic lexical score of every tool for ``query`` (see docs/protocol.md
    "Lexical scoring").

    The query is lower-cased and every run of characters other than letters, digits and ``_``
    becomes one space. Exact name 10000, else name contains the query 2000; haystack (name, scope,
    description) contains the query +1000; per distinct word: name +240, scope +120, description
    +60; per distinct character bigram of the query without spaces found in the haystack +2.
    """
    normalized = _NON_WORD.sub(" ", query.lower()).strip()
    words = list(dict.fromkeys(normalized.split()))
    compact = normalized.replace(" ", "")
    grams = frozenset(compact[i : i + 2] for i in range(len(compact) - 1))
    scores = {}
    for tool in tools:
        name, scope, description, haystack, bigrams = tool.lexical_fields
        value = 0
        if normalized:
            if name == normalized:
                value = 10_000
            elif normalized in name:
                value = 2_000
            if normalized in haystack:
                value += 1_000
        for word in words:
            value += (240 if word in name else 0) + (120 if word in scope else 0)
            value += 60 if word in description else 0
        # A distinct bigram of the query is "in the haystack" exactly when it is one of its bigrams.
        value += 2 * len(grams & bigrams)
        scores[tool.name] = value
    return scores


def lexical_order(tools: Sequence[CatalogTool], query: str) -> list[CatalogTool]:
    """Every tool, best lexical score first, ties by name; zero-score tools are kept (spec)."""
    scores = _lexical_scores(tools, query)
    return sorted(tools, key=lambda tool: (-scores[tool.name], tool_name_sort_key(tool.name)))


# A semantic ranker scores the authorized tools of one source for a query, or answers None when that
# source cannot rank semantically right now. None is plugged in: semantic tool retrieval needs a tool
# embedding index, which the hub does not build yet, so every search is lexical.
SemanticRanker = Callable[[CatalogSource, Sequence[CatalogTool], str, int], dict[str, float] | None]
semantic_ranker: SemanticRanker | None = None


def _semantic_order(catalog: Catalog, query: str, limit: int) -> list[CatalogTool] | None:
    """Semantic order when *every* source ranks semantically, else None (spec: one source without
    semantic retrieval makes the whole search lexical). Ties and unscored tools keep lexical order."""
    if semantic_ranker is None or not catalog.tools:
        return None
    scores: dict[str, float] = {}
    for source in catalog.sources:
        owned = [tool for tool in catalog.tools if tool.provider == source.provider]
        if not owned:
            continue
        if not source.retrieval.get("enabled"):
            return None
        hits = semantic_ranker(source, owned, query, min(limit, source.retrieval["max_tools"]))
        if hits is None:
            return None
        scores.update({name: score for name, score in hits.items() if score >= source.retrieval["min_score"]})
    if not scores:
        return None
    lexical = {tool.name: index for index, tool in enumerate(lexical_order(catalog.tools, query))}
    return sorted(
        catalog.tools,
        key=lambda tool: (tool.name not in scores, -scores.get(tool.name, 0.0), lexical[tool.name]),
    )


def catalog_rank(*, catalog: Catalog, query: str, limit: int) -> list[CatalogTool]:
    """Every authorized tool of ``catalog``, best first for ``query``: semantic when every source can
    rank semantically, else the deterministic lexical order. Capability search and a turn's active
    tools both rank with this, so a search by a turn's input agrees with the turn."""
    return _semantic_order(catalog, query, limit) or lexical_order(catalog.tools, query)


# --- reads behind the tool surfaces ---------------------------------------------------------------------
# _shared_view: the bodies below are rendered to JSON by the view that asked for them and never
# changed, so they carry the (cached, shared) projections themselves instead of copies of them.
# Anything that edits a tool object first takes its own with CatalogTool.public().
def tool_surface_resolve(*, identity: AgentIdentity, route_key: str, runtime: bool) -> tuple[Route, Catalog]:
    """Route gate, then the direct-tool switch, then the catalog: the entry of every tool surface.

    ``runtime=True`` (capability search) also needs ``agent_client.enabled``; the ``/tools`` surface
    (older catalog, tool detail) stays available without it (spec "Agent Client Runtime v1").
    """
    access = route_for_identity(identity=identity, route_key=route_key, runtime=runtime)
    if not access.effective["tools"]["agent_direct"]["enabled"]:
        raise errors.AgentDirectDisabled()
    return access.route, route_catalog(route=access.route, identity=identity, effective=access.effective)


def tool_catalog_get(*, identity: AgentIdentity, route_key: str) -> dict[str, Any]:
    """``bailing.agent-tool-catalog.v1``: the older ``GET /tools?route=`` surface (BailingHub's shape)."""
    route, catalog = tool_surface_resolve(identity=identity, route_key=route_key, runtime=False)
    return {
        "schema_version": CATALOG_SCHEMA,
        "route": route.route_key,
        "capability_revision": catalog.revision,
        "tools": [tool.projection for tool in catalog.tools],  # rendered at once: see _shared_view
    }


def capability_search(
    *,
    identity: AgentIdentity,
    route_key: str,
    query: str,
    limit: int | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """``bailing.agent-capability-search.v1``: up to ``limit`` ranked tools of the authorized set.

    ``limit`` defaults to the route's ``active_tool_limit``, as BailingHub does; an explicit limit
    (1–12) is honoured whatever that setting is. Every authorized tool is a candidate, so
    ``truncated``/``has_more`` mean only that the limit left authorized candidates out; match totals
    stay unknown (spec "discovery").

    With ``run_id`` the run must be the caller's, in this workspace (else 404 ``run_not_found``);
    a blank ``query`` then ranks for the run's user input. The surface gate runs first, so a run id
    can never be probed in a workspace the session may not search, and only once per request.
    """
    route, catalog = tool_surface_resolve(identity=identity, route_key=route_key, runtime=True)
    if run_id is not None:
        run = run_get_for_session(identity=identity, run_id=run_id_parse(run_id), route_key=route.route_key)
        if run is None:
            raise errors.RunNotFound()
        if not query.strip():
            query = run.user_input
    effective_limit = limit if limit is not None else catalog.active_limit
    selected = catalog_rank(catalog=catalog, query=query, limit=effective_limit)[:effective_limit]
    truncated = catalog.authorized_total > len(selected)
    return {
        "schema_version": SEARCH_SCHEMA,
        "route": route.route_key,
        "capability_revision": catalog.revision,
        "query": query,
        "tools": [tool.projection for tool in selected],  # rendered at once: see _shared_view
        "discovery": {
            "mode": "ranked_candidates",
            "scope": "current_authorization",
            "returned_count": len(selected),
            "authorized_total": catalog.authorized_total,
            "matched_total": None,
            "matched_total_exact": False,
            "limit": effective_limit,
            "truncated": truncated,
            "has_more": truncated,
            "truncation_scope": "authorized_catalog",
            "pagination": "unsupported",
        },
    }


def tool_detail_get(
    *, identity: AgentIdentity, route_key: str, name: str, capability_revision: str
) -> dict[str, Any]:
    """``bailing.agent-tool-detail.v1``: one authorized tool's projection and bounded guidance.

    Revalidates everything a new invocation would (identity, route, audience, direct tools, subject,
    exact tool authorization) and compares the revision first, as BailingHub's invocation does: a
    stale revision is 409 ``capability_changed`` even for a tool that has since disappeared. Reads
    only: no invocation, job, approval or business request.
    """
    route, catalog = tool_surface_resolve(identity=identity, route_key=route_key, runtime=False)
    if capability_revision != catalog.revision:
        raise errors.CapabilityChanged()
    tool = catalog.tool(name)
    if tool is None:
        raise errors.ToolNotFound()
    # The material digest pins the exact row the catalog was built from: a spec stored in between
    # replaced it, and this catalog's revision is then already stale. A cached catalog keeps what it
    # read: it is replaced as soon as any of its providers' rows changes.
    guidance_key = (tool.tool_id, tool.material_digest)
    guidance = catalog.guidance.get(guidance_key)
    if guidance is None:
        guidance = (
            ProviderTool.objects.filter(pk=tool.tool_id, material_digest=tool.material_digest)
            .values_list("usage_guidance", flat=True)
            .first()
        )
        if guidance is None:
            raise errors.CapabilityChanged()
        catalog.guidance[guidance_key] = guidance
    return {
        "schema_version": DETAIL_SCHEMA,
        "route": route.route_key,
        "capability_revision": catalog.revision,
        "tool": tool.projection,  # rendered at once: see _shared_view
        "usage_guidance": {key: guidance[key] for key in GUIDANCE_KEYS},
    }
