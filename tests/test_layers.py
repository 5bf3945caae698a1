"""The import map stays true: layers run one way, no module imports itself in a circle, and an app uses
only the public surface of the apps below it.

Every non-test module is read as text (``ast``): module-level imports, imports inside functions,
imports under ``TYPE_CHECKING`` and URLconf ``include("module")`` strings all count, so the layout
cannot be dodged by a late import. The
layers, bottom to top (``docs/architecture.md``):

0. ``bailing`` plumbing — settings, db, api, audit, signing, ui, roles, log, templatetags
1. ``agent_runtime``
2. ``knowledge``
3. ``mcp_server`` (the MCP surface)
4. ``approvals`` (the operators' app)
5. the project shell — ``bailing.shell``, ``bailing.management``, ``bailing.wsgi``

Two programs ride along outside the hub: ``demo_business`` (a business system: it may use only the
stdlib-only contract module ``bailing.signing``) and ``agent_client`` (the reference agent: it
imports nothing of the hub). Only the shell may start the demo business system.

Console modules also read the database only through selectors: the guard at the end of this file
reads them the same way and fails on a query written in a view.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "bailing",
    "agent_runtime",
    "knowledge",
    "mcp_server",
    "approvals",
    "demo_business",
    "agent_client",
)

SHELL = ("bailing.shell", "bailing.management", "bailing.wsgi")
LAYERS = {"bailing": 0, "agent_runtime": 1, "knowledge": 2, "mcp_server": 3, "approvals": 4, "shell": 5}

# What an app above may import of an app below: its shared models, error codes, identity, selectors,
# services, public API base classes, its configuration surface and its extension ports. Anything else
# (compiler internals, token formats, helpers) stays private to its app.
PUBLIC = {
    "agent_runtime": (
        "agent_runtime.models",
        "agent_runtime.errors",
        "agent_runtime.identity",
        "agent_runtime.selectors",
        "agent_runtime.services",
        "agent_runtime.api.base",
        "agent_runtime.api.authentication",
        "agent_runtime.config",
        "agent_runtime.ports",
    ),
    "knowledge": (
        "knowledge.models",
        "knowledge.errors",
        "knowledge.selectors",
        "knowledge.services",
        "knowledge.config",
    ),
    "mcp_server": ("mcp_server.services",),
}
# The shell composes everything: it may reach any module (e.g. an app's console urls and cards).
DEMO_BUSINESS_MAY_IMPORT = ("bailing.signing",)


def layer_of(module: str) -> str | None:
    """``bailing`` / ``agent_runtime`` / … / ``shell``, or the outside program's name."""
    if any(module == shell or module.startswith(shell + ".") for shell in SHELL):
        return "shell"
    top = module.split(".", 1)[0]
    return top if top in PACKAGES else None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            modules[_module_name(path)] = path
    return modules


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Project modules ``name`` imports, anywhere in the file (``from pkg import sub`` resolves to the
    submodule when ``sub`` is one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                targets.append(candidate if candidate in known else base)
        elif _is_include(node):
            # ``include("app.urls")`` in a URLconf imports that module as surely as an import does.
            targets = [node.args[0].value]
        for target in targets:
            # The longest project module that the import names (a.b.c → a.b when c is a symbol).
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _is_include(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    first = node.args[0]
    return name == "include" and isinstance(first, ast.Constant) and isinstance(first.value, str)


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def _is_public(target: str) -> bool:
    surface = PUBLIC.get(target.split(".", 1)[0], ())
    return any(target == entry or target.startswith(entry + ".") for entry in surface)


def test_no_import_runs_up_a_layer_or_reaches_into_an_app_below():
    problems = []
    for source, targets in import_graph().items():
        source_layer = layer_of(source)
        for target in sorted(targets):
            target_layer = layer_of(target)
            if source_layer == target_layer:
                continue
            if source_layer == "demo_business":
                if not target.startswith(DEMO_BUSINESS_MAY_IMPORT):
                    problems.append(f"{source} -> {target} (the demo business system uses the contract only)")
                continue
            if source_layer == "agent_client" or target_layer == "agent_client":
                problems.append(f"{source} -> {target} (the reference agent client stands apart)")
                continue
            if target_layer == "demo_business":
                if source_layer != "shell":
                    problems.append(f"{source} -> {target} (only the shell starts the demo business system)")
                continue
            if LAYERS[target_layer] > LAYERS[source_layer]:
                problems.append(f"{source} -> {target} (upward: {source_layer} below {target_layer})")
            elif source_layer != "shell" and target_layer != "bailing" and not _is_public(target):
                problems.append(f"{source} -> {target} (not part of {target_layer}'s public surface)")
    assert problems == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_no_import_cycle_at_any_depth():
    assert _cycles(import_graph()) == []


def test_the_guard_sees_late_and_type_checking_imports(tmp_path):
    """The reader counts imports inside functions and under ``TYPE_CHECKING`` (the guard would be
    blind to exactly the imports used to hide a cycle otherwise)."""
    module = tmp_path / "probe.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from knowledge.models import Document\n"
        "def f():\n    from approvals import console\n"
    )
    found = imports_of("agent_runtime.probe", module, {"knowledge.models", "approvals", "approvals.console"})
    assert found == {"knowledge.models", "approvals.console"}


def test_the_guard_sees_urlconf_includes(tmp_path):
    module = tmp_path / "urls.py"
    module.write_text(
        "from django import urls\nfrom django.urls import include, path\n"
        'urlpatterns = [path("k/", include("knowledge.api.agent_urls")),\n'
        '               path("a/", urls.include("approvals.api"))]\n'
    )
    known = {"knowledge.api.agent_urls", "approvals.api"}
    assert imports_of("agent_runtime.api.urls", module, known) == known


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_layer_map_covers_every_package():
    counts = defaultdict(int)
    for name in project_modules():
        counts[layer_of(name)] += 1
    assert None not in counts
    assert counts["shell"] > 0 and counts["bailing"] > 0


# --- console pages read through selectors ---------------------------------------------------------------
# A console module parses the request, checks permissions, calls selectors (reads) and services
# (writes) and builds the template context (docs/architecture.md "Services and selectors"). It
# never builds a query itself: a read written in a view is a read whose related loading, visibility
# and query count nobody else can reuse or pin. Every console module is read as text (``ast``).
CONSOLE_MODULE_GLOBS = ("*/console/*.py", "bailing/shell/console/*.py")
# Any reference to a model's manager starts a query outside the selectors.
MANAGER_ATTRIBUTES = frozenset({"objects", "_default_manager", "_base_manager"})
ORM_SHORTCUTS = frozenset({"get_object_or_404", "get_list_or_404"})
# SQL past the ORM (``connection.cursor()``) is database access all the same.
RAW_SQL_METHODS = frozenset({"cursor"})
# Methods only a queryset (or a manager) has: called on anything, they build or run a query. Names a
# dict, a str or a set also has (``get``, ``count``, ``values``, ``union`` …) are in QUERYSET_METHODS
# and count only on a manager (``.objects``, a related manager).
QUERY_BUILDERS = frozenset(
    {
        "filter",
        "exclude",
        "annotate",
        "alias",
        "aggregate",
        "order_by",
        "select_related",
        "prefetch_related",
        "values_list",
        "only",
        "defer",
        "in_bulk",
        "select_for_update",
        "latest",
        "earliest",
        "get_or_create",
        "update_or_create",
        "bulk_create",
    }
)
QUERYSET_METHODS = QUERY_BUILDERS | {
    "all",
    "get",
    "count",
    "exists",
    "first",
    "last",
    "values",
    "iterator",
    "distinct",
    "none",
    "create",
    "update",
    "delete",
}
# Query expressions (Q, Count, Exists, KeyTransform …) are query building too: they belong with the
# selector that runs them.
QUERY_MODULES = ("django.db.models",)

# (module path, what the finding names) → why that one is fine. Keep this list short and specific.
CONSOLE_READ_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("bailing/shell/console/login.py", "raw SQL connection.cursor()"): (
        "not a read: the transaction-scoped advisory lock per IP address that makes the throttle's"
        " count (a selector) and the sign-in's audit event exact under parallel attempts; it is"
        " taken inside the sign-in's own transaction, which Django's LoginView runs in the view"
    ),
}


