"""A shape's JSON Schema (apps/core/shapes.py `Shape.json_schema`), from its declaration.

For /openapi.json (OpenAPI 3.1): nested component shapes by `$ref`, nullability as
`type: [t, "null"]`, as drf-spectacular writes it. `portable`, for MCP `outputSchema`s:
self-contained, no `$ref`, nullability as `anyOf` with a `{"type": "null"}` branch, free-form
JSON spelled out as the union of JSON's types, because clients that map tool schemas onto a
single-`type` dialect reject or drop type lists (the MCP Inspector's `--strict` check flags them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apps.core.shape_fields import JSON, SCALARS, TIMESTAMP, Field

if TYPE_CHECKING:
    from apps.core.shapes import Shape

TIMESTAMP_DESCRIPTION = "ISO 8601, UTC, milliseconds, `Z`"
# Any JSON value, spelled with a validation keyword so that a portable schema constrains
# something (a schema with no keyword at all reads as `true` to portability checks).
ANY_JSON_TYPES = ("object", "array", "string", "number", "boolean", "null")


def ref(shape: Shape) -> dict[str, str]:
    if not shape.component:
        raise ValueError(f"{shape.name} is not a component")
    return {"$ref": f"#/components/schemas/{shape.name}"}


def object_schema(shape: Shape, *, portable: bool = False) -> dict[str, Any]:
    properties = {f.name: _property(f, portable) for f in shape.fields}
    schema: dict[str, Any] = {"type": "object"}
    if shape.description:
        schema["description"] = shape.description
    schema["properties"] = properties
    schema["required"] = [f.name for f in shape.fields if f.required]
    if shape.closed:
        schema["additionalProperties"] = False
    return schema


def _property(f: Field, portable: bool) -> dict[str, Any]:
    child = f.nested
    if child is not None:
        value = ref(child) if child.component and not portable else object_schema(child, portable=portable)
    elif f.kind == JSON:
        value = {"anyOf": [{"type": t} for t in ANY_JSON_TYPES]} if portable else {}
    else:
        value = {"type": SCALARS[f.kind]}
        if f.kind == TIMESTAMP:
            value["format"] = "date-time"
        if f.const is not None:
            value["const"] = f.const
        elif f.enum is not None:
            value["enum"] = f.enum
    if f.many:
        value = {"type": "array", "items": value}
    if f.nullable:
        value = _nullable(value, portable)
    description = f.description or (TIMESTAMP_DESCRIPTION if f.kind == TIMESTAMP else "")
    if description:
        value = {**value, "description": description}
    return value


def _nullable(value: dict[str, Any], portable: bool) -> dict[str, Any]:
    if portable or "type" not in value or isinstance(value["type"], list):
        return {"anyOf": [value, {"type": "null"}]}
    nullable = {**value, "type": [value["type"], "null"]}
    if "enum" in nullable:
        nullable["enum"] = [*nullable["enum"], None]
    return nullable
