"""Readiness checks: what ``GET /health/ready`` reports, one named check each.

``/health`` is liveness (the process answers and ``SELECT 1`` works); ``/health/ready`` runs every
check in :data:`READINESS_CHECKS` and answers ``{"status": "ok" | "unavailable", "checks": {name:
{"ok": bool, ...}}}``, 200 when every check is ok, else 503 with ``Retry-After``. A check is a
function returning a dict with ``ok`` and any details worth showing (figures, an exception type —
never a message, a credential or SQL); a check that raises is reported ``ok: false`` with the
exception type. An app adds its own with :func:`readiness_check_register` from its
``AppConfig.ready()``; the plumbing registers ``database`` and ``migrations``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, connection

from bailing.db.outage import database_unavailable, log_database_unavailable

logger = logging.getLogger("bailing.health")

CheckResult = dict[str, Any]


@dataclass(frozen=True)
class ReadinessCheck:
    name: str
    run: Callable[[], CheckResult]
    # Skipped (reported ``{"ok": false, "error": "database_unavailable"}``) while ``database`` fails,
    # so one outage is one log line rather than one per check.
    needs_database: bool = True


def database_check() -> CheckResult:
    """``SELECT 1`` on the default database: ``{"ok", "latency_ms"}``, plus ``error`` (the exception
    type) when it fails."""
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        outage = database_unavailable(exc)
        if outage is not None:
            log_database_unavailable(outage)
        else:
            logger.error("readiness check database failed: %s", type(exc).__name__)
        return {"ok": False, "error": type(outage or exc).__name__, "latency_ms": _ms_since(started)}
    return {"ok": True, "latency_ms": _ms_since(started)}


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


_MIGRATIONS_APPLIED = False


def migrations_check() -> CheckResult:
    """Every migration on disk is applied: ``{"ok", "unapplied"}`` (a count, never names).

    The positive answer is cached for the process: the code (and so its migrations) cannot change
    under a running process, and applied migrations are not unapplied by a deploy.
    """
    global _MIGRATIONS_APPLIED
    if _MIGRATIONS_APPLIED:
        return {"ok": True, "unapplied": 0}
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        return {"ok": False, "unapplied": len(plan)}
    _MIGRATIONS_APPLIED = True
    return {"ok": True, "unapplied": 0}


READINESS_CHECKS: list[ReadinessCheck] = [
    ReadinessCheck("database", database_check, needs_database=False),
    ReadinessCheck("migrations", migrations_check),
]


def readiness_check_register(
    name: str, run: Callable[[], CheckResult], *, needs_database: bool = True
) -> None:
    """Add a named check to ``/health/ready`` (names are unique; registering one twice is a bug)."""
    if any(check.name == name for check in READINESS_CHECKS):
        raise ValueError(f"readiness check {name!r} is registered already")
    READINESS_CHECKS.append(ReadinessCheck(name, run, needs_database))


def readiness() -> dict[str, Any]:
    """Run every check in order: ``{"status": "ok" | "unavailable", "checks": {...}}``."""
    checks: dict[str, CheckResult] = {}
    for check in READINESS_CHECKS:
        if check.needs_database and checks.get("database", {}).get("ok") is False:
            checks[check.name] = {"ok": False, "error": "database_unavailable"}
            continue
        try:
            result = dict(check.run())
        except Exception as exc:  # a broken check reports itself, never breaks the others
            logger.error("readiness check %s raised %s", check.name, type(exc).__name__)
            result = {"ok": False, "error": type(exc).__name__}
        result["ok"] = result.get("ok") is True
        checks[check.name] = result
    ready = all(result["ok"] for result in checks.values())
    return {"status": "ok" if ready else "unavailable", "checks": checks}
