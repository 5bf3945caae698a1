"""Business endpoints of the operators' app (``/approvals/``)."""

from django.urls import path

from approvals.api.views import ApprovalDecisionApi

urlpatterns = [
    path("<segment:approval_id>/decision", ApprovalDecisionApi.as_view(), name="approval-decision"),
]
