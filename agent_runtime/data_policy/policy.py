"""A workspace's data policy as a frozen value, and the custom detectors' bounded regular expressions.

The route stores its ``data_policy`` block as validated by ``agent_runtime.config`` (exactly as
written); :func:`data_policy_from_config` turns that block into a :class:`DataPolicy` with the
defaults applied and every custom pattern compiled, once per process for a given block.

Custom patterns use the ``regex`` module rather than ``re`` for one reason: its matching takes a
timeout, so a pattern that backtracks catastrophically on some answer costs at most
:data:`CUSTOM_TIME_BUDGET_SECONDS` of a request instead of stalling it. Config validation also
refuses what can be refused up front: patterns over :data:`CUSTOM_PATTERN_MAX_CHARS`, patterns that
do not compile, patterns that match the empty string, and patterns already too slow on a few
adversarial probes.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import regex

from agent_runtime.data_policy.detectors import BUILTIN_DETECTORS

REDACT = "redact"
BLOCK = "block"
FLAG = "flag"
ACTIONS = (REDACT, BLOCK, FLAG)
# How strong an action is: an answer with findings of several actions gets the strongest.
ACTION_STRENGTH = {FLAG: 1, REDACT: 2, BLOCK: 3}
TOOL_RESULTS = "tool_results"
KNOWLEDGE = "knowledge"
SURFACES = (TOOL_RESULTS, KNOWLEDGE)
DEFAULT_ACTION = REDACT

CUSTOM_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")
CUSTOM_MAX_DETECTORS = 20
CUSTOM_PATTERN_MAX_CHARS = 512
# Wall time all custom detectors together may spend on one answer (one data_policy_apply call).
CUSTOM_TIME_BUDGET_SECONDS = 0.05
# Config-time probe: a pattern that needs this long on one of the probes below is refused.
_PROBE_TIMEOUT_SECONDS = 0.05
_PROBES = (
    "a" * 4096 + "!",
    "0" * 4096 + "x",
    " " * 4096 + "x",
    "aA0-_.@ \n" * 512,
    ("ab" * 2048) + "\x00",
)
# Where a custom pattern's match could depend on what lies outside the string it is matched in
# (anchors, lookaround): such patterns run on each string by itself (engine). Word boundaries need
# not: the separator between strings is not a word character, as the ends of a string are not.
_CONTEXT_SENSITIVE = ("^", "$", "\\A", "\\Z", "\\z", "\\G", "(?=", "(?!", "(?<")


class CustomPatternError(ValueError):
    """A custom detector's pattern is refused; ``reason`` is short fixed text (never the pattern)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def custom_pattern_compile(pattern: str) -> regex.Pattern:
    """Compile a custom detector's pattern, or raise :class:`CustomPatternError`."""
    if not pattern:
        raise CustomPatternError("must not be empty")
    if len(pattern) > CUSTOM_PATTERN_MAX_CHARS:
        raise CustomPatternError(f"must be at most {CUSTOM_PATTERN_MAX_CHARS} characters")
    try:
        compiled = regex.compile(pattern)
    except (regex.error, ValueError, OverflowError, RecursionError):
        raise CustomPatternError("is not a valid regular expression") from None
    try:
        if compiled.search("", timeout=_PROBE_TIMEOUT_SECONDS) is not None:
            raise CustomPatternError("must not match the empty string")
        for probe in _PROBES:
            for _ in compiled.finditer(probe, timeout=_PROBE_TIMEOUT_SECONDS):
                pass
    except TimeoutError:
        raise CustomPatternError("is too slow (it backtracks too much on long input)") from None
    return compiled


@dataclass(frozen=True)
class CustomDetector:
    """A detector a workspace adds: a name and a regular expression (compiled with ``regex``)."""

    name: str
    pattern: str
    compiled: regex.Pattern = field(compare=False, repr=False)
    # True when the pattern may see past the string it runs in (anchors, lookaround).
    per_string: bool = field(compare=False, repr=False, default=False)


@dataclass(frozen=True)
class DataPolicy:
    """What a workspace filters out of what its agents see (docs/data-policy.md).

    ``detectors`` are the built-in detectors switched on, in configuration order; ``custom`` the
    workspace's own. ``action`` applies to every detector not named in ``actions``. ``apply_to``
    names the surfaces filtered: ``tool_results`` and/or ``knowledge``.
    """

    detectors: tuple[str, ...]
    action: str = DEFAULT_ACTION
    actions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    custom: tuple[CustomDetector, ...] = ()
    apply_to: frozenset[str] = frozenset(SURFACES)

    def __post_init__(self) -> None:
        unknown = [name for name in self.detectors if name not in BUILTIN_DETECTORS]
        if unknown:
            raise ValueError(f"unknown detectors: {', '.join(unknown)}")
        if self.action not in ACTIONS or any(action not in ACTIONS for action in self.actions.values()):
            raise ValueError("actions must be redact, block or flag")
        if not self.apply_to <= set(SURFACES):
            raise ValueError("apply_to names an unknown surface")
        if not isinstance(self.actions, MappingProxyType):
            object.__setattr__(self, "actions", MappingProxyType(dict(self.actions)))

    @property
    def names(self) -> tuple[str, ...]:
        """Every detector of the policy, built-in then custom."""
        return (*self.detectors, *(detector.name for detector in self.custom))

    def action_for(self, detector: str) -> str:
        return self.actions.get(detector, self.action)

    def applies_to(self, surface: str) -> bool:
        return surface in self.apply_to


def custom_detector(name: str, pattern: str) -> CustomDetector:
    """A :class:`CustomDetector` for ``pattern`` (raises :class:`CustomPatternError`)."""
    compiled = custom_pattern_compile(pattern)
    return CustomDetector(
        name=name,
        pattern=pattern,
        compiled=compiled,
        per_string=any(marker in pattern for marker in _CONTEXT_SENSITIVE),
    )


def data_policy_from_config(config: Mapping[str, Any] | None) -> DataPolicy | None:
    """The policy of a stored (validated) ``data_policy`` block; None for no block or ``{}``."""
    if not config:
        return None
    return _from_canonical(json.dumps(config, sort_keys=True, separators=(",", ":")))


@functools.lru_cache(maxsize=256)
def _from_canonical(text: str) -> DataPolicy:
    # Cached by the block's canonical JSON: a route's custom patterns compile once per process.
    config = json.loads(text)
    return DataPolicy(
        detectors=tuple(config.get("detectors", ())),
        action=config.get("action", DEFAULT_ACTION),
        actions=MappingProxyType(dict(config.get("actions", {}))),
        custom=tuple(custom_detector(item["name"], item["pattern"]) for item in config.get("custom", ())),
        apply_to=frozenset(config.get("apply_to", SURFACES)),
    )
