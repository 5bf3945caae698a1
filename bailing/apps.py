from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.urls import register_converter


class BailingConfig(AppConfig):
    name = "bailing"
    verbose_name = "Bailing Hub"

    def ready(self) -> None:
        from bailing.converters import CONVERTERS
        from bailing.roles import ADMINISTRATOR, role_permissions_register, roles_sync_after_migrate

        # <segment:…> / <segments:…>, used by every path parameter; registered before any URLconf loads.
        for name, converter in CONVERTERS.items():
            register_converter(converter, name)

        # Roles are plumbing (groups + model permissions), not domain logic: syncing them after
        # every migrate (and every test flush) keeps them complete as apps add permissions.
        post_migrate.connect(roles_sync_after_migrate, dispatch_uid="bailing.roles_sync")
        # Console users and their roles: the shell's Users page, administrators only. Each app grants
        # its own permissions from its ready().
        role_permissions_register("bailing", {ADMINISTRATOR: ["auth.change_user"]})

        from bailing.audit.metrics import audit_tail_metrics
        from bailing.metrics import metrics_collector_register

        metrics_collector_register("audit_tail", audit_tail_metrics)
