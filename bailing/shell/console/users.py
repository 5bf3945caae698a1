"""Console users (administrators only): list, create, set roles, reset a password, deactivate and
reactivate (each with a confirmation page).

Every change goes through ``bailing.shell.users`` (shared with ``manage.py bailing_user``), which
audits it. A generated password is shown once, in the response to the POST that set it (no-store),
never in a flash message or the session.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View
from django.views.generic import FormView, ListView

from bailing.audit.actor import Actor
from bailing.shell.selectors import user_get, user_list
from bailing.shell.users import (
    ROLES,
    UserError,
    password_generate,
    user_create,
    user_deactivate,
    user_deactivation_refusal,
    user_reactivate,
    user_roles,
    user_set_password,
    user_set_roles,
)
from bailing.ui import tables
from bailing.ui.confirm import Confirmation, confirm_page, is_confirmed, not_confirmed
from bailing.ui.mixins import ConsoleView
from bailing.ui.pages import PAGE_SIZE, error_page, or_404

PERMISSION = "auth.change_user"
ROLE_CHOICES = [(role, role) for role in ROLES]


class UserCreateForm(forms.Form):
    username = forms.CharField(max_length=150)
    roles = forms.MultipleChoiceField(
        choices=ROLE_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )
    password = forms.CharField(
        required=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="Leave empty to generate one, shown once on the next page.",
    )


class UserRolesForm(forms.Form):
    roles = forms.MultipleChoiceField(
        choices=ROLE_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )


class PasswordForm(forms.Form):
    password = forms.CharField(
        required=False,
        label="New password",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="Leave empty to generate one, shown once on the next page.",
    )


def _user_or_404(username):
    return or_404(user_get(username=username))


class UserListView(ConsoleView, ListView):
    permission_required = PERMISSION
    template_name = "console/user_list.html"
    paginate_by = PAGE_SIZE

    def get_queryset(self):
        return user_list()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        table = tables.Table(["Username", "Roles", "Status", "Last sign-in", "Created"], empty="No users.")
        for user in context["object_list"]:
            roles = sorted(g.name for g in user.group_list if g.name in ROLES)
            table.rows.append(
                [
                    tables.mono(user.username, href=reverse("console:user_detail", args=[user.username])),
                    tables.words(roles, empty="none"),
                    tables.badge("active" if user.is_active else "disabled"),
                    tables.time(user.last_login),
                    tables.time(user.date_joined),
                ]
            )
        context["table"] = table
        return context


class UserCreateView(ConsoleView, FormView):
    permission_required = PERMISSION
    template_name = "console/user_form.html"
    form_class = UserCreateForm

    def form_valid(self, form):
        password = form.cleaned_data["password"]
        generated = not password
        if generated:
            password = password_generate()
        try:
            user = user_create(
                username=form.cleaned_data["username"],
                roles=form.cleaned_data["roles"],
                password=password,
                actor=Actor.user(self.request.user),
            )
        except UserError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            return self.form_invalid(form)
        if generated:
            return render(self.request, "console/user_password.html", {"subject": user, "password": password})
        messages.success(self.request, f"User {user.username} created.")
        return redirect("console:user_detail", username=user.username)


class UserDetailView(ConsoleView, View):
    """The user's facts with the roles form (POST sets roles) and the way to reset the password."""

    permission_required = PERMISSION
    http_method_names = ["get", "post"]

    def _render(self, request, subject, roles_form, status=200, error_code=""):
        return render(
            request,
            "console/user_detail.html",
            {
                "subject": subject,
                "roles": user_roles(subject),
                "roles_form": roles_form,
                "error_code": error_code,
            },
            status=status,
        )

    def get(self, request, username):
        subject = _user_or_404(username)
        return self._render(request, subject, UserRolesForm(initial={"roles": user_roles(subject)}))

    def post(self, request, username):
        subject = _user_or_404(username)
        form = UserRolesForm(request.POST)
        if not form.is_valid():
            return self._render(request, subject, form, status=400)
        try:
            changed = user_set_roles(
                user=subject, roles=form.cleaned_data["roles"], actor=Actor.user(request.user)
            )
        except UserError as exc:
            # Show the roles as they still are (nothing changed), with the reason beside them.
            current = UserRolesForm({"roles": user_roles(subject)})
            current.is_valid()
            current.add_error("roles", exc.message)
            return self._render(request, subject, current, status=409, error_code=exc.code)
        if changed:
            messages.success(
                request, f"Roles of {subject.username} set: {', '.join(user_roles(subject)) or 'none'}."
            )
        else:
            messages.info(request, "The roles are unchanged.")
        return redirect("console:user_detail", username=subject.username)


def _password_confirmation(subject, form: PasswordForm) -> Confirmation:
    """The reset's confirmation page, with the (optional) new password field on it."""
    detail_url = reverse("console:user_detail", args=[subject.username])
    return Confirmation(
        title=f"Reset the password of {subject.username}?",
        action_url=reverse("console:user_password", args=[subject.username]),
        cancel_url=detail_url,
        button="Reset password",
        consequences=[
            f"The current password of {subject.username} stops working at once: every browser signed "
            f"in as {subject.username} is signed out on its next request.",
            "With the field left empty a new password is generated and shown once, on the next page; "
            "hand it over yourself.",
            "Roles, audit history and agent sessions stay as they are. The reset is audited (never "
            "the password).",
        ],
        facts=[("Username", subject.username), ("Roles", ", ".join(user_roles(subject)) or "none")],
        crumbs=[("Users", reverse("console:user_list")), (subject.username, detail_url)],
        form=form,
    )


