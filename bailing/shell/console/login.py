"""Console sign-in with failure throttling and audit (docs/protocol.md "Rate limits and throttles").

Two limits, both over the last ten minutes, answer 429 without checking the password:

- five failed sign-ins for one (IP address, username) lock that pair out;
- ``BAILING_LOGIN_IP_MAX_FAILURES`` (default 20; 0 turns this limit off) failed sign-ins from one IP
  address, whatever the usernames, lock that address out.

The username is counted as authentication reads it: Django's ``UsernameField`` strips it and applies
NFKC, so ``" alice"``, ``"alice\\xa0"`` and full-width ``ａｌｉｃｅ`` all sign in as ``alice`` and therefore
all count against ``alice``. The throttle normalizes with that very field. Failures and successes are
audit events (``console.login.failed`` / ``console.login.succeeded``) naming the normalized username,
which is also where the throttle counts from, so staff reviewing the audit history see exactly what
the throttle saw. A transaction-scoped advisory lock per IP address makes both counts exact under
parallel attempts.
"""

from __future__ import annotations

import re
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.db import connection, transaction
from django.utils import timezone

from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from bailing.shell.selectors import login_failures_since

MAX_FAILURES = 5
WINDOW = timedelta(minutes=10)
_USERNAME_MAX = 150
# Control characters cannot be stored (PostgreSQL text refuses NUL) and never name a user: the audit
# shows them as U+FFFD.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class ConsoleLoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def _username(self, form) -> str:
        """The username as the form hands it to authentication (stripped, NFKC), fit for storage."""
        username = form.fields["username"].to_python(form["username"].data)
        return _CONTROL.sub("\ufffd", username)[:_USERNAME_MAX]

    def post(self, request, *args, **kwargs):
        username = self._username(self.get_form())
        ip = request.META.get("REMOTE_ADDR") or ""
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"console-login/{ip}"])
            failures = login_failures_since(ip=ip, username=username, since=timezone.now() - WINDOW)
            ip_limit = settings.BAILING_LOGIN_IP_MAX_FAILURES
            if failures.for_username >= MAX_FAILURES or (ip_limit and failures.for_ip >= ip_limit):
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
