"""The data policy: what a workspace filters out of what its agents *see* (issue 23,
docs/data-policy.md).

The public surface other apps use:

* :class:`DataPolicy` — a frozen policy value; :func:`data_policy_from_config` makes one from a
  route's stored ``data_policy`` block (``agent_runtime.selectors.route_data_policy`` reads it
  from a route);
* :func:`data_policy_apply` — the one service that filters an answer (a string or a JSON value)
  and returns a :class:`PolicyOutcome`: the filtered value or :data:`WITHHELD`, the action taken,
  the findings per detector (counts only), the ``data_policy`` result field (``summary``) and the
  notice of a withheld answer (``notice``);
* the names: :data:`BUILTIN_DETECTORS`, :data:`ACTIONS`, :data:`SURFACES`, :data:`PLACEHOLDER`.

Modules: :mod:`.detectors` (the built-in detectors), :mod:`.policy` (the value, custom patterns),
:mod:`.engine` (applying it), :mod:`.evalset` (the labelled evaluation set).
"""

from agent_runtime.data_policy.detectors import BUILTIN_DETECTORS
from agent_runtime.data_policy.engine import (
    MAX_REDACTIONS,
    PLACEHOLDER,
    WITHHELD,
    PolicyOutcome,
    data_policy_apply,
    data_policy_findings,
    placeholder,
)
from agent_runtime.data_policy.policy import (
    ACTIONS,
    BLOCK,
    CUSTOM_MAX_DETECTORS,
    CUSTOM_NAME_RE,
    CUSTOM_PATTERN_MAX_CHARS,
    CUSTOM_TIME_BUDGET_SECONDS,
    FLAG,
    KNOWLEDGE,
    REDACT,
    SURFACES,
    TOOL_RESULTS,
    CustomDetector,
    CustomPatternError,
    DataPolicy,
    custom_detector,
    custom_pattern_compile,
    data_policy_from_config,
)

__all__ = [
    "ACTIONS",
    "BLOCK",
    "BUILTIN_DETECTORS",
    "CUSTOM_MAX_DETECTORS",
    "CUSTOM_NAME_RE",
    "CUSTOM_PATTERN_MAX_CHARS",
    "CUSTOM_TIME_BUDGET_SECONDS",
    "FLAG",
    "KNOWLEDGE",
    "MAX_REDACTIONS",
    "PLACEHOLDER",
    "REDACT",
    "SURFACES",
    "TOOL_RESULTS",
    "WITHHELD",
    "CustomDetector",
    "CustomPatternError",
    "DataPolicy",
    "PolicyOutcome",
    "custom_detector",
    "custom_pattern_compile",
    "data_policy_apply",
    "data_policy_findings",
    "data_policy_from_config",
    "placeholder",
]
