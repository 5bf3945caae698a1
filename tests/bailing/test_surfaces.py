"""``bailing.api.surfaces``: the apps register their API prefixes in ``ready()``; the middleware, the
front and the URLconf's catch-all read them once every app is ready."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core.exceptions import AppRegistryNotReady

from bailing.api import surfaces


@pytest.fixture
def fresh(monkeypatch):
    """An empty, unfrozen registry (the real one is left as the apps filled it)."""
    monkeypatch.setattr(surfaces, "_registered", {})
    monkeypatch.setattr(surfaces, "_frozen", None)


def test_every_app_registered_its_prefixes():
    assert set(surfaces.api_prefixes()) == {"/agent-api/", "/agent-auth/", "/kb/", "/approvals/", "/mcp/"}
    assert surfaces.pragma_no_cache("/agent-auth/v1/token")
    assert surfaces.pragma_no_cache("/agent-auth/v1/token/")
    assert not surfaces.pragma_no_cache("/agent-auth/v1/authorizations")


@pytest.mark.parametrize(
    ("path", "on"),
    [
        ("/agent-api/v1/workspaces", True),
        ("/mcp", True),
        ("/mcp/demo", True),
        ("/kb", True),
        ("/kbx/", False),
        ("/console/", False),
        ("/health", False),
    ],
)
def test_a_path_is_on_the_surface_under_a_prefix_or_at_its_bare_name(path, on):
    assert surfaces.on_agent_surface(path) is on


def test_the_catch_all_pattern_matches_what_is_on_the_surface():
    import re

    pattern = re.compile(surfaces.api_prefix_pattern())
    for path in ("agent-api", "agent-api/v1/nothing", "mcp", "approvals/x/y"):
        assert pattern.match(path), path
    for path in ("console/", "kbx", "health"):
        assert not pattern.match(path), path


@pytest.mark.parametrize("prefix", ["/kb", "kb/", "/a/b/", "//", "/Upper/"])
def test_a_prefix_is_one_lower_case_segment_between_slashes(fresh, prefix):
    with pytest.raises(ValueError):
        surfaces.api_prefix_register(prefix)


def test_a_prefix_registered_twice_or_a_pragma_path_outside_it_is_refused(fresh):
    surfaces.api_prefix_register("/one/")
    with pytest.raises(ValueError):
        surfaces.api_prefix_register("/one/")
    with pytest.raises(ValueError):
        surfaces.api_prefix_register("/two/", pragma_no_cache=["/one/token"])


def test_the_first_read_freezes_the_prefixes(fresh):
    surfaces.api_prefix_register("/one/")
    assert surfaces.api_prefixes() == ("/one/",)
    with pytest.raises(RuntimeError):
        surfaces.api_prefix_register("/two/")


def test_a_read_before_every_app_is_ready_is_refused(fresh, monkeypatch):
    monkeypatch.setattr(apps, "ready", False)
    with pytest.raises(AppRegistryNotReady):
        surfaces.on_agent_surface("/mcp/")
