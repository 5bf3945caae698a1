"""Configuration as code: validating clients, tool providers and routes, and the effective view of a
route (defaults applied when read).

By concern: :mod:`.fields` (typed readers and :class:`ConfigError`), :mod:`.clients`, :mod:`.routes`,
:mod:`.providers` (one validator per section), :mod:`.defaults` (defaults and :func:`route_effective`)
and :mod:`.document` (the section registry and :func:`validate_document`). Knowledge bases are
validated by ``knowledge.config``, which registers its section here. This package exports the names
other modules use.
"""

from agent_runtime.config.clients import (
    CLIENT_DEFAULT_RATE_LIMIT,
    check_clients_config,
    validate_client_config,
)
from agent_runtime.config.defaults import (
    AGENT_CLIENT_DEFAULTS,
    AUDIENCE_DEFAULTS,
    FUSION_DEFAULTS,
    KNOWLEDGE_DEFAULTS,
    MEMORY_DEFAULTS,
    RETRIEVAL_DEFAULTS,
    TOOLS_DEFAULTS,
    route_effective,
)
from agent_runtime.config.document import (
    ConfigSection,
    config_section_register,
    config_sections,
    validate_document,
)
from agent_runtime.config.fields import ConfigError
from agent_runtime.config.providers import (
    PROVIDER_SPEC_MAX_BYTES,
    origin_path_problem,
    validate_tool_provider_config,
)
from agent_runtime.config.routes import ROUTE_FIELDS, validate_route_config

__all__ = [
    "AGENT_CLIENT_DEFAULTS",
    "AUDIENCE_DEFAULTS",
    "CLIENT_DEFAULT_RATE_LIMIT",
    "FUSION_DEFAULTS",
    "KNOWLEDGE_DEFAULTS",
    "MEMORY_DEFAULTS",
    "PROVIDER_SPEC_MAX_BYTES",
    "RETRIEVAL_DEFAULTS",
    "ROUTE_FIELDS",
    "TOOLS_DEFAULTS",
    "ConfigError",
    "ConfigSection",
    "check_clients_config",
    "config_section_register",
    "config_sections",
    "origin_path_problem",
    "route_effective",
    "validate_client_config",
    "validate_document",
    "validate_route_config",
    "validate_tool_provider_config",
]
