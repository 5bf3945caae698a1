"""Every error code is declared once and documented in docs/errors.md's table (and nothing more)."""

import importlib
import importlib.util
import re
from pathlib import Path

from django.apps import apps

from bailing.api.errors import all_error_classes

ERRORS_DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


def _declared():
    for config in apps.get_app_configs():
        name = f"{config.name}.errors"
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
    return all_error_classes()


def test_error_codes_are_unique():
    codes = [cls.code for cls in _declared()]
    assert len(codes) == len(set(codes)), sorted(c for c in codes if codes.count(c) > 1)


def test_error_table_lists_exactly_the_declared_codes():
    text = ERRORS_DOC.read_text(encoding="utf-8")
    table = text.split("# Error codes\n", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for line in table.splitlines():
        match = re.match(r"\|\s*`([a-z_]+)`\s*\|\s*(\d{3})\s*\|", line)
        if match:
            documented[match.group(1)] = int(match.group(2))
    declared = {cls.code: cls.http_status for cls in _declared()}
    assert documented == declared
