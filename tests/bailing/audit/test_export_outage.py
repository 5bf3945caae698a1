"""``approvals_audit_export`` during a database outage: a plain failure (exit 1), no traceback, and no
export file, whole or partial, left behind."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bailing.audit.export import signing_key_generate


def test_an_export_during_an_outage_fails_cleanly_and_leaves_no_file(database_down, tmp_path):
    key = tmp_path / "audit-export.pem"
    signing_key_generate(key)
    output = tmp_path / "ledger.jsonl"
    with pytest.raises(CommandError) as info:
        call_command("approvals_audit_export", "--key", str(key), "--output", str(output))
    assert info.value.returncode == 1
    assert "the database is unavailable (OperationalError); nothing exported" in str(info.value)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["audit-export.pem"]
