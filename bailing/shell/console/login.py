"""Console sign-in with failure throttling and audit (docs/protocol.md "Rate limits and throttles").

Five failed sign-ins for one (IP address, username) within ten minutes lock that pair out for the
rest of the window: the form answers 429 without checking the password. Failures and successes are
audit events (``console.login.failed`` / ``console.login.succeeded``), which is also where the
throttle counts from, so staff reviewing the audit history see exactly what the throttle saw. A
transaction-scoped advisory lock per pair makes the count exact under parallel attempts.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import views as auth_views
from django.db import connection, transaction
from django.utils import timezone

from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from bailing.audit.models import AuditEvent

MAX_FAILURES = 5
WINDOW = timedelta(minutes=10)
_USERNAME_MAX = 150


class ConsoleLoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):
        username = str(request.POST.get("username", ""))[:_USERNAME_MAX]
        ip = request.META.get("REMOTE_ADDR") or ""
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))", [f"console-login/{ip}/{username}"]
                )
            failures = AuditEvent.objects.filter(
                action="console.login.failed",
                actor=username,
                data__ip=ip,
                created_at__gte=timezone.now() - WINDOW,
            ).count()
            if failures >= MAX_FAILURES:
                context = self.get_context_data(form=self.get_form(), throttled=True)
                return self.render_to_response(context, status=429)
            response = super().post(request, *args, **kwargs)
            succeeded = response.status_code in (301, 302) and request.user.is_authenticated
            audit_record(
                action="console.login.succeeded" if succeeded else "console.login.failed",
                actor=Actor("user", username),
                data={"ip": ip},
            )
        return response
