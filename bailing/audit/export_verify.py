#!/usr/bin/env python3
"""Verify a Bailing Hub audit export offline: ``python3 export_verify.py EXPORT --public-key KEY``.

This file is both the hub's implementation of the export format (``approvals_audit_export`` signs
its manifest with it, ``approvals_audit_verify --file`` runs it) and the standalone verifier an
auditor runs: it imports only the Python standard library and ``cryptography``, never Django or the
hub, and needs neither the hub nor its database. ``approvals_audit_export --write-verifier DIR``
writes a copy of it (docs/audit.md "Export and offline verification").

The export is JSON Lines, one canonical JSON object per line, each ending with a newline:

- line 1, the signed manifest (``"type": "manifest"``): ``format``, ``first_seq``, ``last_seq``,
  ``count``, ``anchor_hash`` (the ``prev_hash`` of the first event: 64 zeros when the export starts
  at the chain's genesis), ``head_hash`` (the ``chain_hash`` of the last event), ``range``,
  ``exporter``, ``exported_at``, ``key_sha256`` and ``signature``: Ed25519 over the canonical JSON of
  the manifest without ``signature``, base64;
- lines 2 … count + 1, one sealed event each, in chain order (``"type": "event"``): ``seq``,
  ``prev_hash``, ``content_hash``, ``chain_hash`` and ``content``, the event's fields exactly as the
  ledger hashed them.

Checked, line by line, stopping at the first failure (its line number and a stable code):
the manifest's signature against the given public key, then its fields; for each event line, its
position, the link to the previous chain hash (the anchor for the first), the content hash
recomputed from ``content``, the chain hash recomputed from both, the head hash at the last event;
then that the file holds exactly ``count`` events and nothing after them. Every line must be
exactly the canonical form of what it holds, so no byte of the file goes unchecked.

Exit status: 0 — the export verifies (a summary on standard output); 1 — it does not (``audit
export broken at line N: CODE: reason`` on standard error); 2 — bad usage, unreadable file or key.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import re
import sys
from dataclasses import asdict, dataclass
from typing import IO, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_public_key

FORMAT = "bailing-audit-export/1"
GENESIS_HASH = "0" * 64

EXIT_OK = 0
EXIT_BROKEN = 1
EXIT_USAGE = 2

# The stable failure codes, in the order the checks run on a line.
MANIFEST_MISSING = "manifest_missing"  # line 1 is not a manifest (or the file is empty)
SIGNATURE_INVALID = "signature_invalid"  # the manifest is not signed by the given key as it stands
MANIFEST_INVALID = "manifest_invalid"  # signed, but its fields are missing or inconsistent
TRUNCATED = "truncated"  # the last line has no newline: the file was cut mid-line
NOT_JSON = "not_json"  # a line that is not one JSON object (duplicate keys, NaN included)
NOT_CANONICAL = "not_canonical"  # valid JSON, but not byte for byte its canonical form
LINE_INVALID = "line_invalid"  # not an event line of this format
SEQUENCE_MISMATCH = "sequence_mismatch"  # not the next position (reordered, dropped, inserted)
LINK_BROKEN = "link_broken"  # prev_hash is not the previous event's chain hash (or the anchor)
CONTENT_HASH_MISMATCH = "content_hash_mismatch"  # content does not hash to content_hash
CHAIN_HASH_MISMATCH = "chain_hash_mismatch"  # chain_hash is not SHA-256(prev_hash + content_hash)
HEAD_MISMATCH = "head_mismatch"  # the last event's chain hash is not the manifest's head
MISSING_LINES = "missing_lines"  # the file ends before the manifest's count of events
EXTRA_LINE = "extra_line"  # a line after the last event the manifest counts
CODES = (
    MANIFEST_MISSING,
    SIGNATURE_INVALID,
    MANIFEST_INVALID,
    TRUNCATED,
    NOT_JSON,
    NOT_CANONICAL,
    LINE_INVALID,
    SEQUENCE_MISMATCH,
    LINK_BROKEN,
    CONTENT_HASH_MISMATCH,
    CHAIN_HASH_MISMATCH,
    HEAD_MISMATCH,
    MISSING_LINES,
    EXTRA_LINE,
)

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_MANIFEST_FIELDS = {
    "type",
    "format",
    "first_seq",
    "last_seq",
    "count",
    "anchor_hash",
    "head_hash",
    "range",
    "exporter",
    "exported_at",
    "key_sha256",
    "signature",
}
_EVENT_FIELDS = {"type", "seq", "prev_hash", "content_hash", "chain_hash", "content"}


# --- the canonical form and the hashes (the ledger's rules: docs/audit.md "Canonical form") ---------


def canonical_json(value: Any) -> bytes:
    """Keys sorted (by code point), no whitespace, UTF-8 with non-ASCII kept, no NaN or Infinity."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: str | bytes) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def content_hash_of(content: dict[str, Any]) -> str:
    return sha256_hex(canonical_json(content))


