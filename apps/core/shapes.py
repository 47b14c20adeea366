"""Wire shapes, each declared once: field names, types, nullability and enum values.

A `Shape` is the single source for everything that says how an object looks on the wire: its
representation function (`shape.encode`, built by apps/core/shape_encoders.py), which REST, MCP,
the event stream and webhooks all call; its JSON Schema for /openapi.json and for MCP
`outputSchema`s (`json_schema`, apps/core/shape_schemas.py); and its /openapi.json component
(`component=True`, added by apps/core/openapi.py). Its parts, `Field` and `Spread`, are declared
in apps/core/shape_fields.py and named here too.

Enum values come from the models' `TextChoices`, so a new status cannot reach the wire
undocumented. The key order of the encoded dict is the declaration order: the bytes on the
wire are part of the contract (webhook bodies are signed)."""

from __future__ import annotations

import keyword
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from apps.core import shape_encoders, shape_schemas
from apps.core.shape_fields import BOOLEAN, INTEGER, JSON, NUMBER, STRING, TIMESTAMP, Field, Spread

__all__ = ["BOOLEAN", "COMPONENTS", "INTEGER", "JSON", "NUMBER", "STRING", "TIMESTAMP", "Field", "Shape", "Spread",
           "components", "envelope", "page_of"]

# Every shape declared with component=True, by component name, in declaration order.
COMPONENTS: dict[str, Shape] = {}


