def test_sessions_list_needs_a_credential(api, db):
    response = api.get("/api/v1/sessions")
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized"}