def console_modules() -> list[Path]:
    paths = {path for pattern in CONSOLE_MODULE_GLOBS for path in ROOT.glob(pattern)}
    return sorted(path for path in paths if path.relative_to(ROOT).parts[0] in PACKAGES)


def related_manager_names() -> frozenset[str]:
    """The accessor of every many-valued relation of every installed model (reverse foreign keys and
    both sides of many-to-many: ``client.agent_sessions``, ``kb.writers``, ``user.groups`` …)."""
    from django.apps import apps

    names = set()
    for model in apps.get_models():
        for field in model._meta.get_fields():
            if not (field.one_to_many or field.many_to_many):
                continue
            name = field.get_accessor_name() if field.auto_created and not field.concrete else field.name
            if name:
                names.add(name)
    return frozenset(names)


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a chain of names and attributes (calls and subscripts shown as ``()`` / ``[]``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_dotted(node.func)}()"
    if isinstance(node, ast.Subscript):
        return f"{_dotted(node.value)}[]"
    return "…"


def orm_reads(source: str, *, managers: frozenset[str]) -> list[tuple[int, str]]:
    """(line, what) of every ORM read in ``source``: a manager reference, a Django ORM shortcut, a
    queryset-only method on any receiver, a queryset method on a related manager, a query expression
    imported from ``django.db.models``, or a generic view's ``model =`` (which reads the default
    manager)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in MANAGER_ATTRIBUTES:
            found.append((node.lineno, f"manager {_dotted(node)}"))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ORM_SHORTCUTS:
                found.append((node.lineno, f"shortcut {name}"))
            elif isinstance(func, ast.Attribute) and name in RAW_SQL_METHODS:
                found.append((node.lineno, f"raw SQL {_dotted(func)}()"))
            elif isinstance(func, ast.Attribute) and name in QUERY_BUILDERS:
                found.append((node.lineno, f"query {_dotted(func)}()"))
            elif (
                isinstance(func, ast.Attribute)
                and name in QUERYSET_METHODS
                and isinstance(func.value, ast.Attribute)
                and func.value.attr in managers
            ):
                found.append((node.lineno, f"related manager {_dotted(func)}()"))
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if any(node.module == m or node.module.startswith(m + ".") for m in QUERY_MODULES):
                found.append((node.lineno, f"import from {node.module}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(alias.name == m or alias.name.startswith(m + ".") for m in QUERY_MODULES):
                    found.append((node.lineno, f"import {alias.name}"))
        elif isinstance(node, ast.ClassDef) and node.name != "Meta":
            for statement in node.body:
                targets = statement.targets if isinstance(statement, ast.Assign) else []
                if any(isinstance(target, ast.Name) and target.id == "model" for target in targets):
                    found.append((statement.lineno, f"generic view {node.name}.model"))
    return sorted(found)


def test_console_modules_read_only_through_selectors():
    managers = related_manager_names()
    problems = []
    seen_exceptions = set()
    for path in console_modules():
        relative = path.relative_to(ROOT).as_posix()
        for line, what in orm_reads(path.read_text(encoding="utf-8"), managers=managers):
            if (relative, what) in CONSOLE_READ_EXCEPTIONS:
                seen_exceptions.add((relative, what))
                continue
            problems.append(f"{relative}:{line}: {what}")
    assert problems == []
    # An exception that no longer matches anything is removed, so the list stays true.
    assert set(CONSOLE_READ_EXCEPTIONS) == seen_exceptions


def test_the_console_read_guard_sees_every_kind_of_read():
    source = (
        "from django.db.models import Count\n"
        "from django.shortcuts import get_object_or_404\n"
        "from django.views.generic import DetailView\n"
        "class V(DetailView):\n    model = Client\n"
        "def f(client, queryset, form, request):\n"
        "    Client.objects.order_by('app_id')\n"
        "    get_object_or_404(Client, pk=1)\n"
        "    client.agent_sessions.count()\n"
        "    queryset.filter(enabled=True)\n"
        "    form.cleaned_data.get('status')\n"
        "    request.GET.get('page')\n"
        "    (client.allowed_routes or []).count('x')\n"
        "    connection.cursor()\n"
    )
    whats = [what for _, what in orm_reads(source, managers=frozenset({"agent_sessions"}))]
    assert whats == [
        "import from django.db.models",
        "generic view V.model",
        "manager Client.objects",
        "query Client.objects.order_by()",
        "shortcut get_object_or_404",
        "related manager client.agent_sessions.count()",
        "query queryset.filter()",
        "raw SQL connection.cursor()",
    ]


def test_console_modules_are_found():
    names = {path.relative_to(ROOT).as_posix() for path in console_modules()}
    assert {
        "agent_runtime/console/clients.py",
        "knowledge/console/views.py",
        "approvals/console/approvals.py",
        "bailing/shell/console/users.py",
        "bailing/shell/console/dashboard.py",
    } <= names
