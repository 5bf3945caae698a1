"""Console users and their roles: create, set roles, reset a password, deactivate.

The one place that changes console users, shared by the console's *Users* page and
``manage.py bailing_user``; every change is audited (``console.user.*``, target ``user``). Roles are
the groups of ``bailing.roles``; a password is never recorded anywhere but as Django's hash.
"""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from bailing.roles import ROLE_PERMISSIONS, roles_sync

ROLES = tuple(ROLE_PERMISSIONS)
GENERATED_PASSWORD_BYTES = 18


class UserError(Exception):
    """A refused change: ``field`` names the input at fault, ``message`` is fixed text."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


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


def user_deactivate(*, user, actor: Actor) -> bool:
    """The user can no longer sign in (their console sessions end on the next request, since Django
    refuses inactive users). False when already inactive."""
    with transaction.atomic():
        if not user.is_active:
            return False
        user.is_active = False
        user.save(update_fields=["is_active"])
        audit_record(
            action="console.user.deactivated", actor=actor, target_type="user", target_id=user.get_username()
        )
    return True
