"""Applying a data policy to one agent-facing answer: :func:`data_policy_apply`, the one service
every surface calls.

An answer is a string or a JSON value. Every string in it — object keys too, and integers of seven
digits or more (a card number sent as a JSON number is still a card number) — is a *segment*; the
segments are joined with :data:`~agent_runtime.data_policy.detectors.SEPARATOR` and every detector
runs once over the joined text, so the cost is one pass per detector whatever the shape of the
answer. Findings are mapped back to their segment; a finding never spans two.

Then, by the strongest action among the detectors that found something: ``block`` withholds the
whole answer (:data:`WITHHELD`), ``redact`` replaces each redacted finding by
``[REDACTED:<detector>#<n>]`` — ``n`` numbers the distinct values of that detector in order of
first appearance across the whole answer, so the same value twice gets the same number — and
``flag`` passes the answer unchanged. Findings of ``flag`` detectors are reported but not replaced
in a redacted answer. The structure stays valid JSON: a redacted key stays a key (a number suffix
``~2`` keeps it unique in the rare case two keys become one), a redacted integer becomes a string.

The outcome carries counts per detector, never a found value.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from agent_runtime.data_policy.detectors import (
    CN_RESIDENT_ID,
    NUMERIC_PRIORITY,
    PAYMENT_CARD,
    SECRETS,
    SEPARATOR,
    Finding,
    Scope,
    scan,
)
from agent_runtime.data_policy.policy import (
    ACTION_STRENGTH,
    BLOCK,
    CUSTOM_TIME_BUDGET_SECONDS,
    FLAG,
    REDACT,
    SURFACES,
    CustomDetector,
    DataPolicy,
)

PLACEHOLDER = "[REDACTED:{detector}#{n}]"
# An answer with more findings than this is not redacted but withheld (unless every detector that
# found something only flags): replacing hundreds of thousands of spans — an answer made of invisible
# characters, say — would cost seconds, and such an answer is no use to an agent.
MAX_REDACTIONS = 10_000
# Integers shorter than this cannot hold a phone number, card or identity number.
_INT_MIN_SCANNED = 10**6
_NUMERIC_RANK = {name: rank for rank, name in enumerate(NUMERIC_PRIORITY)}


class _Withheld:
    """The value of a blocked answer: a surface shows :attr:`PolicyOutcome.notice` instead."""

    _instance: _Withheld | None = None

    def __new__(cls) -> _Withheld:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "WITHHELD"

    def __bool__(self) -> bool:
        return False


WITHHELD = _Withheld()


def placeholder(detector: str, n: int) -> str:
    return PLACEHOLDER.format(detector=detector, n=n)


@dataclass(frozen=True)
class PolicyOutcome:
    """What applying a policy to one answer gave.

    ``value``: the filtered answer (the input itself when nothing was replaced), or :data:`WITHHELD`.
    ``action``: the strongest action taken — ``"block"``, ``"redact"``, ``"flag"`` — or None when
    nothing was found (or the policy does not apply to the surface). ``findings``: occurrences per
    detector, in the policy's order; counts only. ``timed_out``: custom detectors that ran out of
    their time budget on this answer (each also counts one finding).
    """

    value: Any
    action: str | None = None
    findings: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    timed_out: tuple[str, ...] = ()

    @property
    def blocked(self) -> bool:
        return self.action == BLOCK

    @property
    def touched(self) -> bool:
        """Did the policy find anything in this answer (so the result says so)?"""
        return bool(self.findings)

    @property
    def summary(self) -> dict[str, Any] | None:
        """The result's ``data_policy`` field — ``{"action", "findings"}`` — or None if untouched."""
        if not self.findings:
            return None
        return {"action": self.action, "findings": dict(self.findings)}

    @property
    def notice(self) -> str | None:
        """The text a surface shows instead of a blocked answer (None unless blocked)."""
        if not self.blocked:
            return None
        return (
            "This answer was withheld by the workspace's data policy (detectors: "
            + ", ".join(self.findings)
            + ")."
        )


