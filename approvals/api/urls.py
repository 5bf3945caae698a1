"""Business endpoints of the operators' app (``/approvals/``)."""

from django.urls import path

from approvals.api.views import ApprovalDecisionApi, ApprovalStateApi

urlpatterns = [
    path("<segment:approval_id>", ApprovalStateApi.as_view(), name="approval-state"),
    path("<segment:approval_id>/decision", ApprovalDecisionApi.as_view(), name="approval-decision"),
]
