import json
import time

import jsonschema

from agent_runtime.tools.acc import ACC_SCHEMA_FILE

SPEC_PATH = "/.well-known/bailing/tools.json"
OPERATIONS = {
    "list_orders": ("GET", "/orders"),
    "get_order": ("GET", "/orders/{order_id}"),
    "create_ticket": ("POST", "/tickets"),
    "cancel_order": ("POST", "/orders/{order_id}/cancel"),
    "request_refund": ("POST", "/orders/{order_id}/refunds"),
    "demo_failure_probe": ("GET", "/diagnostics/failure"),
}


def fetch_spec(shop):
    response = shop.call("GET", SPEC_PATH, job_id="")
    assert response.status_code == 200
    return response.json()


def operations(spec):
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            yield method.upper(), path, operation


# --- spec access policy: signed_required ----------------------------------------------------------


def test_unsigned_spec_fetch_is_401(demo_shop):
    response = demo_shop.client.get(demo_shop.url(SPEC_PATH))
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_signature"
    assert "paths" not in response.text


def test_spec_fetch_with_invalid_signature_is_401(demo_shop):
    headers = demo_shop.sign("GET", SPEC_PATH)
    headers["X-Bailing-Signature"] = "sha256=" + "0" * 64
    response = demo_shop.client.get(demo_shop.url(SPEC_PATH), headers=headers)
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_signature"


def test_spec_fetch_signed_with_another_secret_is_401(demo_shop):
    response = demo_shop.call("GET", SPEC_PATH, job_id="", secret="not-the-provider-secret")
    assert response.status_code == 401


def test_spec_fetch_signed_for_another_path_is_401(demo_shop):
    headers = demo_shop.sign("GET", "/bailing/tools.json")
    response = demo_shop.client.get(demo_shop.url(SPEC_PATH), headers=headers)
    assert response.status_code == 401


def test_stale_signed_spec_fetch_is_401(demo_shop):
    response = demo_shop.call("GET", SPEC_PATH, job_id="", timestamp=int(time.time()) - 301)
    assert response.status_code == 401
    assert response.json()["reason"] == "timestamp_skew"


def test_signed_spec_fetch_is_200_private_no_store(demo_shop):
    response = demo_shop.call("GET", SPEC_PATH, job_id="")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["cache-control"] == "private, no-store"
    spec = json.loads(response.content)
    assert spec["openapi"].startswith("3.1.")


# --- catalog content ------------------------------------------------------------------------------


def test_spec_declares_the_six_tools(demo_shop):
    spec = fetch_spec(demo_shop)
    found = {op["operationId"]: (method, path) for method, path, op in operations(spec)}
    assert found == OPERATIONS
    for _, _, operation in operations(spec):
        assert operation["summary"] and operation["description"]
        guidance = operation["x-agent-capability"]["guidance"]
        assert guidance["when_to_use"] and guidance["returns"]
        assert len(guidance["examples"]) == 1


def test_every_acc_block_validates_against_the_contract_schema(demo_shop):
    # The project's own contract schema (written from the ACC facts), the one the compiler uses.
    schema = json.loads(ACC_SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    spec = fetch_spec(demo_shop)
    checked = 0
    for _, path, operation in operations(spec):
        errors = [e.message for e in validator.iter_errors(operation["x-agent-capability"])]
        assert errors == [], (path, errors)
        checked += 1
    assert checked == 6


def test_acc_governance_of_each_tool(demo_shop):
    acc = {op["operationId"]: op["x-agent-capability"] for _, _, op in operations(fetch_spec(demo_shop))}
    for name in ("list_orders", "get_order"):
        assert acc[name]["risk"]["level"] == "low"
        assert acc[name]["execution"] == {"readonly": True, "idempotent": True}
        assert acc[name]["subject"]["required"] is True
    assert acc["create_ticket"]["risk"]["level"] == "medium"
    assert acc["create_ticket"]["execution"]["readonly"] is False
    assert acc["create_ticket"]["execution"]["idempotent"] is False
    assert acc["create_ticket"]["subject"]["required"] is True
    assert acc["cancel_order"]["risk"]["level"] == "high"
    assert acc["cancel_order"]["approval"]["required"] is True
    assert acc["request_refund"]["risk"]["level"] == "medium"
    assert "required" not in acc["request_refund"]["approval"]
    assert acc["request_refund"]["approval"]["when"] == [
        {"param": "amount", "op": ">", "value": 500, "label": "Refunds above 500 need a manager's approval"}
    ]
    assert acc["demo_failure_probe"]["execution"]["readonly"] is True
    assert all(a["version"] == 1 and a["enabled"] is True for a in acc.values())


def resolve(spec, ref):
    assert ref.startswith("#/")
    node = spec
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def test_every_ref_resolves_and_components_schemas_are_used(demo_shop):
    spec = fetch_spec(demo_shop)
    refs = []

    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                refs.append(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    assert any(ref.startswith("#/components/schemas/") for ref in refs)
    for ref in refs:
        assert isinstance(resolve(spec, ref), dict), ref


def input_schema(operation):
    """The tool's argument schema as a hub compiles it: parameters + JSON body properties, inline."""
    properties, required = {}, []
    for parameter in operation.get("parameters", []):
        assert "$ref" not in parameter["schema"]
        properties[parameter["name"]] = parameter["schema"]
        if parameter.get("required") or parameter["in"] == "path":
            required.append(parameter["name"])
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body:
        assert body["type"] == "object" and "$ref" not in json.dumps(body)
        properties.update(body["properties"])
        required.extend(body.get("required", []))
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def test_examples_are_valid_arguments_and_approval_rules_target_typed_params(demo_shop):
    for _, _, operation in operations(fetch_spec(demo_shop)):
        schema = input_schema(operation)
        acc = operation["x-agent-capability"]
        for example in acc["guidance"]["examples"]:
            jsonschema.Draft202012Validator(schema).validate(example)
        for rule in acc.get("approval", {}).get("when", []):
            assert schema["properties"][rule["param"]]["type"] == "number"
            assert isinstance(rule["value"], int | float)


def test_signature_headers_are_not_tool_parameters(demo_shop):
    for _, _, operation in operations(fetch_spec(demo_shop)):
        for parameter in operation.get("parameters", []):
            assert parameter["in"] in {"path", "query"}
            assert not parameter["name"].lower().startswith("x-bailing")


def test_every_tool_input_has_a_description(demo_shop):
    """The hub reports an undescribed input as ``param_missing_description``; the shop has none."""
    for _, path, operation in operations(fetch_spec(demo_shop)):
        for name, schema in input_schema(operation)["properties"].items():
            parameter = next((p for p in operation.get("parameters", []) if p["name"] == name), {})
            assert parameter.get("description") or schema.get("description"), (path, name)


def test_spec_declares_the_authorization_probe_endpoint(demo_shop):
    spec = fetch_spec(demo_shop)
    assert spec["x-bailing-authz-probe"] == {"method": "POST", "path": "/.well-known/bailing/authz-probe"}
    assert "/.well-known/bailing/authz-probe" not in spec["paths"]  # an endpoint, never a tool
