from django.apps import AppConfig


class McpServerConfig(AppConfig):
    name = "mcp_server"
    label = "mcp_server"
    verbose_name = "MCP surface"
