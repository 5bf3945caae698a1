"""The knowledge commands draw their progress bars on the real terminal: run in a pseudo-terminal,
each bar is redrawn in place (carriage returns on one line), never in Django's red error style, never
one new line per refresh; off a terminal the bars are off unless ``--progress`` asks for them."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.knowledge.test_eval_command import _beir
from tests.support.live_hub import test_database_url

ROOT = Path(__file__).resolve().parents[2]
RED = "\x1b[31"  # Django's ERROR style is bold red (ESC[31;1m); plain red would be ESC[31m
pytestmark = pytest.mark.django_db(transaction=True)


def _in_a_terminal(*argv: str, timeout: float = 240) -> tuple[int, str]:
    """Run ``manage.py ARGV`` with standard output and error on a pseudo-terminal; return its exit
    status and everything it wrote there (bytes decoded, CR and escape codes kept)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a 120-column terminal
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "TERM": "xterm-256color",
        "COLUMNS": "120",
        "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.Popen(
        [sys.executable, "manage.py", *argv],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed its end
                    break
                if not chunk:
                    break
                received += chunk
            elif process.poll() is not None:
                break
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    return code, received.decode("utf-8", errors="replace")


def _lines(output: str) -> list[str]:
    """The terminal's lines: split on newlines only (a carriage return rewrites the same line)."""
    return output.replace("\r\n", "\n").split("\n")


def _visible(line: str) -> str:
    """What a terminal finally shows on a line: the text after its last carriage return."""
    return line.rsplit("\r", 1)[-1].strip()


def _bar_lines(output: str, desc: str) -> list[str]:
    """The lines that end up showing the bar ``desc`` (each with every redraw it received)."""
    return [line for line in _lines(output) if _visible(line).startswith(f"{desc}: ")]


def test_knowledge_eval_redraws_each_bar_in_place_on_a_terminal(tmp_path):
    beir = _beir(tmp_path)

    code, output = _in_a_terminal("knowledge_eval", "--beir", str(beir))

    assert code == 0, output
    assert "nDCG@10 lexical=" in output
    for desc in ("ingest", "lexical", "vector", "hybrid"):
        lines = _bar_lines(output, desc)
        assert len(lines) == 1, (desc, lines)  # one line per bar, never a new line per refresh
        line = lines[0]
        assert line.count("\r") >= 2, repr(line)  # drawn, then redrawn in place by carriage returns
        assert _visible(line).startswith(f"{desc}: 100%|"), repr(line)
    assert RED not in output, repr(output)


def test_bars_are_off_without_a_terminal_unless_asked(tmp_path, capfd):
    beir = _beir(tmp_path)
    call_command("knowledge_eval", beir=str(beir), stdout=io.StringIO(), stderr=io.StringIO())
    assert "%|" not in capfd.readouterr().err  # standard error is no terminal here: no bars
    call_command("knowledge_eval", beir=str(beir), progress=True, stdout=io.StringIO(), stderr=io.StringIO())
    err = capfd.readouterr().err
    assert "ingest: 100%|" in err and "hybrid: 100%|" in err and RED not in err


def test_knowledge_ingest_bar_on_a_terminal(tmp_path):
    from tests.factories import KnowledgeBaseFactory

    KnowledgeBaseFactory(kb_id="tty-kb", embedding_provider="none", embedding_model="", embedding_dim=0)
    folder = tmp_path / "docs"
    folder.mkdir()
    for number in range(3):
        (folder / f"note-{number}.md").write_text(f"# Note {number}\n\nParcels ship on day {number}.\n")
    (folder / "broken.md").write_bytes(b"")  # fails (empty): its line is printed between redraws

    code, output = _in_a_terminal("knowledge_ingest", "tty-kb", str(folder), "--wait")

    assert code == 1, output  # one file failed
    for desc in ("storing", "indexing"):
        lines = _bar_lines(output, desc)
        assert len(lines) == 1, (desc, lines)
        assert lines[0].count("\r") >= 2, repr(lines[0])
        assert _visible(lines[0]).startswith(f"{desc}: 100%|"), repr(lines[0])
    # The failure is printed between redraws: it keeps its own line, the bar moves below it.
    failure = next(_visible(line) for line in _lines(output) if "broken.md" in line)
    assert "failed: " in failure and failure.endswith("broken.md: document_empty"), repr(failure)
    bar_text = "".join(_bar_lines(output, "storing") + _bar_lines(output, "indexing"))
    assert RED not in bar_text, repr(bar_text)
