"""Every ``docs/<file>.md "<Heading>"`` a comment or docstring cites names a real heading."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_CITATION = re.compile(r'docs/([A-Za-z0-9_/-]+\.md) "([^"]+)"')


def _headings(name: str) -> set[str]:
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    return {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}


def test_every_docs_citation_resolves():
    files = subprocess.run(
        ["git", "ls-files", "*.py", "*.html", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    missing = []
    for name in files:
        path = ROOT / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        # Citations may wrap onto the next line of a comment: join lines and drop comment markers.
        flat = re.sub(r"\s*\n\s*(#\s*)?", " ", text)
        for doc, heading in _CITATION.findall(flat):
            if not (ROOT / "docs" / doc).is_file() or heading not in _headings(doc):
                missing.append(f'{name}: docs/{doc} "{heading}"')
    assert missing == []
