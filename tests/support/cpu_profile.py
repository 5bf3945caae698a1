"""Where the suite's CPU goes: per test, the CPU seconds its process spent (all threads) and those of the
child processes it waited for (hubs, Demo Shops, ``manage.py`` runs), and for the whole run those of the
embedded PostgreSQL (its postmaster and every backend that has ended).

Off unless ``BAILING_TEST_CPU_PROFILE`` names a file: then each pytest process appends one JSON line
per test phase (``{"nodeid", "phase", "worker", "at", "cpu", "children", "wall"}``) and the
controller one line for the database server (``{"postgres": seconds}``) before it stops it.
``scripts/test-cpu-report`` sums the file by module and by test. Wall time on a loaded machine says
little; CPU seconds add up the same.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

_TARGET = os.environ.get("BAILING_TEST_CPU_PROFILE", "")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _append(record: dict) -> None:
    with Path(_TARGET).open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and of its children that have ended (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command: state is field 3; utime, stime, cutime, cstime are fields 14 to 17.
    ticks = sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


process_cpu_seconds.__test__ = False


if _TARGET:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(item):
        yield from _measured(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        yield from _measured(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(item):
        yield from _measured(item, "teardown")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_collection(session):
        started, children, wall = time.process_time(), _children_cpu(), time.monotonic()
        yield
        _append(
            {
                "nodeid": "<collection>",
                "phase": "collect",
                "cpu": time.process_time() - started,
                "children": _children_cpu() - children,
                "wall": time.monotonic() - wall,
            }
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session):
        times = os.times()
        children = times.children_user + times.children_system
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _append({"process": times.user + times.system, "children": children, "worker": worker})


def _measured(item, phase: str):
    started, children, wall, at = time.process_time(), _children_cpu(), time.monotonic(), time.time()
    yield
    _append(
        {
            "nodeid": item.nodeid,
            "phase": phase,
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "at": at,
            "cpu": time.process_time() - started,
            "children": _children_cpu() - children,
            "wall": time.monotonic() - wall,
        }
    )


def record_postgres(data_dir: Path) -> None:
    """Append the embedded PostgreSQL's CPU seconds so far (called before the controller stops it)."""
    if not _TARGET:
        return
    from bailing.db import embedded

    pid = embedded.embedded_postmaster_pid(data_dir)
    if pid:
        _append({"postgres": process_cpu_seconds(pid)})
