"""A tool's inputSchema and its validation are read from one declaration, the fields REST's query
parameters are declared with (apps/mcp/arguments.py)."""

from __future__ import annotations

import pytest
from rest_framework import serializers

from apps.core.params import MAX_PAGE_SIZE, SEARCH_QUERY_MAX, CursorField, LimitField
from apps.mcp import tool_schemas, tools
from apps.mcp.arguments import ToolArgumentError, input_schema, validate_arguments
from apps.recordings.api import SessionListApi, TranscriptSearchApi


def refusal(declaration, arguments) -> tuple[str, str]:
    with pytest.raises(ToolArgumentError) as raised:
        validate_arguments(declaration, arguments)
    body = raised.value.body(request_id=False)
    return body["argument"], body["detail"]


def test_the_shared_parameters_have_the_same_bounds_at_both_doors():
    rest_limit = SessionListApi.QueryIn().fields["limit"]
    rest_query = TranscriptSearchApi.QueryIn().fields["query"]
    schema = input_schema(tool_schemas.SearchTranscriptsIn)["properties"]
    assert (schema["limit"]["minimum"], schema["limit"]["maximum"]) == (rest_limit.min_value, rest_limit.max_value)
    assert schema["query"]["maxLength"] == rest_query.max_length == SEARCH_QUERY_MAX
    assert refusal(tool_schemas.SearchTranscriptsIn, {"query": "x" * (SEARCH_QUERY_MAX + 1)}) == (
        "query", f"must be at most {SEARCH_QUERY_MAX} characters")
    assert refusal(tool_schemas.ListSessionsIn, {"limit": MAX_PAGE_SIZE + 1}) == (
        "limit", f"must be an integer from 1 to {MAX_PAGE_SIZE}")


def test_every_tool_schema_is_its_declaration():
    declarations = (tool_schemas.ListSessionsIn, tool_schemas.GetSessionIn, tool_schemas.SearchTranscriptsIn,
                    tool_schemas.GetTranscriptIn, tool_schemas.ListBoardsIn, tool_schemas.GetBoardIn)
    for tool, declaration in zip(tools.TOOLS, declarations):
        assert tool.input_schema == input_schema(declaration)
        assert list(tool.input_schema["properties"]) == list(declaration().fields)


def test_arguments_are_json_values_and_the_first_failing_in_declaration_order_is_named():
    class Declared(serializers.Serializer):
        cursor = CursorField(help_text="c")
        limit = LimitField(help_text="l")

    assert validate_arguments(Declared, {"limit": 10.0, "cursor": None}) == {"limit": 10}
    assert refusal(Declared, {"limit": "10"}) == ("limit", f"must be an integer from 1 to {MAX_PAGE_SIZE}")
    assert refusal(Declared, {"limit": True}) == ("limit", f"must be an integer from 1 to {MAX_PAGE_SIZE}")
    assert refusal(Declared, {"cursor": "a\x00b"}) == ("cursor", "must not contain U+0000")
    assert refusal(Declared, {"limit": 0, "cursor": ""}) == ("cursor", "must be a non-empty string")
    assert refusal(Declared, {"limit": 0, "zz": 1, "aa": 1}) == ("aa", "is not an argument of this tool")


def test_a_declaration_a_tool_cannot_take_is_refused_at_once():
    class Unbounded(serializers.Serializer):
        limit = serializers.IntegerField(required=False)

    with pytest.raises(TypeError):
        input_schema(Unbounded)
