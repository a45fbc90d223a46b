def test_openapi_is_served(client):
    response = client.get("/v1/agents/openapi.json")
    assert response.status_code == 200
    assert "/v1/agents" in response.json()["paths"]
