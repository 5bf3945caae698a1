"""Console users and their roles: create, set roles, reset a password, deactivate, reactivate.

The one place that changes console users, shared by the console's *Users* page and
``manage.py bailing_user``; every change is audited (``console.user.*``, target ``user``). Roles are
the groups of ``bailing.roles``; a password is never recorded anywhere but as Django's hash.

The hub always keeps someone who can manage it: taking the administrator role from, or deactivating,
the last active administrator is refused (``last_administrator``), and nobody deactivates themselves
(``self_deactivation``). Changes that could remove an administrator lock the administrator group's
row first, so two administrators demoting each other at once cannot both succeed.
"""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from bailing.roles import ADMINISTRATOR, ROLES, roles_sync

GENERATED_PASSWORD_BYTES = 18


# Stable codes of refused changes (the console shows them, the command prints them first).
USER_INVALID = "user_invalid"
LAST_ADMINISTRATOR = "last_administrator"
SELF_DEACTIVATION = "self_deactivation"


class UserError(Exception):
    """A refused change: ``field`` names the input at fault, ``message`` is fixed text, ``code`` is
    stable (``user_invalid`` for bad input, ``last_administrator``, ``self_deactivation``)."""

    def __init__(self, field: str, message: str, code: str = USER_INVALID):
        super().__init__(message)
        self.field = field
        self.message = message
        self.code = code


def password_generate() -> str:
    return secrets.token_urlsafe(GENERATED_PASSWORD_BYTES)


def _roles_clean(roles) -> list[str]:
    roles = sorted(set(roles))
    unknown = [role for role in roles if role not in ROLES]
    if unknown:
        raise UserError("roles", f"unknown role {unknown[0]!r}; choose from {', '.join(ROLES)}")
    return roles


def _password_check(password: str, user=None) -> None:
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise UserError("password", " ".join(exc.messages)) from None


def _groups(roles: list[str]):
    if Group.objects.filter(name__in=roles).count() != len(roles):
        roles_sync()
    return list(Group.objects.filter(name__in=roles))


def user_roles(user) -> list[str]:
    return sorted(name for name in user.groups.values_list("name", flat=True) if name in ROLES)


def is_administrator(user) -> bool:
    """Active and able to manage the hub: the administrator role (or a Django superuser, who passes
    every permission check)."""
    return user.is_active and (user.is_superuser or ADMINISTRATOR in user_roles(user))


def _keep_an_administrator(user, *, field: str, lock: bool = True) -> None:
    """Refuse (``last_administrator``) when ``user`` is the only active administrator left. Call
    inside the transaction that removes them; the administrator group's row lock serialises every
    such change (``lock=False``: a read-only look, for a page that warns before anyone confirms)."""
    if not is_administrator(user):
        return
    if lock:
        _groups([ADMINISTRATOR])  # the group exists, so there is a row to lock
        Group.objects.select_for_update().filter(name=ADMINISTRATOR).first()
    others = (
        get_user_model()
        .objects.filter(is_active=True)
        .exclude(pk=user.pk)
        .filter(Q(is_superuser=True) | Q(groups__name=ADMINISTRATOR))
        .exists()
    )
    if not others:
        raise UserError(
            field,
            f"{user.get_username()} is the last active administrator; make someone else an "
            "administrator first",
            code=LAST_ADMINISTRATOR,
        )


def user_create(*, username: str, roles, password: str, actor: Actor):
    User = get_user_model()
    username = username.strip()
    if not username:
        raise UserError("username", "a username is required")
    try:
        User.username_validator(username)
    except ValidationError as exc:
        raise UserError("username", " ".join(exc.messages)) from None
    if username.startswith("_"):
        raise UserError("username", "usernames starting with _ are reserved for console pages")
    roles = _roles_clean(roles)
    _password_check(password)
    with transaction.atomic():
        if User.objects.filter(username=username).exists():
            raise UserError("username", f"a user named {username!r} exists")
        user = User.objects.create_user(username=username, password=password)
        user.groups.set(_groups(roles))
        audit_record(
            action="console.user.created",
            actor=actor,
            target_type="user",
            target_id=username,
            data={"roles": roles},
        )
    return user


def user_set_roles(*, user, roles, actor: Actor) -> bool:
    """Give ``user`` exactly ``roles``. False (and no audit event) when nothing changes."""
    roles = _roles_clean(roles)
    with transaction.atomic():
        before = user_roles(user)
        if before == roles:
            return False
        if ADMINISTRATOR in before and ADMINISTRATOR not in roles:
            _keep_an_administrator(user, field="roles")
        others = [g for g in user.groups.all() if g.name not in ROLES]
        user.groups.set(others + _groups(roles))
        audit_record(
            action="console.user.roles_set",
            actor=actor,
            target_type="user",
            target_id=user.get_username(),
            data={"before": before, "after": roles},
        )
    return True


def user_set_password(*, user, password: str, actor: Actor, generated: bool) -> None:
    _password_check(password, user)
    with transaction.atomic():
        user.set_password(password)
        user.save(update_fields=["password"])
        audit_record(
            action="console.user.password_reset",
            actor=actor,
            target_type="user",
            target_id=user.get_username(),
            data={"generated": generated},
        )


def _not_yourself(user, acting_user) -> None:
    if acting_user is not None and acting_user.pk == user.pk:
        raise UserError("username", "you cannot deactivate yourself", code=SELF_DEACTIVATION)


def user_deactivation_refusal(*, user, acting_user=None) -> UserError | None:
    """Why :func:`user_deactivate` would refuse now (read-only, no lock), or None."""
    try:
        _not_yourself(user, acting_user)
        _keep_an_administrator(user, field="username", lock=False)
    except UserError as exc:
        return exc
    return None


def user_deactivate(*, user, actor: Actor, acting_user=None) -> bool:
    """The user can no longer sign in (their console sessions end on the next request, since Django
    refuses inactive users). False when already inactive. Refused for ``acting_user`` themselves
    (``self_deactivation``) and for the last active administrator (``last_administrator``)."""
    _not_yourself(user, acting_user)
    with transaction.atomic():
        locked = get_user_model().objects.select_for_update().get(pk=user.pk)
        if not locked.is_active:
            user.is_active = False
            return False
        _keep_an_administrator(locked, field="username")
        locked.is_active = user.is_active = False
        locked.save(update_fields=["is_active"])
        audit_record(
            action="console.user.deactivated", actor=actor, target_type="user", target_id=user.get_username()
        )
    return True


def user_reactivate(*, user, actor: Actor) -> bool:
    """The user may sign in again, with the roles and password they had. False when already active."""
    with transaction.atomic():
        locked = get_user_model().objects.select_for_update().get(pk=user.pk)
        if locked.is_active:
            user.is_active = True
            return False
        locked.is_active = user.is_active = True
        locked.save(update_fields=["is_active"])
        audit_record(
            action="console.user.reactivated", actor=actor, target_type="user", target_id=user.get_username()
        )
    return True