# --- segments ---------------------------------------------------------------------------------------
def _collect(value: Any, texts: list[str], integers: list[int]) -> None:
    if isinstance(value, str):
        texts.append(value)
    elif value is None or isinstance(value, bool | float):
        return
    elif isinstance(value, int):
        if abs(value) >= _INT_MIN_SCANNED:
            integers.append(len(texts))
            texts.append(str(value))
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError("object keys must be strings")
            texts.append(key)
            _collect(item, texts, integers)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, texts, integers)
    else:
        raise TypeError(f"not a JSON value: {type(value).__name__}")


def _rebuild(value: Any, texts: Iterator[str]) -> Any:
    if isinstance(value, str):
        return next(texts)
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        if abs(value) >= _INT_MIN_SCANNED:
            text = next(texts)
            return value if text == str(value) else text
        return value
    if isinstance(value, dict):
        result: dict[str, Any] = {}
        for item in value.values():
            new_key = next(texts)
            if new_key in result:
                suffix = 2
                while f"{new_key}~{suffix}" in result:
                    suffix += 1
                new_key = f"{new_key}~{suffix}"
            result[new_key] = _rebuild(item, texts)
        return result
    return [_rebuild(item, texts) for item in value]


@dataclass
class _Joined:
    """Segments of one answer joined into one text: where each begins, and its index in the answer."""

    texts: list[str]
    text: str
    starts: list[int]
    indexes: list[int]

    @classmethod
    def of(cls, texts: list[str], indexes: list[int] | None = None) -> _Joined:
        starts = []
        offset = 0
        for text in texts:
            starts.append(offset)
            offset += len(text) + len(SEPARATOR)
        return cls(
            texts=texts,
            text=SEPARATOR.join(texts),
            starts=starts,
            indexes=list(range(len(texts))) if indexes is None else indexes,
        )

    def segment_of(self, position: int) -> int:
        return bisect.bisect_right(self.starts, position) - 1

    def within_one(self, start: int, end: int) -> bool:
        index = self.segment_of(start)
        return end <= self.starts[index] + len(self.texts[index])


# --- custom detectors -------------------------------------------------------------------------------
def _scan_custom(detector: CustomDetector, joined: _Joined, deadline: float) -> list[Finding]:
    """Findings of one custom detector; raises TimeoutError when the shared deadline passes."""
    found: list[Finding] = []
    compiled = detector.compiled

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left

    def scan_segment(index: int) -> None:
        start = joined.starts[index]
        segment = joined.texts[index]
        for match in compiled.finditer(segment, timeout=remaining()):
            if match.end() > match.start():
                found.append(
                    Finding(start + match.start(), start + match.end(), detector.name, match.group())
                )

    if detector.per_string:
        for index in range(len(joined.texts)):
            scan_segment(index)
        return found
    rescan: set[int] = set()
    for match in compiled.finditer(joined.text, timeout=remaining()):
        if match.end() == match.start():
            continue
        if joined.within_one(match.start(), match.end()):
            found.append(Finding(match.start(), match.end(), detector.name, match.group()))
        else:
            # A match across two strings is no match; it may hide one inside a string: look again there.
            rescan.update(range(joined.segment_of(match.start()), joined.segment_of(match.end() - 1) + 1))
    for index in sorted(rescan):
        seen = {(f.start, f.end) for f in found}
        before = len(found)
        scan_segment(index)
        found[before:] = [f for f in found[before:] if (f.start, f.end) not in seen]
    return found


# --- resolving findings -----------------------------------------------------------------------------
def _resolve(findings: list[Finding]) -> list[Finding]:
    """Drop findings that are another finding read twice: a finding overlapping an earlier (or
    longer) one of the same detector (a bearer header around a JWT, a phrase inside a hidden
    comment), anything inside a secret (a JWT's parts, an email in a credentialed URL), and a
    number-shaped finding overlapping a higher-priority number-shaped one (a card's digits are not
    also a phone number)."""
    if len(findings) < 2:
        return findings
    findings = sorted(findings, key=lambda f: (f.start, -f.end))
    kept_end: dict[str, int] = {}
    distinct = []
    for finding in findings:
        if finding.start < kept_end.get(finding.detector, -1):
            continue
        kept_end[finding.detector] = finding.end
        distinct.append(finding)
    secrets = [(f.start, f.end) for f in distinct if f.detector == SECRETS]
    numeric = sorted(
        (f for f in distinct if f.detector in _NUMERIC_RANK), key=lambda f: _NUMERIC_RANK[f.detector]
    )
    dropped: set[int] = set()
    for i, finding in enumerate(numeric):
        if id(finding) in dropped:
            continue
        for other in numeric[i + 1 :]:
            if other.detector != finding.detector and other.start < finding.end and finding.start < other.end:
                dropped.add(id(other))
    result = []
    for finding in distinct:
        if id(finding) in dropped:
            continue
        if finding.detector != SECRETS and any(
            start <= finding.start and finding.end <= end for start, end in secrets
        ):
            continue
        result.append(finding)
    return result


