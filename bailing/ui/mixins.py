"""Access rules shared by every console view.

Anonymous visitors are sent to the login page (with ``next``), signed-in users without the page's
model permission get a 403 page in the console layout. Permissions are Django model permissions
grouped into roles (``bailing.roles``); a view names the permission it needs, never a role.
"""

from __future__ import annotations

from django.contrib.auth.mixins import PermissionRequiredMixin
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers

# ``http_method_names`` of pages that only show data: a POST is a 405, not a silent GET.
READ_ONLY = ["get", "head", "options"]


class ConsolePermissionMixin(PermissionRequiredMixin):
    """Login required, then ``permission_required`` (a string or tuple; ``None`` = any signed-in user).

    Django's own mixin already separates anonymous (redirect) from signed-in (403); this one renders
    the 403 inside the console layout so an operator keeps the navigation they are allowed to use.
    """

    permission_required: str | tuple[str, ...] | None = None

    def get_permission_required(self):
        if self.permission_required is None:
            return ()
        if isinstance(self.permission_required, str):
            return (self.permission_required,)
        return tuple(self.permission_required)

    def has_permission(self):
        user = self.request.user
        return user.is_authenticated and user.has_perms(self.get_permission_required())

    def handle_no_permission(self):
        if not self.request.user.is_authenticated:
            return super().handle_no_permission()
        return render(self.request, "console/forbidden.html", status=403)


class NoStoreMixin:
    """Console pages show operational data and secrets-adjacent state: never cache them anywhere."""

    def dispatch(self, request, *args, **kwargs):
        response = super().dispatch(request, *args, **kwargs)
        add_never_cache_headers(response)
        return response


class ConsoleView(NoStoreMixin, ConsolePermissionMixin):
    """Base mixin of every console page (order matters: the permission check runs inside no-store)."""
