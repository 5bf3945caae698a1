"""The sweep registry: which test sweeps which budget (tests/budgets/test_sweep.py checks it is complete)."""

from __future__ import annotations

from bailing.budgets import budget_of

DELTAS = (-1, 0, 1)
SWEPT: dict[str, str] = {}  # budget key -> the test that sweeps it


def sweeps(key: str):
    """Mark a test as the sweep of budget ``key``."""

    def mark(function):
        SWEPT[key] = function.__name__
        return function

    return mark


def limit(key: str) -> int:
    return budget_of(key).limit
