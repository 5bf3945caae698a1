"""The knowledge worker meets a database outage with one warning line per attempt, not a traceback;
any other database failure is still logged with its traceback."""

from __future__ import annotations

import logging

import psycopg
import pytest
from django.core.management import call_command
from django.db import OperationalError, ProgrammingError

from knowledge.management.commands import knowledge_worker


def _failing_claim(exc: Exception):
    def claim(**kwargs):
        raise exc

    return claim


def _wrapped(outer: Exception, cause: Exception) -> Exception:
    try:
        raise outer from cause
    except Exception as caught:
        return caught


@pytest.fixture
def no_vector_storage(monkeypatch):
    monkeypatch.setattr(knowledge_worker, "vector_storage_ensure", lambda: "absent")
    monkeypatch.setattr(knowledge_worker, "close_old_connections", lambda: None)


@pytest.fixture(autouse=True)
def no_heartbeat(monkeypatch):
    """These tests run without a database: the heartbeat (tested in test_readiness.py) and the audit
    seal are left out."""
    monkeypatch.setattr(knowledge_worker, "heartbeat_record", lambda worker, started_at: None)
    monkeypatch.setattr(knowledge_worker, "heartbeat_forget", lambda worker: None)
    monkeypatch.setattr(knowledge_worker, "audit_seal", lambda **kwargs: None)  # test_worker_seal.py


def test_an_unreachable_database_is_one_line(no_vector_storage, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    gone = _wrapped(OperationalError("refused"), psycopg.OperationalError("connection failed"))
    monkeypatch.setattr(knowledge_worker, "documents_claim", _failing_claim(gone))
    with pytest.raises(OperationalError):
        call_command("knowledge_worker", "--once")
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.name, r.getMessage(), r.exc_info) for r in problems] == [
        ("bailing.db", "database unavailable: OperationalError", None)
    ]


def test_another_database_failure_keeps_its_traceback(no_vector_storage, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    bug = _wrapped(ProgrammingError("no such column"), psycopg.errors.UndefinedColumn())
    monkeypatch.setattr(knowledge_worker, "documents_claim", _failing_claim(bug))
    with pytest.raises(ProgrammingError):
        call_command("knowledge_worker", "--once")
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.name, r.getMessage()) for r in problems] == [
        ("knowledge.worker", "knowledge worker could not claim documents")
    ]
    assert problems[0].exc_info is not None
