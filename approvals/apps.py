from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals and audit"

    def ready(self) -> None:
        import approvals.budgets  # noqa: F401 - declares this app's budgets (bailing.budgets)
        from approvals.roles import ROLE_PERMISSIONS
        from bailing.roles import role_permissions_register

        role_permissions_register("approvals", ROLE_PERMISSIONS)

        # Business systems' decisions on approvals (POST /approvals/<id>/decision).
        from bailing.api.surfaces import api_prefix_register

        api_prefix_register("/approvals/")
