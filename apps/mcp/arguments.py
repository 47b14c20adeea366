"""A tool's arguments, declared once as REST declares its query parameters: a DRF serializer of
the fields of apps/core/params.py (integers, strings, choices). The tool's `inputSchema` and the
validation of its arguments are both read from that declaration (names and order, required or
not, bounds, choices, description).

Arguments are JSON values, not query text: an integer is a JSON number (10 and 10.0 alike; never
"10" or true), a string a non-empty JSON string without U+0000, and null is an absent argument.
A failure is `invalid_request` naming one argument: first any the tool does not take, then the
first failing one in declaration order.
"""

from __future__ import annotations

import functools
from typing import Any

from rest_framework import serializers

from apps.core.errors import InvalidRequest
from apps.core.text import holds_nul


class ToolArgumentError(InvalidRequest):
    def __init__(self, argument: str, detail: str) -> None:
        super().__init__(argument=argument, detail=detail)


@functools.cache
def declared(declaration: type[serializers.Serializer]) -> dict[str, serializers.Field]:
    """The declaration's fields by name, in order (bound once)."""
    fields = dict(declaration().fields)
    for name, field in fields.items():
        if isinstance(field, serializers.IntegerField) and (field.min_value is None or field.max_value is None):
            raise TypeError(f"{declaration.__name__}.{name}: a tool's integer needs both bounds")
        if not isinstance(field, (serializers.IntegerField, serializers.CharField, serializers.ChoiceField)):
            raise TypeError(f"{declaration.__name__}.{name}: a tool takes integers, strings and choices only")
    return fields


def input_schema(declaration: type[serializers.Serializer]) -> dict[str, Any]:
    """The tool's `inputSchema`: an object of exactly the declared properties."""
    fields = declared(declaration)
    return {
        "type": "object",
        "properties": {name: _property(field) for name, field in fields.items()},
        "required": [name for name, field in fields.items() if field.required],
        "additionalProperties": False,
    }


def _property(field: serializers.Field) -> dict[str, Any]:
    if isinstance(field, serializers.IntegerField):
        schema: dict[str, Any] = {"type": "integer", "minimum": field.min_value, "maximum": field.max_value}
    elif isinstance(field, serializers.ChoiceField):
        schema = {"type": "string", "enum": list(field.choices)}
    else:
        schema = {"type": "string", "minLength": 1}  # an empty string is never an argument
        if field.max_length is not None:
            schema["maxLength"] = field.max_length
    schema["description"] = str(field.help_text)
    return schema


def validate_arguments(declaration: type[serializers.Serializer], arguments: dict[str, Any]) -> dict[str, Any]:
    """The declared arguments given (absent and null ones left out), or the error naming one."""
    fields = declared(declaration)
    for name in sorted(set(arguments) - set(fields)):
        raise ToolArgumentError(name, "is not an argument of this tool")
    values: dict[str, Any] = {}
    for name, field in fields.items():
        value = arguments.get(name)
        if value is None:
            if field.required:
                raise ToolArgumentError(name, "is required")
            continue
        if isinstance(field, serializers.IntegerField):
            values[name] = _integer(name, field, value)
        elif isinstance(field, serializers.ChoiceField):
            values[name] = _choice(name, field, value)
        else:
            values[name] = _string(name, field, value)
    return values


def _choice(name: str, field: serializers.ChoiceField, value: Any) -> str:
    if not isinstance(value, str) or value not in field.choices:
        raise ToolArgumentError(name, f"must be one of {', '.join(map(str, field.choices))}")
    return value


def _string(name: str, field: serializers.CharField, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ToolArgumentError(name, "must be a non-empty string")
    if holds_nul(value):
        raise ToolArgumentError(name, "must not contain U+0000")
    if field.max_length is not None and len(value) > field.max_length:
        raise ToolArgumentError(name, f"must be at most {field.max_length} characters")
    return value


def _integer(name: str, field: serializers.IntegerField, value: Any) -> int:
    # 10 and 10.0 are the same JSON number; anything else (true, "10", 10.5) is not an integer.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    low, high = field.min_value, field.max_value
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ToolArgumentError(name, f"must be an integer from {low} to {high}")
    return value
