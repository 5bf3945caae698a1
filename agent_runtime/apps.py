from django.apps import AppConfig


class AgentRuntimeConfig(AppConfig):
    name = "agent_runtime"
    verbose_name = "Agent runtime"

    def ready(self) -> None:
        import agent_runtime.budgets  # noqa: F401 - declares this app's budgets (bailing.budgets)
        from agent_runtime.services.config_apply import config_sections_register_builtin

        # Clients, tool providers and routes as sections of the config document; apps above this one
        # add theirs (knowledge bases) the same way.
        config_sections_register_builtin()

        from agent_runtime.metrics import invocation_metrics
        from bailing.metrics import metrics_collector_register

        metrics_collector_register("agent_runtime_invocations", invocation_metrics)

        from agent_runtime.roles import ROLE_PERMISSIONS
        from bailing.roles import role_permissions_register

        role_permissions_register("agent_runtime", ROLE_PERMISSIONS)

        # The agent surfaces: the Agent API and Agent Auth v1, whose token answers are never cached
        # (RFC 6749 §5.1).
        from bailing.api.surfaces import api_prefix_register

        api_prefix_register("/agent-api/")
        api_prefix_register("/agent-auth/", pragma_no_cache=["/agent-auth/v1/token"])
