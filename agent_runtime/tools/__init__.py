"""Business tools compiled from provider OpenAPI specs with ACC (``x-agent-capability``) declarations.

Pure Python, no database: :mod:`.compiler` turns a spec into :class:`CompiledTool` values and
warnings, :mod:`.acc` validates declarations and evaluates approval rules, :mod:`.guidance` builds
the bounded model-facing texts, :mod:`.projection` gives the agent-visible ``tool`` object and the
hashes behind capability revisions and execution fingerprints.
"""

from agent_runtime.tools.acc import ACC_SCHEMA, ApprovalConditionError
from agent_runtime.tools.approval import approval_required_for
from agent_runtime.tools.compiler import (
    ApprovalPolicy,
    CompiledTool,
    CompileResult,
    CompileWarning,
    SpecParseError,
    compile_spec,
    compile_spec_text,
    parse_spec_text,
)
from agent_runtime.tools.guidance import (
    DESCRIPTION_MAX_CODE_POINTS,
    GUIDANCE_MAX_BYTES,
    GUIDANCE_MAX_CHARS,
    UsageGuidance,
)
from agent_runtime.tools.projection import (
    capability_material,
    execution_contract,
    execution_fingerprint,
    guidance_digest,
    projection_digest,
    public_projection,
    usage_guidance_payload,
)

__all__ = [
    "ACC_SCHEMA",
    "DESCRIPTION_MAX_CODE_POINTS",
    "GUIDANCE_MAX_BYTES",
    "GUIDANCE_MAX_CHARS",
    "ApprovalConditionError",
    "ApprovalPolicy",
    "CompileResult",
    "CompileWarning",
    "CompiledTool",
    "SpecParseError",
    "UsageGuidance",
    "approval_required_for",
    "capability_material",
    "compile_spec",
    "compile_spec_text",
    "execution_contract",
    "execution_fingerprint",
    "guidance_digest",
    "parse_spec_text",
    "projection_digest",
    "public_projection",
    "usage_guidance_payload",
]
