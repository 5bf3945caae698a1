"""``python manage.py knowledge_ingest KB_ID PATH... [--beir] [--source-prefix P] [--wait]``

Loads files, folders or a BEIR corpus into a knowledge base through the same service as the push
API and the console (:func:`knowledge.services.documents.document_put`): documents are stored and
queued, and a running ``knowledge_worker`` indexes them. With ``--wait`` the command indexes them
itself afterwards (batched, as the worker does), so a one-shot ingest needs no worker, and prints
the indexing rate in chunks per second.

Files and folders
    Folders are walked recursively (hidden files and folders skipped; files of unsupported types
    skipped and counted). Each file goes through :func:`knowledge.parsing.parse_file`. Its
    ``source_key`` is the prefix plus the path relative to the folder given (a file given directly:
    its name), with ``/`` written as ``:``. A path that does not fit the key pattern
    ``[A-Za-z0-9_.:-]{1,128}`` (other characters, or too long) has them replaced by ``_``, is cut
    to fit, and gets ``-`` plus 8 hex digits of the SHA-256 of the original path, so that keys stay
    distinct and the same file maps to the same key on every run (re-ingesting is idempotent).
``--beir``
    Each PATH is a BEIR directory (holding ``corpus.jsonl``) or the ``corpus.jsonl`` itself; every
    line ``{"_id", "title", "text"}`` becomes the document ``<prefix>beir:<_id>`` (sanitized as
    above), titled by ``title`` or else ``_id``.

Unchanged documents are reported as unchanged (and not re-queued). A file or line that fails
(unreadable, unsupported, too large, empty, a key that collides with an earlier one of this run)
is reported by its path and error code and the rest are still processed; the command then exits
with status 1. Output never includes document text.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from bailing.api.limits import utf16_length
from bailing.audit.actor import Actor
from knowledge.management.progress import add_progress_argument, progress_bar
from knowledge.models import SOURCE_KEY_RE, Document, KnowledgeBase
from knowledge.parsing import (
    MAX_TEXT_CHARS,
    SUPPORTED_EXTENSIONS,
    DocumentParseError,
    ParsedDocument,
    clean_title,
    parse_file,
)
from knowledge.services.documents import document_put
from knowledge.services.indexing import documents_index

SOURCE_KEY_MAX = 128
_ALLOWED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-")


class IngestError(Exception):
    """A failure of one file or corpus line; ``code`` is what the report prints."""

    def __init__(self, code: str):
        self.code = code
        super().__init__(code)


@dataclass(frozen=True)
class Source:
    """One document to ingest: where it came from (for the report), its key, and either the file
    to parse or the BEIR record; parsing happens when it is stored, so memory stays flat."""

    label: str
    source_key: str
    path: Path | None = None
    record: dict | None = None


def source_key_for(name: str, *, prefix: str = "") -> str:
    """``prefix + name`` as a valid ``source_key``: kept as is when it fits, else sanitized, cut and
    suffixed with a hash of the original so that distinct names stay distinct."""
    key = prefix + name
    if SOURCE_KEY_RE.fullmatch(key):
        return key
    cleaned = "".join(char if char in _ALLOWED else "_" for char in key)
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned[: SOURCE_KEY_MAX - 9]}-{digest}"


def _relative_key(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix().replace("/", ":")


def _walk(root: Path, skipped: Counter) -> Iterator[Path]:
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(name for name in subdirs if not name.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = Path(directory) / name
            if path.suffix.lower() in SUPPORTED_EXTENSIONS:
                yield path
            else:
                skipped["unsupported"] += 1


def _corpus_path(path: Path) -> Path:
    return path / "corpus.jsonl" if path.is_dir() else path


def _beir_total(paths: list[str]) -> int:
    """Non-blank lines of the corpora (the progress bar's total); unreadable files count 0 here and
    are reported when read."""
    total = 0
    for raw in paths:
        try:
            with _corpus_path(Path(raw)).open("rb") as handle:
                total += sum(1 for line in handle if line.strip())
        except OSError:
            continue
    return total


def _beir_record(line: str) -> dict:
    try:
        record = json.loads(line)
    except ValueError:
        raise IngestError("invalid_json") from None
    if not isinstance(record, dict) or not isinstance(record.get("_id"), str | int) or record["_id"] == "":
        raise IngestError("invalid_record")
    if not isinstance(record.get("text", ""), str) or not isinstance(record.get("title", ""), str):
        raise IngestError("invalid_record")
    return record


def _beir_document(record: dict) -> ParsedDocument:
    text = record.get("text") or ""
    if not text.strip():
        raise IngestError("document_empty")
    if utf16_length(text) > MAX_TEXT_CHARS:
        raise IngestError("document_too_large")
    title = clean_title(record.get("title")) or clean_title(str(record["_id"])) or "Untitled"
    return ParsedDocument(title=title, text=text, content_type="text")


class Command(BaseCommand):
    help = "Ingest files, folders or a BEIR corpus.jsonl into a knowledge base (queued for indexing)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kb_id", help="the knowledge base to load into (its kb_id)")
        parser.add_argument(
            "paths", nargs="+", metavar="PATH", help="files or folders (with --beir: BEIR directories)"
        )
        parser.add_argument("--beir", action="store_true", help="PATH is a BEIR directory or corpus.jsonl.")
        parser.add_argument("--source-prefix", default="", help="Prepended to every source_key.")
        parser.add_argument(
            "--wait", action="store_true", help="Index the documents in this process, then report chunks/s."
        )
        parser.add_argument("--batch", type=int, default=32, help="Documents per indexing batch with --wait.")
        add_progress_argument(parser)

    def handle(
        self,
        *args,
        kb_id: str,
        paths: list[str],
        beir: bool,
        source_prefix: str,
        wait: bool,
        batch: int,
        progress: bool = False,
        **options,
    ) -> None:
        kb = KnowledgeBase.objects.filter(kb_id=kb_id).first()
        if kb is None:
            raise CommandError(f"unknown knowledge base {kb_id!r}")
        if source_prefix and not SOURCE_KEY_RE.fullmatch(source_prefix):
            raise CommandError("--source-prefix must match [A-Za-z0-9_.:-]{1,128}")
        if not 1 <= batch <= 1024:
            raise CommandError("--batch must be between 1 and 1024")
        self.counts: Counter = Counter()
        self.failures: list[tuple[str, str]] = []
        self.actor = Actor.system("knowledge_ingest")
        self.progress = progress
        if beir:
            sources, total = self._beir_sources(paths, source_prefix), _beir_total(paths)
        else:
            sources = self._file_sources(paths, source_prefix)
            total = len(sources)
        queued = self._put_all(kb, sources, total)
        self._report_puts()
        if wait and queued:
            self._index(queued, batch)
        elif queued:
            self.stdout.write(f"{len(queued)} documents waiting; knowledge_worker indexes them.")
        if self.failures:
            raise CommandError(f"{len(self.failures)} failures (listed above)", returncode=1)

    # --- sources ---------------------------------------------------------------------------------------

    def _file_sources(self, paths: list[str], prefix: str) -> list[Source]:
        sources: list[Source] = []
        skipped: Counter = Counter()
        for raw in paths:
            root = Path(raw)
            if root.is_dir():
                sources += [
                    Source(str(path), source_key_for(_relative_key(path, root), prefix=prefix), path=path)
                    for path in _walk(root, skipped)
                ]
            elif root.is_file():
                sources.append(Source(str(root), source_key_for(root.name, prefix=prefix), path=root))
            else:
                self._fail(str(root), "not_found")
        if skipped["unsupported"]:
            self.stdout.write(f"skipped {skipped['unsupported']} files of unsupported types")
        return sources

    def _beir_sources(self, paths: list[str], prefix: str) -> Iterator[Source]:
        for raw in paths:
            corpus = _corpus_path(Path(raw))
            try:
                handle = corpus.open(encoding="utf-8")
            except OSError:
                self._fail(str(corpus), "not_found")
                continue
            with handle:
                try:
                    for number, line in enumerate(handle, start=1):
                        if not line.strip():
                            continue
                        label = f"{corpus}:{number}"
                        try:
                            record = _beir_record(line)
                        except IngestError as exc:
                            self._fail(label, exc.code)
                            continue
                        key = source_key_for(f"beir:{record['_id']}", prefix=prefix)
                        yield Source(label, key, record=record)
                except UnicodeDecodeError:
                    self._fail(str(corpus), "document_encoding_invalid")

    # --- storing ---------------------------------------------------------------------------------------

    def _put_all(self, kb: KnowledgeBase, sources: Iterable[Source], total: int) -> list[int]:
        seen: dict[str, str] = {}
        queued: list[int] = []
        with progress_bar(sources, total=total, desc="storing", unit="doc", force=self.progress) as bar:
            for source in bar:
                if source.source_key in seen:
                    self._fail(source.label, "source_key_collision", other=seen[source.source_key])
                    continue
                seen[source.source_key] = source.label
                try:
                    parsed = parse_file(source.path) if source.path else _beir_document(source.record)
                except (DocumentParseError, IngestError) as exc:
                    self._fail(source.label, exc.code)
                    continue
                result = document_put(
                    kb=kb,
                    source_key=source.source_key,
                    title=parsed.title,
                    content=parsed.text,
                    content_type=parsed.content_type,
                    actor=self.actor,
                )
                if result.created:
                    self.counts["created"] += 1
                elif result.queued:
                    self.counts["updated"] += 1
                else:
                    self.counts["unchanged"] += 1
                # Unchanged but still waiting (stored by an earlier run without a worker): --wait
                # must index it too.
                if result.queued or result.document.status == Document.Status.EMBEDDING:
                    queued.append(result.document.pk)
        return queued

    def _fail(self, label: str, code: str, *, other: str | None = None) -> None:
        self.failures.append((label, code))
        detail = f" (same source_key as {other})" if other else ""
        # Printed between progress bar redraws, so the bar does not overwrite it.
        with tqdm.external_write_mode(file=sys.stderr):
            self.stderr.write(f"failed: {label}: {code}{detail}")

    def _report_puts(self) -> None:
        self.stdout.write(
            f"created {self.counts['created']}, updated {self.counts['updated']}, "
            f"unchanged {self.counts['unchanged']}, failed {len(self.failures)}"
        )

    # --- indexing --------------------------------------------------------------------------------------

    def _index(self, ids: list[int], batch: int) -> None:
        outcomes: Counter = Counter()
        chunks = 0
        started = time.monotonic()
        with progress_bar(total=len(ids), desc="indexing", unit="doc", force=self.progress) as bar:
            for offset in range(0, len(ids), batch):
                part = ids[offset : offset + batch]
                for outcome in documents_index(document_ids=part).values():
                    outcomes[outcome.result] += 1
                    chunks += outcome.chunks
                bar.update(len(part))
        elapsed = max(time.monotonic() - started, 1e-9)
        summary = ", ".join(f"{name} {count}" for name, count in sorted(outcomes.items()))
        self.stdout.write(
            f"indexed {chunks} chunks in {elapsed:.1f} s ({chunks / elapsed:.1f} chunks/s): {summary}"
        )
        if outcomes["error"]:
            self.failures.append(("indexing", "indexing_failed"))
            self.stderr.write(
                f"{outcomes['error']} documents failed to index (see their status and error code)"
            )
