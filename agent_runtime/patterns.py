"""Identifier patterns shared by config validation and the agent surfaces (docs/protocol.md "Identifiers")."""

RESOURCE_NAME = r"[a-z0-9][a-z0-9_-]{1,63}"
# Routes may be stored with the wider config pattern, but agent surfaces accept only RESOURCE_NAME.
ROUTE_KEY_CONFIG = r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}"
AGENT_ROUTE = RESOURCE_NAME
RESERVED_ROUTE_KEYS = frozenset({"auto"})
