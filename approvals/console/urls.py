"""Console pages of the operators' app (included into the ``console`` namespace by the shell)."""

from django.urls import path

from approvals.console import views as audit

urlpatterns = [
    path("audit/", audit.AuditListView.as_view(), name="audit_list"),
    path("audit/verify/", audit.AuditVerifyView.as_view(), name="audit_verify"),
    path("audit/<int:pk>/", audit.AuditDetailView.as_view(), name="audit_detail"),
]