class UserPasswordView(ConsoleView, View):
    """GET: the confirmation page, which carries the password field; POST (with the confirmation):
    set the password, or a generated one shown once."""

    permission_required = PERMISSION
    http_method_names = ["get", "post"]

    def get(self, request, username):
        subject = _user_or_404(username)
        return confirm_page(request, _password_confirmation(subject, PasswordForm()))

    def post(self, request, username):
        subject = _user_or_404(username)
        if not is_confirmed(request):
            return not_confirmed(request)
        form = PasswordForm(request.POST)
        form.is_valid()
        password = form.cleaned_data.get("password") or ""
        generated = not password
        if generated:
            password = password_generate()
        try:
            user_set_password(
                user=subject, password=password, actor=Actor.user(request.user), generated=generated
            )
        except UserError as exc:
            form.add_error("password", exc.message)
            return confirm_page(request, _password_confirmation(subject, form), status=400)
        if generated:
            return render(request, "console/user_password.html", {"subject": subject, "password": password})
        messages.success(request, f"Password of {subject.username} set.")
        return redirect("console:user_detail", username=subject.username)


def _refused(request, exc: UserError):
    """A refused deactivation: 409 with the service's stable code, nothing changed."""
    return error_page(
        request,
        status=409,
        title="Not deactivated",
        detail=f"{exc.message[:1].upper()}{exc.message[1:]}. Nothing was changed.",
        code=exc.code,
    )


def _confirm(request, subject, *, action: str, roles: str, consequences: list[str]):
    """The confirmation page (GET) of ``action`` (``deactivate`` or ``reactivate``) on ``subject``."""
    detail_url = reverse("console:user_detail", args=[subject.username])
    verb = action.capitalize()
    return confirm_page(
        request,
        Confirmation(
            title=f"{verb} user {subject.username}?",
            action_url=reverse(f"console:user_{action}", args=[subject.username]),
            cancel_url=detail_url,
            button=f"{verb} user",
            consequences=consequences,
            facts=[("Username", subject.username), ("Roles", roles)],
            crumbs=[("Users", reverse("console:user_list")), (subject.username, detail_url)],
        ),
    )


class UserDeactivateView(ConsoleView, View):
    permission_required = PERMISSION
    http_method_names = ["get", "post"]

    def get(self, request, username):
        subject = _user_or_404(username)
        detail_url = reverse("console:user_detail", args=[subject.username])
        if not subject.is_active:
            messages.info(request, f"User {subject.username} is already deactivated; nothing to do.")
            return redirect(detail_url)
        refusal = user_deactivation_refusal(user=subject, acting_user=request.user)
        if refusal is not None:
            return _refused(request, refusal)
        return _confirm(
            request,
            subject,
            action="deactivate",
            roles=", ".join(user_roles(subject)) or "none",
            consequences=[
                f"{subject.username} can no longer sign in to the console; a signed-in browser of "
                "theirs is signed out on its next request.",
                "Their audit history, decisions and agent sessions stay as they are (revoke sessions "
                "on their own pages).",
                "An administrator can reactivate them later; the deactivation is audited.",
            ],
        )

    def post(self, request, username):
        subject = _user_or_404(username)
        if not is_confirmed(request):
            return not_confirmed(request)
        try:
            changed = user_deactivate(user=subject, actor=Actor.user(request.user), acting_user=request.user)
        except UserError as exc:
            return _refused(request, exc)
        if changed:
            messages.success(request, f"User {subject.username} deactivated.")
        else:
            messages.info(request, f"User {subject.username} was already deactivated.")
        return redirect("console:user_detail", username=subject.username)


class UserReactivateView(ConsoleView, View):
    """Let a deactivated user sign in again (same roles, same password), after a confirmation."""

    permission_required = PERMISSION
    http_method_names = ["get", "post"]

    def get(self, request, username):
        subject = _user_or_404(username)
        detail_url = reverse("console:user_detail", args=[subject.username])
        if subject.is_active:
            messages.info(request, f"User {subject.username} is active; nothing to do.")
            return redirect(detail_url)
        roles = ", ".join(user_roles(subject)) or "none"
        return _confirm(
            request,
            subject,
            action="reactivate",
            roles=roles,
            consequences=[
                f"{subject.username} can sign in to the console again, with their current password.",
                f"They get back exactly the roles they still hold: {roles}.",
                "If the account was deactivated because its password may be known to others, reset "
                "the password right after.",
                "The reactivation is audited.",
            ],
        )

    def post(self, request, username):
        subject = _user_or_404(username)
        if not is_confirmed(request):
            return not_confirmed(request)
        if user_reactivate(user=subject, actor=Actor.user(request.user)):
            messages.success(request, f"User {subject.username} reactivated.")
        else:
            messages.info(request, f"User {subject.username} was already active.")
        return redirect("console:user_detail", username=subject.username)
