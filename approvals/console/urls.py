"""Console pages of the operators' app (included into the ``console`` namespace by the shell)."""

from django.urls import path

from approvals.console import approvals, invocations
from approvals.console import views as audit

urlpatterns = [
    path("approvals/", approvals.ApprovalListView.as_view(), name="approval_list"),
    path("approvals/<int:pk>/", approvals.ApprovalDetailView.as_view(), name="approval_detail"),
    path("approvals/<int:pk>/args.json", approvals.ApprovalArgsView.as_view(), name="approval_args"),
    path("approvals/<int:pk>/decide/", approvals.ApprovalDecideView.as_view(), name="approval_decide"),
    path(
        "approvals/<int:pk>/notifications/<int:notification_id>/resend/",
        approvals.NotificationResendView.as_view(),
        name="approval_notification_resend",
    ),
    path("invocations/", invocations.InvocationListView.as_view(), name="invocation_list"),
    path("invocations/<uuid:job_id>/", invocations.InvocationDetailView.as_view(), name="invocation_detail"),
    path(
        "invocations/<uuid:job_id>/resolve/",
        invocations.InvocationResolveView.as_view(),
        name="invocation_resolve",
    ),
    path(
        "invocations/<uuid:job_id>/answer/",
        invocations.InvocationAnswerRevealView.as_view(),
        name="invocation_answer_reveal",
    ),
    path("audit/", audit.AuditListView.as_view(), name="audit_list"),
    path("audit/verify/", audit.AuditVerifyView.as_view(), name="audit_verify"),
    path("audit/<int:pk>/", audit.AuditDetailView.as_view(), name="audit_detail"),
]