def chain_hash_of(prev_hash: str, content_hash: str) -> str:
    return sha256_hex(prev_hash + content_hash)


def manifest_signed_bytes(manifest: dict[str, Any]) -> bytes:
    """What the signature covers: the canonical JSON of the manifest without ``signature``."""
    return canonical_json({name: value for name, value in manifest.items() if name != "signature"})


def public_key_sha256(key: Ed25519PublicKey) -> str:
    """The key's fingerprint: SHA-256 of its 32 raw bytes, hex."""
    return sha256_hex(key.public_bytes(Encoding.Raw, PublicFormat.Raw))


def public_key_pem(key: Ed25519PublicKey) -> str:
    return key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode("ascii")


def manifest_sign(manifest: dict[str, Any], private_key: Ed25519PrivateKey) -> dict[str, Any]:
    """``manifest`` with its ``key_sha256`` and ``signature`` (the exporter's side)."""
    unsigned = {**manifest, "key_sha256": public_key_sha256(private_key.public_key())}
    unsigned.pop("signature", None)
    signature = private_key.sign(manifest_signed_bytes(unsigned))
    return {**unsigned, "signature": base64.b64encode(signature).decode("ascii")}


def load_public_key(data: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM (``-----BEGIN PUBLIC KEY-----``); ValueError otherwise."""
    try:
        key = load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise ValueError("not a PEM public key") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key


# --- verifying -----------------------------------------------------------------------------------------


class ExportBroken(Exception):
    """The first line that does not hold: its number (1 is the manifest), a stable code, a reason."""

    def __init__(self, line: int, code: str, reason: str) -> None:
        super().__init__(f"line {line}: {code}: {reason}")
        self.line = line
        self.code = code
        self.reason = reason


@dataclass(frozen=True)
class ExportSummary:
    count: int
    first_seq: int
    last_seq: int
    anchor_hash: str
    head_hash: str
    key_sha256: str
    exported_at: str
    exporter: dict[str, Any]
    range: dict[str, Any]


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate key")
    return result


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse(number: int, raw: bytes, *, last: bool) -> dict[str, Any]:
    """One line as an object, checked to be exactly its canonical form plus the newline."""
    if not raw.endswith(b"\n"):
        if last:
            raise ExportBroken(number, TRUNCATED, "the last line has no newline: the file was cut")
        raise ExportBroken(number, NOT_JSON, "a line without its newline")
    body = raw[:-1]
    try:
        value = json.loads(
            body.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constants
        )
    except (UnicodeDecodeError, ValueError):
        raise ExportBroken(number, NOT_JSON, "not one JSON object") from None
    if not isinstance(value, dict):
        raise ExportBroken(number, NOT_JSON, "not one JSON object")
    if canonical_json(value) != body:
        raise ExportBroken(number, NOT_CANONICAL, "not in canonical form (keys sorted, no spaces)")
    return value


def _is_seq(value: Any) -> bool:
    return type(value) is int and value >= 1


def _is_hash(value: Any) -> bool:
    return isinstance(value, str) and _HEX64.match(value) is not None


def _check_manifest(manifest: dict[str, Any], public_key: Ed25519PublicKey) -> ExportSummary:
    if manifest.get("type") != "manifest":
        raise ExportBroken(1, MANIFEST_MISSING, "the first line is not the export's manifest")
    # The signature first: no field of an unsigned or forged manifest is believed, not even its format.
    signature = manifest.get("signature")
    try:
        raw_signature = base64.b64decode(signature, validate=True) if isinstance(signature, str) else b""
    except binascii.Error:
        raw_signature = b""
    given = public_key_sha256(public_key)
    try:
        public_key.verify(raw_signature, manifest_signed_bytes(manifest))
    except InvalidSignature:
        claimed = manifest.get("key_sha256")
        other = f"; it names key {claimed}" if isinstance(claimed, str) and claimed != given else ""
        raise ExportBroken(
            1, SIGNATURE_INVALID, f"the manifest is not signed by the given key {given}{other}"
        ) from None
    if set(manifest) != _MANIFEST_FIELDS:
        raise ExportBroken(1, MANIFEST_INVALID, "fields missing or unknown")
    if manifest["format"] != FORMAT:
        raise ExportBroken(1, MANIFEST_INVALID, f"format {manifest['format']!r} is not {FORMAT}")
    first, last, count = manifest["first_seq"], manifest["last_seq"], manifest["count"]
    if not (_is_seq(first) and _is_seq(last) and type(count) is int and count == last - first + 1 >= 1):
        raise ExportBroken(1, MANIFEST_INVALID, "first_seq, last_seq and count do not agree")
    if not (_is_hash(manifest["anchor_hash"]) and _is_hash(manifest["head_hash"])):
        raise ExportBroken(1, MANIFEST_INVALID, "anchor_hash and head_hash must be 64 hex digits")
    if first == 1 and manifest["anchor_hash"] != GENESIS_HASH:
        raise ExportBroken(1, MANIFEST_INVALID, "an export from position 1 is anchored at genesis")
    if not (
        isinstance(manifest["range"], dict)
        and isinstance(manifest["exporter"], dict)
        and isinstance(manifest["exported_at"], str)
    ):
        raise ExportBroken(1, MANIFEST_INVALID, "range, exporter or exported_at malformed")
    return ExportSummary(
        count=count,
        first_seq=first,
        last_seq=last,
        anchor_hash=manifest["anchor_hash"],
        head_hash=manifest["head_hash"],
        key_sha256=given,
        exported_at=manifest["exported_at"],
        exporter=manifest["exporter"],
        range=manifest["range"],
    )


def _check_event(number: int, event: dict[str, Any], seq: int, prev_hash: str) -> str:
    """The event's chain hash, once its line holds."""
    if event.get("type") != "event" or set(event) != _EVENT_FIELDS:
        raise ExportBroken(number, LINE_INVALID, "not an event line (type or fields)")
    if not (
        _is_seq(event["seq"])
        and all(_is_hash(event[name]) for name in ("prev_hash", "content_hash", "chain_hash"))
        and isinstance(event["content"], dict)
    ):
        raise ExportBroken(number, LINE_INVALID, "seq, hashes or content malformed")
    if event["seq"] != seq:
        raise ExportBroken(number, SEQUENCE_MISMATCH, f"position {event['seq']} where {seq} is next")
    if event["prev_hash"] != prev_hash:
        what = "the manifest's anchor_hash" if number == 2 else "the previous line's chain_hash"
        raise ExportBroken(number, LINK_BROKEN, f"prev_hash is not {what}")
    if content_hash_of(event["content"]) != event["content_hash"]:
        raise ExportBroken(number, CONTENT_HASH_MISMATCH, "content does not hash to content_hash")
    if chain_hash_of(prev_hash, event["content_hash"]) != event["chain_hash"]:
        raise ExportBroken(number, CHAIN_HASH_MISMATCH, "chain_hash is not SHA-256(prev_hash + content_hash)")
    return event["chain_hash"]


def verify_export(stream: IO[bytes], public_key: Ed25519PublicKey) -> ExportSummary:
    """Check an export read from ``stream`` (binary) line by line; memory stays one line whatever its
    length. Returns the summary, or raises :class:`ExportBroken` naming the first bad line."""
    lines = iter(stream)

    def next_line() -> tuple[bytes | None, bool]:
        """The next line and whether it is the last one (a one-line look-ahead)."""
        nonlocal pending
        current, pending = pending, next(lines, None)
        return current, pending is None

    pending: bytes | None = next(lines, None)
    raw, last = next_line()
    if raw is None:
        raise ExportBroken(1, MANIFEST_MISSING, "the file is empty")
    summary = _check_manifest(_parse(1, raw, last=last), public_key)
    prev_hash = summary.anchor_hash
    for offset in range(summary.count):
        number = offset + 2
        raw, last = next_line()
        if raw is None:
            raise ExportBroken(
                number, MISSING_LINES, f"the file ends after {offset} of {summary.count} events"
            )
        event = _parse(number, raw, last=last)
        prev_hash = _check_event(number, event, summary.first_seq + offset, prev_hash)
    if prev_hash != summary.head_hash:
        raise ExportBroken(summary.count + 1, HEAD_MISMATCH, "the last chain_hash is not the head_hash")
    raw, _ = next_line()
    if raw is not None:
        raise ExportBroken(
            summary.count + 2, EXTRA_LINE, f"a line after the {summary.count} events the manifest counts"
        )
    return summary


# --- the command line ----------------------------------------------------------------------------------


def describe(summary: ExportSummary) -> str:
    exporter = summary.exporter
    by = " ".join(str(exporter.get(name)) for name in ("public_url", "host") if exporter.get(name))
    return (
        f"audit export ok: {summary.count} events, positions {summary.first_seq}..{summary.last_seq}, "
        f"anchor {summary.anchor_hash}, head {summary.head_hash}; signed by key {summary.key_sha256}, "
        f"exported {summary.exported_at}" + (f" by {by}" if by else "")
    )


def run(path: str, public_key_path: str, *, as_json: bool, out: IO[str], err: IO[str]) -> int:
    """Verify the export at ``path``; print the summary or the first bad line. Returns the exit status."""
    try:
        with open(public_key_path, "rb") as handle:
            public_key = load_public_key(handle.read())
    except (OSError, ValueError) as exc:
        err.write(f"cannot read the public key {public_key_path}: {exc}\n")
        return EXIT_USAGE
    try:
        with open(path, "rb") as stream:
            summary = verify_export(stream, public_key)
    except OSError as exc:
        err.write(f"cannot read the export {path}: {exc.strerror or exc}\n")
        return EXIT_USAGE
    except ExportBroken as broken:
        if as_json:
            result = {"ok": False, "line": broken.line, "code": broken.code, "reason": broken.reason}
            out.write(json.dumps(result) + "\n")
        err.write(f"audit export broken at line {broken.line}: {broken.code}: {broken.reason}\n")
        return EXIT_BROKEN
    out.write((json.dumps({"ok": True, **asdict(summary)}) if as_json else describe(summary)) + "\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Verify a Bailing Hub audit export offline (links, hashes, signature, completeness)."
    )
    parser.add_argument("export", help="the export file (JSON Lines, the signed manifest first)")
    parser.add_argument(
        "--public-key", required=True, metavar="PEM", help="the exporter's Ed25519 public key (PEM)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    return parser


def main(argv: list[str] | None = None) -> int:
    options = build_parser().parse_args(argv)
    return run(options.export, options.public_key, as_json=options.json, out=sys.stdout, err=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