@dataclass(eq=False)
class Shape:
    """A wire object: its entries in wire order, and the parameters its representation function
    takes (one object, `obj`, unless a shape is built from several, like a search hit from its
    transcript, session and snippet). `name` is its /openapi.json component name."""

    name: str
    entries: tuple[Field | Spread, ...]
    params: tuple[str, ...] = ("obj",)
    description: str = ""
    # No property beyond the declared ones (the event envelope and its data: docs/api/events-and-stream.md).
    closed: bool = False
    component: bool = False
    _encode: Callable[..., dict[str, Any]] | None = field(default=None, repr=False)
    _encode_formatted: Callable[..., dict[str, Any]] | None = field(default=None, repr=False)
    # Tuple-row encoders (`encode_rows`, `encode_with_rows`), by timestamp converter.
    _row_encoders: dict[Any, Callable[..., Any]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for param in self.params:
            if not param.isidentifier() or keyword.iskeyword(param) or param.startswith("_"):
                raise ValueError(f"{self.name}: parameter {param!r} is not a plain identifier")
        names = [f.name for f in self.fields]
        if len(names) != len(set(names)):
            raise ValueError(f"{self.name}: a wire name is declared twice: {names}")
        if self.component:
            if self.name in COMPONENTS:
                raise ValueError(f"component {self.name} is declared twice")
            COMPONENTS[self.name] = self

    # --- Declaring ---------------------------------------------------------------------------

    @cached_property
    def fields(self) -> tuple[Field, ...]:
        """The properties on the wire, in order, a Spread's fields in its place."""
        out: list[Field] = []
        for entry in self.entries:
            out.extend(entry.shape.fields if isinstance(entry, Spread) else [entry])
        return tuple(out)

    @cached_property
    def _arrangement(self) -> tuple[tuple[str, Shape | None, bool], ...]:
        return tuple((f.name, f.nested, f.many) for f in self.fields)

    def extend(self, name: str, *entries: Field | Spread, **options: Any) -> Shape:
        """This shape's fields, then more: a new shape with the same parameters."""
        options.setdefault("params", self.params)
        options.setdefault("closed", self.closed)
        return Shape(name, (*self.entries, *entries), **options)

    def specialise(self, name: str, *, description: str = "", component: bool = True, **fields: Field) -> Shape:
        """The same shape with some fields re-declared (for documentation: an envelope whose
        `type` is one constant and whose `data` has that type's shape)."""
        unknown = set(fields) - {f.name for f in self.fields if f in self.entries}
        if unknown:
            raise ValueError(f"{self.name} has no own field {sorted(unknown)}")
        entries = tuple(fields.get(e.name, e) if isinstance(e, Field) else e for e in self.entries)
        return Shape(name, entries, params=self.params, description=description or self.description,
                     closed=self.closed, component=component)

    def source_attributes(self) -> tuple[str, ...]:
        """The attributes the representation reads from its one parameter (for a query that
        fetches only those columns)."""
        if len(self.params) != 1:
            raise ValueError(f"{self.name} has several parameters")
        return tuple(dict.fromkeys(f.path for f in self.fields if f.getter is None))

    def flat_columns(self) -> tuple[str, ...]:
        """The one column per field `encode_rows` reads, in field order; ValueError unless the
        shape is flat (every field a plain read of an attribute of its one parameter)."""
        paths = self.source_attributes()
        for f in self.fields:
            if f.nested is not None or f.getter is not None or f.many or "." in f.path:
                raise ValueError(f"{self.name}.{f.name} is not a column: {self.name} has no row encoder")
        if len(paths) != len(self.fields):
            raise ValueError(f"{self.name} reads a column twice: no row encoder")
        return paths

    # --- The representation function -------------------------------------------------------

    @property
    def encode(self) -> Callable[..., dict[str, Any]]:
        """The object as a dict in declaration order, with the reads and conversions the
        declaration names (apps/core/shape_encoders.py)."""
        if self._encode is None:
            self._encode = shape_encoders.object_encoder(self)
        return self._encode

    @property
    def encode_formatted(self) -> Callable[..., dict[str, Any]]:
        """`encode` for rows whose timestamps the database already wrote in wire form
        (apps/core/timestamps.py `IsoMs`): they are copied, not converted. The transcript fast
        path reads segments so; the rest is the same function."""
        if self._encode_formatted is None:
            self._encode_formatted = shape_encoders.object_encoder(self, formatted=True)
        return self._encode_formatted

    def encode_rows(self, stamp: Callable[[Any], str] | None = None) -> Callable[[Any], list[dict[str, Any]]]:
        """For a flat shape (scalar fields, one column each): a function from rows, tuples of
        `source_attributes()` in that order as a database cursor returns them, to the list of
        objects `encode_formatted` gives for the same values as named rows: each tuple zipped
        with the wire names, no named tuple per row and no attribute reads (the transcript path
        encodes every segment of a transcript). Timestamps are wire text already, or
        `stamp(value)` makes them so (SQLite's stored text: apps/core/timestamps.py
        `stamp_read`)."""
        key = ("rows", stamp)
        if key not in self._row_encoders:
            self._row_encoders[key] = shape_encoders.rows_encoder(self, stamp)
        return self._row_encoders[key]

    def encode_with_rows(self, stamp: Callable[[Any], str] | None = None) -> Callable[..., dict[str, Any]]:
        """`encode_formatted`, except that a list of a flat shape (`many=True`) is given as
        rows for that shape's `encode_rows(stamp)`: the transcript bodies, whose envelope is read
        by name and whose segments are rows."""
        key = ("with_rows", stamp)
        if key not in self._row_encoders:
            self._row_encoders[key] = shape_encoders.object_encoder(self, formatted=True, rows_stamp=(stamp,))
        return self._row_encoders[key]

    def arrange(self, value: Any) -> Any:
        """Stored wire data (a JSON object written by `encode` earlier) in declaration order.

        PostgreSQL's jsonb keeps an object's keys in its own order (shorter keys first), so data
        read back from a JSONField would otherwise go out ordered differently from the same data
        sent before it was stored. Keys the declaration does not know are kept, after the rest."""
        if not isinstance(value, dict):
            return value
        arranged: dict[str, Any] = {}
        for name, child, many in self._arrangement:
            if name not in value:
                continue
            item = value[name]
            if child is not None:
                if not many:
                    item = child.arrange(item)
                elif isinstance(item, list):
                    item = [child.arrange(i) for i in item]
            arranged[name] = item
        if len(arranged) != len(value):
            arranged.update((k, v) for k, v in value.items() if k not in arranged)
        return arranged

    # --- JSON Schema -------------------------------------------------------------------------

    def ref(self) -> dict[str, str]:
        return shape_schemas.ref(self)

    def json_schema(self, *, portable: bool = False) -> dict[str, Any]:
        """The object's schema: for /openapi.json by default, self-contained for MCP
        `outputSchema`s with `portable` (apps/core/shape_schemas.py says how they differ)."""
        return shape_schemas.object_schema(self, portable=portable)


def components() -> dict[str, dict[str, Any]]:
    """Every component shape's OpenAPI schema, by name."""
    return {name: shape.json_schema() for name, shape in COMPONENTS.items()}


def page_of(item: Shape, name: str, *, cursor_description: str = "", component: bool = True) -> Shape:
    """`{items: [item], nextCursor}`, the paginated lists' wrapper."""
    return Shape(
        name,
        (
            Field("items", item, many=True),
            Field("nextCursor", STRING, source="next_cursor", nullable=True, description=cursor_description),
        ),
        params=("items", "next_cursor"),
        component=component,
    )


def envelope(name: str, key: str, item: Shape, *, many: bool = False, component: bool = True) -> Shape:
    """`{key: item}` (or a list of items), a single object's wrapper."""
    return Shape(name, (Field(key, item, many=many),), params=(key,), component=component)
