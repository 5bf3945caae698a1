"""Shared ORM models of the agent runtime: clients, routes (workspaces), Agent Auth v1, tool providers
and tools, conversations and runs.

``knowledge`` and ``approvals`` reference these by foreign key but keep their own logic. Secrets
(Client Tokens, authorization codes, access and refresh tokens) are stored only as SHA-256 hex
digests; the plaintext exists once, in the response that hands it out.
"""

from agent_runtime.models.auth import AgentAuthorization, AgentRefreshToken, AgentSession
from agent_runtime.models.clients import Client, ClientRateWindow
from agent_runtime.models.invocations import (
    ApprovalNotification,
    RateBucket,
    ToolApproval,
    ToolCallJournal,
    ToolInvocation,
)
from agent_runtime.models.oauth import OAuthClient
from agent_runtime.models.routes import Route
from agent_runtime.models.runs import AgentConversation, AgentRun, VisibleMessage
from agent_runtime.models.tools import ProviderTool, ToolProvider

__all__ = [
    "AgentAuthorization",
    "AgentConversation",
    "AgentRefreshToken",
    "AgentRun",
    "AgentSession",
    "ApprovalNotification",
    "Client",
    "ClientRateWindow",
    "OAuthClient",
    "ProviderTool",
    "RateBucket",
    "Route",
    "ToolApproval",
    "ToolCallJournal",
    "ToolInvocation",
    "ToolProvider",
    "VisibleMessage",
]
