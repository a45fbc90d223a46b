"""Every run-target route of spec 003 is in the generated OpenAPI document."""

SPEC_ROUTES = {
    ("POST", "/v1/agents/targets/{target_id}/claim"),
    ("POST", "/v1/agents/targets/{target_id}/key"),
    ("POST", "/v1/agents/targets/{target_id}/runs/{run_id}/report"),
    ("GET", "/v1/agents/targets/{target_id}"),
    ("PATCH", "/v1/agents/targets/{target_id}"),
    ("DELETE", "/v1/agents/targets/{target_id}"),
    ("GET", "/v1/agents/targets"),
    ("POST", "/v1/agents/targets"),
}


def test_every_spec_target_route_is_documented(client):
    paths = client.get("/v1/agents/openapi.json").json()["paths"]
    served = {(method.upper(), path) for path, item in paths.items() for method in item}
    assert SPEC_ROUTES <= served
    run_body = paths["/v1/agents/{ref}/run"]["post"]
    assert "202" in run_body["responses"]
