"""Console roles as Django groups of model permissions.

* administrator — configures the hub and reads everything the console shows; decides approvals only
  if they also hold the approver role (separation of duties).
* approver — reads what an approval is about and decides approvals of tool calls (never for a call
  made on their own behalf).
* auditor — read-only, the audit history included.

The plumbing names the three roles and keeps their groups in sync; which permission belongs to which
role is each app's to say. An app grants its permissions with :func:`role_permissions_register` from
its ``AppConfig.ready()`` (its ``roles`` module holds the lists, next to the pages that check them),
and :func:`roles_sync` sets each group to exactly what the apps granted it, after every migrate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.contrib.auth.models import Group, Permission

ADMINISTRATOR = "administrator"
APPROVER = "approver"
AUDITOR = "auditor"
ROLES = (ADMINISTRATOR, APPROVER, AUDITOR)

# Who granted what: {registrant: {role: ("app_label.codename", ...)}}, in registration order.
_grants: dict[str, dict[str, tuple[str, ...]]] = {}


def role_permissions_register(name: str, grants: Mapping[str, Iterable[str]]) -> None:
    """Grant ``app_label.codename`` permissions to roles, under ``name`` (an app's label; names are
    unique, registering one twice is a bug, and so is a role the plumbing does not define)."""
    if name in _grants:
        raise ValueError(f"role permissions of {name!r} are registered already")
    unknown = sorted(set(grants) - set(ROLES))
    if unknown:
        raise ValueError(f"unknown role {unknown[0]!r}; the roles are {', '.join(ROLES)}")
    entry = {role: tuple(perms) for role, perms in grants.items()}
    malformed = [perm for perms in entry.values() for perm in perms if perm.count(".") != 1]
    if malformed:
        raise ValueError(f"a permission is app_label.codename, not {malformed[0]!r}")
    _grants[name] = entry


def role_permissions() -> dict[str, list[str]]:
    """Every role's permissions, each once, in the order the apps granted them."""
    result: dict[str, list[str]] = {role: [] for role in ROLES}
    for entry in _grants.values():
        for role, perms in entry.items():
            result[role] += [perm for perm in perms if perm not in result[role]]
    return result


def roles_sync() -> None:
    """Create or update the three role groups with exactly their permissions (one read of every
    granted permission, then a group and its difference per role: about ten queries in all)."""
    wanted = role_permissions()
    pairs = {tuple(name.split(".", 1)) for names in wanted.values() for name in names}
    found = {
        (perm.content_type.app_label, perm.codename): perm
        for perm in Permission.objects.select_related("content_type").filter(
            content_type__app_label__in={app_label for app_label, _ in pairs},
            codename__in={codename for _, codename in pairs},
        )
    }
    for role, names in wanted.items():
        group, _ = Group.objects.get_or_create(name=role)
        perms = [found[key] for key in (tuple(name.split(".", 1)) for name in names) if key in found]
        group.permissions.set(perms)


def roles_sync_after_migrate(**kwargs) -> None:
    roles_sync()