def _redactions(joined: _Joined, spans: list[Finding]) -> list[tuple[int, int, int, str, str]]:
    """Redacted spans of one joined text, overlaps merged, as (answer index, start, end, detector,
    key) with start and end within that segment."""
    spans = sorted(spans, key=lambda f: (f.start, -f.end))
    merged: list[list[Any]] = []  # [start, end, detector, key]
    for finding in spans:
        if merged and finding.start < merged[-1][1]:
            if finding.end > merged[-1][1]:
                merged[-1][1] = finding.end
                merged[-1][3] = joined.text[merged[-1][0] : finding.end]
            continue
        merged.append([finding.start, finding.end, finding.detector, finding.key])
    result = []
    for start, end, detector, key in merged:
        segment = joined.segment_of(start)
        base = joined.starts[segment]
        result.append((joined.indexes[segment], start - base, end - base, detector, key))
    return result


def _redacted_texts(texts: list[str], redactions: list[tuple[int, int, int, str, str]]) -> list[str]:
    """``texts`` with each redaction replaced by its numbered placeholder; numbers count distinct keys
    per detector in order of first appearance in the answer."""
    redactions.sort()
    numbers: dict[str, dict[str, int]] = {}
    by_segment: dict[int, list[tuple[int, int, str]]] = {}
    for index, start, end, detector, key in redactions:
        seen = numbers.setdefault(detector, {})
        n = seen.setdefault(key, len(seen) + 1)
        by_segment.setdefault(index, []).append((start, end, placeholder(detector, n)))
    texts = list(texts)
    for index, replacements in by_segment.items():
        text = texts[index]
        parts = []
        cursor = 0
        for start, end, replacement in replacements:
            parts.append(text[cursor:start])
            parts.append(replacement)
            cursor = end
        parts.append(text[cursor:])
        texts[index] = "".join(parts)
    return texts


