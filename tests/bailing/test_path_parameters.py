"""A control character in any path parameter answers 404, never a 500 from the database.

PostgreSQL text cannot hold NUL, so a ``%00`` that reached a query raised ``DataError``. Every
pattern of the root URLconf is enumerated here, so a pattern added later is covered without being
listed: each parameter must use a converter that refuses control characters (``segment`` /
``segments``, or ``int`` / ``uuid``), and a request with a control character in that parameter is
the console's styled 404 page, or the JSON 404 envelope under an API prefix.
"""

from __future__ import annotations

import copy
import re
import uuid

import pytest
from django.test import Client as HttpClient
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.converters import IntConverter, UUIDConverter
from django.urls.resolvers import RegexPattern

from bailing.api.surfaces import on_agent_surface
from bailing.converters import SegmentConverter, SegmentsConverter
from bailing.roles import roles_sync
from tests.factories import UserFactory
from tests.support.module_rows import module_rows

SAFE_CONVERTERS = (SegmentConverter, SegmentsConverter, IntConverter, UUIDConverter)
# Values for the parameters not under test (``str`` and ``path`` too, so that a new pattern using them
# is requested as well, and fails).
SAMPLE = dict.fromkeys(["segment", "segments", "str", "path"], "demo") | {
    "int": "1",
    "uuid": str(uuid.UUID(int=1)),
}
PARAMETER = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")


def _patterns(resolvers=None, prefix="", converters=None):
    """(route, {name: converter}) of every endpoint, the routes of the including URLconfs joined."""
    for entry in resolvers if resolvers is not None else get_resolver().url_patterns:
        route = prefix + str(entry.pattern)
        merged = {**(converters or {}), **getattr(entry.pattern, "converters", {})}
        if isinstance(entry.pattern, RegexPattern):  # a regex group has no converter: never safe
            merged |= dict.fromkeys(entry.pattern.regex.groupindex)
        if isinstance(entry, URLResolver):
            yield from _patterns(entry.url_patterns, route, merged)
        elif isinstance(entry, URLPattern) and merged:
            yield route, merged


PARAMETERS = [(route, name) for route, converters in _patterns() for name in converters]


def _url(route: str, hostile: str, value: str) -> str:
    def fill(match):
        if match["name"] == hostile:
            return value
        return SAMPLE[match["converter"] or "str"]

    return "/" + PARAMETER.sub(fill, route)


def test_the_urlconf_has_parameters_to_check():
    routes = {route for route, _ in PARAMETERS}
    assert "console/clients/<segment:app_id>/" in routes
    assert "agent-auth/v1/authorizations/<segment:authorization_id>/approve" in routes
    assert "kb/<segment:kb_id>/docs/<segments:source_key>" in routes
    assert len(PARAMETERS) >= 40


ROUTES = list(_patterns())


@pytest.mark.parametrize(("route", "converters"), ROUTES, ids=[route for route, _ in ROUTES])
def test_every_path_parameter_refuses_control_characters(route, converters):
    unsafe = {name: type(c).__name__ for name, c in converters.items() if not isinstance(c, SAFE_CONVERTERS)}
    assert not unsafe, f"{route}: use <segment:…> (or <segments:…>, int, uuid) for {unsafe}"


@pytest.fixture(scope="module")
def _staff_cookies(django_db_setup, django_db_blocker):
    """One user in every role, signed in once for the module's hundreds of cases
    (tests/support/module_rows): its session cookie."""
    with module_rows(django_db_blocker):
        roles_sync()
        user = UserFactory(username="root", roles=["administrator", "approver", "auditor"])
        client = HttpClient()
        client.force_login(user)
        yield client.cookies


@pytest.fixture
def staff(db, _staff_cookies):
    client = HttpClient()
    client.cookies = copy.deepcopy(_staff_cookies)
    return client


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("character", ["%00", "%0A", "%1F", "%7F", "%C2%85"])
@pytest.mark.parametrize(("route", "name"), PARAMETERS, ids=[f"{r} {n}" for r, n in PARAMETERS])
def test_a_control_character_in_a_path_parameter_is_404(staff, route, name, character, method):
    path = _url(route, name, f"de{character}mo")
    if method == "get":
        response = staff.get(path)
    else:
        response = staff.post(path, data=b"{}", content_type="application/json")
    assert response.status_code == 404, path
    if on_agent_surface("/" + route):
        assert response["Content-Type"] == "application/json"
        assert response.json()["error"] == "not_found"
    else:
        assert "console/error.html" in [t.name for t in response.templates]
