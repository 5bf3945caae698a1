"""``bailing.roles``: the plumbing names the roles, the apps grant the permissions (registered in
their ``ready()``), and the groups hold exactly what was granted."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission

from bailing import roles


@pytest.fixture
def empty_registry(monkeypatch):
    monkeypatch.setattr(roles, "_grants", {})


def test_grants_of_several_apps_are_merged_per_role_each_once(empty_registry):
    roles.role_permissions_register("one", {roles.ADMINISTRATOR: ["a.x", "a.y"], roles.AUDITOR: ["a.x"]})
    roles.role_permissions_register("two", {roles.ADMINISTRATOR: ["a.y", "b.z"]})
    assert roles.role_permissions() == {
        roles.ADMINISTRATOR: ["a.x", "a.y", "b.z"],
        roles.APPROVER: [],
        roles.AUDITOR: ["a.x"],
    }


@pytest.mark.parametrize(
    ("name", "grants"),
    [
        ("twice", {roles.AUDITOR: ["a.x"]}),
        ("other", {"superuser": ["a.x"]}),
        ("other", {roles.AUDITOR: ["view_everything"]}),
    ],
    ids=["registered twice", "unknown role", "not app_label.codename"],
)
def test_a_wrong_registration_is_refused(empty_registry, name, grants):
    roles.role_permissions_register("twice", {roles.AUDITOR: ["a.x"]})
    with pytest.raises(ValueError):
        roles.role_permissions_register(name, grants)


def test_every_app_granted_its_permissions():
    granted = roles.role_permissions()
    assert "auth.change_user" in granted[roles.ADMINISTRATOR]
    assert "agent_runtime.change_client" in granted[roles.ADMINISTRATOR]
    assert "knowledge.manage_knowledgebase" in granted[roles.ADMINISTRATOR]
    assert "agent_runtime.decide_toolapproval" in granted[roles.APPROVER]
    assert "agent_runtime.decide_toolapproval" not in granted[roles.ADMINISTRATOR]
    assert "bailing.verify_auditevent" in granted[roles.AUDITOR]


@pytest.mark.django_db
def test_every_granted_permission_exists_and_the_groups_hold_exactly_them():
    """A misspelt grant would be skipped silently by the sync: every one names a real permission."""
    roles.roles_sync()
    for role, names in roles.role_permissions().items():
        for name in names:
            app_label, codename = name.split(".")
            assert Permission.objects.filter(content_type__app_label=app_label, codename=codename).exists(), (
                name
            )
        held = {
            f"{app_label}.{codename}"
            for app_label, codename in Group.objects.get(name=role).permissions.values_list(
                "content_type__app_label", "codename"
            )
        }
        assert held == set(names), role