def _counts(policy: DataPolicy, weighted: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Occurrences per detector, in the policy's order, from (detector, times its string occurs)."""
    counts: dict[str, int] = {}
    for detector, times in weighted:
        counts[detector] = counts.get(detector, 0) + times
    return {name: counts[name] for name in policy.names if name in counts}


# Integers are read by these only: a JSON number is an identifier, an amount or a timestamp far more
# often than a phone number (which loses its "+" and leading zeros as a number); a card number or an
# identity number keeps its checksum whatever its type.
_INTEGER_DETECTORS = (PAYMENT_CARD, CN_RESIDENT_ID)


def _scan(
    policy: DataPolicy, joined: _Joined, own_hosts: Iterable[str], *, integers: bool = False
) -> tuple[list[Finding], list[str]]:
    """Every finding of the policy's detectors in ``joined``, and the custom detectors that timed out."""
    scope = Scope(own_hosts=tuple(host.lower().rstrip(".") for host in own_hosts))
    names = [name for name in policy.detectors if not integers or name in _INTEGER_DETECTORS]
    findings = scan(joined.text, scope, names)
    timed_out: list[str] = []
    if policy.custom:
        deadline = time.monotonic() + CUSTOM_TIME_BUDGET_SECONDS
        for detector in policy.custom:
            try:
                findings.extend(_scan_custom(detector, joined, deadline))
            except TimeoutError:
                timed_out.append(detector.name)
    return [f for f in _resolve(findings) if joined.within_one(f.start, f.end)], timed_out


def data_policy_findings(*, policy: DataPolicy, text: str, own_hosts: Iterable[str] = ()) -> list[Finding]:
    """The findings of ``policy``'s detectors in one text, with their spans, in text order.

    For the evaluation command and tests, which must know *where* a value was found; surfaces call
    :func:`data_policy_apply`, whose outcome never carries a found value.
    """
    findings, _ = _scan(policy, _Joined.of([text]), own_hosts)
    return sorted(findings, key=lambda f: (f.start, -f.end))


# --- the service ------------------------------------------------------------------------------------
def data_policy_apply(
    *, policy: DataPolicy | None, value: Any, surface: str, own_hosts: Iterable[str] = ()
) -> PolicyOutcome:
    """Apply ``policy`` to one agent-facing answer ``value`` (a string or a JSON value) on ``surface``
    (``"tool_results"`` or ``"knowledge"``). ``own_hosts`` are the host names of the business system
    the answer came from: ``external_media`` leaves links to them (and their subdomains) alone.

    No policy, or a policy whose ``apply_to`` leaves the surface out, gives the value untouched. Pure:
    no database, no network, no audit — the caller records the outcome's counts.
    """
    if surface not in SURFACES:
        raise ValueError(f"unknown surface {surface!r}")
    if policy is None or not policy.applies_to(surface):
        return PolicyOutcome(value=value)
    texts: list[str] = []
    integers: list[int] = []
    _collect(value, texts, integers)
    if not texts:
        return PolicyOutcome(value=value)
    # A JSON answer repeats itself (every object of a list has the same keys, statuses and currencies
    # recur): each distinct string is scanned once and counted as often as it occurs. Distinct
    # strings keep the order of their first occurrence, which is the order placeholders number in.
    numeric = set(integers)
    unique: dict[tuple[bool, str], int] = {}
    distinct: list[str] = []
    occurs: list[int] = []
    of_text: list[int] = []
    for index, text in enumerate(texts):
        key = (index in numeric, text)
        slot = unique.get(key)
        if slot is None:
            slot = unique[key] = len(distinct)
            distinct.append(text)
            occurs.append(0)
        occurs[slot] += 1
        of_text.append(slot)
    batches = []
    for are_integers in (False, True):
        slots = [slot for (is_integer, _), slot in unique.items() if is_integer == are_integers]
        if slots:
            batches.append((_Joined.of([distinct[slot] for slot in slots], slots), are_integers))
    scanned = []
    timed_out: list[str] = []
    weighted: list[tuple[str, int]] = []
    for joined, are_integers in batches:
        found, late = _scan(policy, joined, own_hosts, integers=are_integers)
        scanned.append((joined, found))
        timed_out.extend(name for name in late if name not in timed_out)
        weighted.extend((f.detector, occurs[joined.indexes[joined.segment_of(f.start)]]) for f in found)

    counts = _counts(policy, weighted)
    for name in timed_out:
        counts[name] = counts.get(name, 0) + 1
    if not counts:
        return PolicyOutcome(value=value)
    counts = {name: counts[name] for name in policy.names if name in counts}
    actions = {policy.action_for(name) for name in counts}
    # A custom detector that ran out of time could not say where its values are: it cannot redact,
    # so unless it only flags, the answer is withheld.
    if any(policy.action_for(name) != FLAG for name in timed_out):
        actions.add(BLOCK)
    if REDACT in actions and sum(counts.values()) > MAX_REDACTIONS:
        actions.add(BLOCK)
    action = max(actions, key=ACTION_STRENGTH.__getitem__)
    outcome = {"action": action, "findings": MappingProxyType(counts), "timed_out": tuple(timed_out)}
    if action == BLOCK:
        return PolicyOutcome(value=WITHHELD, **outcome)
    if action == FLAG:
        return PolicyOutcome(value=value, **outcome)
    redactions = []
    for joined, found in scanned:
        redactions.extend(_redactions(joined, [f for f in found if policy.action_for(f.detector) == REDACT]))
    redacted = _redacted_texts(distinct, redactions)
    if isinstance(value, str):
        return PolicyOutcome(value=redacted[0], **outcome)
    return PolicyOutcome(value=_rebuild(value, (redacted[slot] for slot in of_text)), **outcome)
