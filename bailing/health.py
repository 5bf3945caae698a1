"""Readiness checks: what ``GET /health/ready`` reports, one named check each.

``/health`` is liveness (the process answers and ``SELECT 1`` works); ``/health/ready`` runs every
check in :data:`READINESS_CHECKS` and answers ``{"status": "ok" | "unavailable", "checks": {name:
{"ok": bool, ...}}}``, 200 when every check is ok, else 503 with ``Retry-After``. A check is a
function returning a dict with ``ok`` and any details worth showing (figures, an exception type —
never a message, a credential or SQL); a check that raises is reported ``ok: false`` with the
exception type. An app adds its own with :func:`readiness_check_register` from its
``AppConfig.ready()``; the plumbing registers ``database``.
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


READINESS_CHECKS: list[ReadinessCheck] = [ReadinessCheck("database", database_check)]


def readiness_check_register(name: str, run: Callable[[], CheckResult]) -> None:
    """Add a named check to ``/health/ready`` (names are unique; registering one twice is a bug)."""
    if any(check.name == name for check in READINESS_CHECKS):
        raise ValueError(f"readiness check {name!r} is registered already")
    READINESS_CHECKS.append(ReadinessCheck(name, run))


def readiness() -> dict[str, Any]:
    """Run every check in order: ``{"status": "ok" | "unavailable", "checks": {...}}``."""
    checks: dict[str, CheckResult] = {}
    for check in READINESS_CHECKS:
        try:
            result = dict(check.run())
        except Exception as exc:  # a broken check reports itself, never breaks the others
            logger.error("readiness check %s raised %s", check.name, type(exc).__name__)
            result = {"ok": False, "error": type(exc).__name__}
        result["ok"] = result.get("ok") is True
        checks[check.name] = result
    ready = all(result["ok"] for result in checks.values())
    return {"status": "ok" if ready else "unavailable", "checks": checks}
