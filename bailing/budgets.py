"""The hub's byte and character budgets, as one table the checks, the tests and the docs all read.

Each app declares its budgets in its own ``budgets`` module with :func:`budget`, which records the
budget here and returns its limit, so the constant the check compares against *is* the table's
value::

    ARGUMENTS_MAX_BYTES = budget(
        "invocation.arguments", 1_048_576, unit=JSON_BYTES,
        what="a tool call's `arguments`", over="413 `arguments_too_large` (`limit_scope: arguments`)",
        paths=("REST invoke", "MCP call_tool"),
    )

The plumbing knows no app: it only holds the registry. An app's ``AppConfig.ready()`` imports its
``budgets`` module, so the table is complete once Django is set up. ``manage.py bailing_budgets``
prints it as Markdown; docs/budgets.md is that output (a test compares them), and the boundary
sweep (tests/budgets) exercises every entry at ``limit - 1``, ``limit`` and
``limit + 1`` on every path it names.
"""

from __future__ import annotations

from dataclasses import dataclass

# How a budget is measured (docs/protocol.md "Byte budgets", "Counting characters").
JSON_BYTES = "UTF-8 bytes of compact JSON"
RAW_BYTES = "bytes of the raw body"
UTF8_BYTES = "UTF-8 bytes"
UTF16_CHARS = "characters (UTF-16 units)"
CODE_POINTS = "characters (code points)"
UNITS = (JSON_BYTES, RAW_BYTES, UTF8_BYTES, UTF16_CHARS, CODE_POINTS)


@dataclass(frozen=True)
class Budget:
    """One documented limit: its key, value, unit, what it bounds, what happens past it, and the
    paths (surfaces) that carry it."""

    key: str
    limit: int
    unit: str
    what: str
    over: str
    paths: tuple[str, ...]


_REGISTRY: dict[str, Budget] = {}


def budget(key: str, limit: int, *, unit: str, what: str, over: str, paths: tuple[str, ...] = ()) -> int:
    """Record a budget and return its limit. A key is declared once; declaring it again with other
    values is a programming error (two definitions of one limit)."""
    if unit not in UNITS:
        raise ValueError(f"unknown budget unit {unit!r}")
    entry = Budget(key=key, limit=limit, unit=unit, what=what, over=over, paths=tuple(paths))
    existing = _REGISTRY.get(key)
    if existing is not None and existing != entry:
        raise ValueError(f"budget {key!r} is declared twice with different values")
    _REGISTRY[key] = entry
    return limit


def budgets() -> list[Budget]:
    """Every declared budget, by key."""
    return [_REGISTRY[key] for key in sorted(_REGISTRY)]


def budget_of(key: str) -> Budget:
    return _REGISTRY[key]


def budgets_markdown() -> str:
    """The table of docs/budgets.md."""
    lines = [
        "| budget | limit | unit | what it bounds | past it | paths |",
        "|---|---:|---|---|---|---|",
    ]
    for entry in budgets():
        paths = "; ".join(entry.paths) or "—"
        lines.append(
            f"| `{entry.key}` | {entry.limit:,} | {entry.unit} | {entry.what} | {entry.over} | {paths} |"
        )
    return "\n".join(lines) + "\n"
