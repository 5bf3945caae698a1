"""Reading a spec's ``x-bailing-authz-probe`` declaration (pure; the requests are covered by the
provider refresh tests against real HTTP servers)."""

from __future__ import annotations

import pytest

from agent_runtime.services.authz_probe import DeclarationInvalid, ProbeTarget, authz_probe_target

PATH = "/.well-known/bailing/authz-probe"


def spec(**root) -> dict:
    return {"openapi": "3.1.0", "paths": {}, **root}


def test_the_root_declaration_defaults_to_post_and_a_fixed_name():
    assert authz_probe_target(spec(**{"x-bailing-authz-probe": {"path": PATH}})) == ProbeTarget(
        "POST", PATH, "authz_probe"
    )


@pytest.mark.parametrize(
    ("declaration", "expected"),
    [
        (
            {"method": "get", "path": PATH, "operationId": "checkAuthz"},
            ProbeTarget("GET", PATH, "checkAuthz"),
        ),
        ({"method": "Post", "path": PATH + "?v=1"}, ProbeTarget("POST", PATH + "?v=1", "authz_probe")),
        ({"path": PATH, "operationId": "not a name"}, ProbeTarget("POST", PATH, "authz_probe")),
        ({"path": PATH, "operationId": 7, "extra": True}, ProbeTarget("POST", PATH, "authz_probe")),
    ],
)
def test_root_declarations(declaration, expected):
    assert authz_probe_target(spec(**{"x-bailing-authz-probe": declaration})) == expected


def test_the_root_declaration_wins_over_a_marked_operation():
    document = spec(**{"x-bailing-authz-probe": {"path": PATH}})
    document["paths"]["/check"] = {"get": {"operationId": "check", "x-bailing-authz-probe": True}}
    assert authz_probe_target(document).path == PATH


def test_the_first_marked_get_or_post_operation_is_the_probe():
    document = spec()
    document["paths"] = {
        "/orders": {"get": {"operationId": "list", "x-bailing-authz-probe": "yes"}},  # only true marks
        "/check": {"parameters": [], "post": {"operationId": "check", "x-bailing-authz-probe": True}},
        "/later": {"get": {"x-bailing-authz-probe": True}},
    }
    assert authz_probe_target(document) == ProbeTarget("POST", "/check", "check")


@pytest.mark.parametrize("document", [spec(), spec(paths=[]), [], None, spec(paths={"/x": None})])
def test_nothing_declared(document):
    assert authz_probe_target(document) is None


@pytest.mark.parametrize(
    "document",
    [
        spec(**{"x-bailing-authz-probe": None}),
        spec(**{"x-bailing-authz-probe": {"path": "https://elsewhere.example" + PATH}}),
        spec(**{"x-bailing-authz-probe": {"path": PATH, "method": "DELETE"}}),
        spec(paths={"/x": {"put": {"x-bailing-authz-probe": True}}}),
        spec(paths={"/x/{id}": {"get": {"x-bailing-authz-probe": True}}}),
    ],
    ids=["not-an-object", "absolute-url", "delete", "put-operation", "templated-path"],
)
def test_unusable_declarations_raise(document):
    with pytest.raises(DeclarationInvalid):
        authz_probe_target(document)
