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

Within every app, selectors only read: a ``selectors`` module never imports a ``services`` module
(of its own app or any other), so a read cannot write, embed or call the network behind its caller's
back (STYLE.md "Services and selectors").

Two programs ride along outside the hub: ``demo_business`` (a business system: it may use only the
stdlib-only contract module ``bailing.signing``) and ``agent_client`` (the reference agent: it
imports nothing of the hub). Only the shell may start the demo business system.
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


def selector_service_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a ``services`` module by a ``selectors`` module (module or package, any app)."""
    return [
        f"{source} -> {target}"
        for source, targets in sorted(graph.items())
        if "selectors" in source.split(".")
        for target in sorted(targets)
        if "services" in target.split(".")
    ]


def test_no_selector_imports_a_service():
    assert selector_service_imports(import_graph()) == []


def test_the_selector_guard_sees_a_service_import_in_any_app(tmp_path):
    module = tmp_path / "search.py"
    module.write_text("def f():\n    from approvals.services import decisions\n")
    known = {"approvals.services", "approvals.services.decisions", "knowledge.selectors.search"}
    graph = {
        "knowledge.selectors.search": imports_of("knowledge.selectors.search", module, known),
        "approvals.selectors": {"approvals.models"},
        "knowledge.services.retrieval": {"knowledge.selectors.search", "knowledge.services.providers"},
    }
    assert selector_service_imports(graph) == ["knowledge.selectors.search -> approvals.services.decisions"]


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
