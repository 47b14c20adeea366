"""`/openapi.json` documents POST /mcp and the /mcp protected-resource document."""

from __future__ import annotations

from django.test import Client


def test_openapi_documents_post_mcp(db):
    doc = Client().get("/openapi.json").json()
    operation = doc["paths"]["/mcp"]["post"]
    assert set(operation["responses"]) >= {"200", "202", "400", "401", "403", "404", "405", "413", "415"}
    assert {"bearerAuth": []} in operation["security"]
    assert "application/json" in operation["requestBody"]["content"]
    for tool in ("list_sessions", "get_session", "search_transcripts", "get_transcript", "list_boards", "get_board"):
        assert tool in operation["description"]
    assert "get" in doc["paths"]["/.well-known/oauth-protected-resource/mcp"]
    assert "get" not in doc["paths"]["/mcp"]  # GET answers 405
