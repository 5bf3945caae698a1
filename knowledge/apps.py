from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self) -> None:
        import knowledge.budgets  # noqa: F401 - declares this app's budgets (bailing.budgets)
        from agent_runtime.config import ConfigSection, config_section_register
        from agent_runtime.ports import turn_knowledge_register
        from knowledge.config import validate_knowledge_base_config
        from knowledge.models import KnowledgeBase
        from knowledge.services.bases import (
            knowledge_base_check_locked,
            knowledge_base_diff,
            knowledge_base_upsert,
        )
        from knowledge.services.turns import TurnKnowledgeService

        # The agent runtime knows knowledge only through these two ports: the config document's
        # ``knowledge_bases`` section (between clients, which write to them, and routes, which name
        # them) and the knowledge a turn delivers.
        config_section_register(
            ConfigSection(
                name="knowledge_bases",
                kind="knowledge_base",
                key_field="kb_id",
                order=30,
                validate=validate_knowledge_base_config,
                model=KnowledgeBase,
                upsert=knowledge_base_upsert,
                diff=knowledge_base_diff,
                check_dry_run=knowledge_base_check_locked,
            )
        )
        turn_knowledge_register(TurnKnowledgeService())

        # The bearer statement reads the versions of a route's knowledge bases with the route, so
        # the per-process knowledge-scope cache needs no query of its own.
        from agent_runtime.identity import route_dependency_register
        from knowledge.selectors.scope import KNOWLEDGE_DEPENDENCY_SQL

        route_dependency_register("knowledge", KNOWLEDGE_DEPENDENCY_SQL)

        # What /health/ready adds for knowledge: the embedding providers the bases use, and a worker.
        from bailing.health import readiness_check_register
        from knowledge.readiness import embedding_check
        from knowledge.services.heartbeat import worker_heartbeat_check

        readiness_check_register("embedding", embedding_check)
        readiness_check_register("knowledge_worker", worker_heartbeat_check)

        from bailing.metrics import metrics_collector_register
        from knowledge.metrics import queue_metrics

        metrics_collector_register("knowledge_queue", queue_metrics)

        # The console's workspace page (an agent runtime page) shows the bases a route names.
        from agent_runtime.ports import workspace_section_register
        from knowledge.console.workspace import workspace_knowledge_section

        workspace_section_register("knowledge_bases", workspace_knowledge_section)

        from bailing.roles import role_permissions_register
        from knowledge.roles import ROLE_PERMISSIONS

        role_permissions_register("knowledge", ROLE_PERMISSIONS)

        # The push API for business systems (the agent knowledge endpoints live under /agent-api/).
        from bailing.api.surfaces import api_prefix_register

        api_prefix_register("/kb/")
