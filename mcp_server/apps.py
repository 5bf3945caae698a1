from django.apps import AppConfig


class McpServerConfig(AppConfig):
    name = "mcp_server"
    label = "mcp_server"
    verbose_name = "MCP surface"

    def ready(self) -> None:
        import mcp_server.budgets  # noqa: F401 - declares this app's budgets (bailing.budgets)
        from bailing.api.surfaces import api_prefix_register

        api_prefix_register("/mcp/")
