from django.apps import AppConfig


class AgentRuntimeConfig(AppConfig):
    name = "agent_runtime"
    verbose_name = "Agent runtime"
