"""Progress bars of the long-running management commands (``knowledge_ingest``, ``knowledge_eval``,
``knowledge_bench``, ``approvals_audit_export``).

A bar is drawn on the process's real standard error (``sys.stderr``), never through the command's
``self.stderr``: Django's ``OutputWrapper`` styles every write as an error (bold red on a terminal)
and ends it with a newline, so each refresh would land on a new red line. tqdm redraws in place with
carriage returns. Off a terminal (a log file, a pipe, CI) bars are off unless ``--progress`` asks for
them; the commands' results go to standard output either way.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm

PROGRESS_HELP = "draw progress bars even when standard error is not a terminal (default: only on one)"


def add_progress_argument(parser) -> None:
    parser.add_argument("--progress", action="store_true", help=PROGRESS_HELP)


def progress_bar(iterable: Iterable | None = None, *, force: bool = False, **options: Any) -> tqdm:
    """A tqdm bar on the real standard error; ``force`` draws it off a terminal too."""
    return tqdm(iterable, file=sys.stderr, disable=False if force else None, **options)
