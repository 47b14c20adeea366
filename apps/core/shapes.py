"""Wire shapes, each declared once: field names, types, nullability and enum values.

A `Shape` is the single source for everything that says how an object looks on the wire: its
representation function (`shape.encode`, a closure over the declaration that builds the dict
in declaration order; docs/decisions/mechanisms.md says why not generated code), which REST,
MCP, the event stream and webhooks all call; its JSON Schema for /openapi.json and for MCP
`outputSchema`s (`json_schema`); and its /openapi.json component (`component=True`, added by
apps/core/openapi.py).

Enum values come from the models' `TextChoices`, so a new status cannot reach the wire
undocumented. The key order of the encoded dict is the declaration order: the bytes on the
wire are part of the contract (webhook bodies are signed)."""

from __future__ import annotations

import keyword
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any

from django.db.models import TextChoices

from apps.core.timestamps import iso_ms

STRING, INTEGER, NUMBER, BOOLEAN, TIMESTAMP, JSON = "string", "integer", "number", "boolean", "timestamp", "json"
SCALARS = {STRING: "string", INTEGER: "integer", NUMBER: "number", BOOLEAN: "boolean", TIMESTAMP: "string"}
TIMESTAMP_DESCRIPTION = "ISO 8601, UTC, milliseconds, `Z`"
# Any JSON value, spelled with a validation keyword so that a portable schema constrains
# something (a schema with no keyword at all reads as `true` to portability checks).
ANY_JSON_TYPES = ("object", "array", "string", "number", "boolean", "null")

# What an encoder reads one value with: a function of the encoder's arguments (a tuple).
Reader = Callable[[tuple], Any]

# Every shape declared with component=True, by component name, in declaration order.
COMPONENTS: dict[str, Shape] = {}


@dataclass(frozen=True)
class Field:
    """One property. `kind` is a scalar name above or a nested Shape.

    `source` is the dotted path the value is read from: a path whose first part names one of
    the shape's parameters starts there (`"transcript.id"`); otherwise the shape has one
    parameter and the path starts from it (`"started_at"` reads `obj.started_at`). Without
    `source`, the wire name in snake_case. `getter` computes the value from the shape's
    parameters instead, for the odd field whose rule is not a read.
    """

    name: str
    kind: str | Shape
    source: str | None = None
    nullable: bool = False
    choices: type[TextChoices] | Sequence[str] | None = None
    const: str | None = None
    many: bool = False
    required: bool = True
    description: str = ""
    # The model stores "no value" as "" (a CharField with blank=True): the wire says null.
    empty_is_null: bool = False
    # The value is already in wire form (stored JSON, a timestamp the caller formatted): it is
    # written as is, and the declaration only documents it.
    stored: bool = False
    getter: Callable[..., Any] | None = None

    @property
    def path(self) -> str:
        """Where the value is read from (see `source`)."""
        return self.source if self.source is not None else snake_case(self.name)

    @property
    def enum(self) -> list[str] | None:
        if self.choices is None:
            return None
        if isinstance(self.choices, type) and issubclass(self.choices, TextChoices):
            return [str(value) for value in self.choices.values]
        return [str(value) for value in self.choices]


@dataclass(frozen=True)
class Spread:
    """Another shape's fields inlined at this point (the search hit carries the session
    summary's fields at its top level as well as under `session`)."""

    shape: Shape
    source: str


def snake_case(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


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
        return tuple((f.name, f.kind if isinstance(f.kind, Shape) else None, f.many) for f in self.fields)

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

    # --- The representation function -------------------------------------------------------

    @property
    def encode(self) -> Callable[..., dict[str, Any]]:
        """The object as a dict in declaration order, with the reads and conversions the
        declaration names. A shape of one object read attribute by attribute (most of them)
        reads them all in one `attrgetter` call and zips them with the wire names, both in C;
        the others are encoded field by field."""
        if self._encode is None:
            self._encode = self._compile()
        return self._encode

    @property
    def encode_formatted(self) -> Callable[..., dict[str, Any]]:
        """`encode` for rows whose timestamps the database already wrote in wire form
        (apps/core/timestamps.py `IsoMs`): they are copied, not converted. The transcript fast
        path reads segments so; the rest is the same function."""
        if self._encode_formatted is None:
            self._encode_formatted = self._compile(formatted=True)
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
            self._row_encoders[key] = self._compile_rows(stamp)
        return self._row_encoders[key]

    def encode_with_rows(self, stamp: Callable[[Any], str] | None = None) -> Callable[..., dict[str, Any]]:
        """`encode_formatted`, except that a list of a flat shape (`many=True`) is given as
        rows for that shape's `encode_rows(stamp)`: the transcript bodies, whose envelope is read
        by name and whose segments are rows."""
        key = ("with_rows", stamp)
        if key not in self._row_encoders:
            self._row_encoders[key] = self._compile(formatted=True, rows_stamp=(stamp,))
        return self._row_encoders[key]

    def flat_columns(self) -> tuple[str, ...]:
        """The one column per field `encode_rows` reads, in field order; ValueError unless the
        shape is flat (every field a plain read of an attribute of its one parameter)."""
        paths = self.source_attributes()
        for f in self.fields:
            if isinstance(f.kind, Shape) or f.getter is not None or f.many or "." in f.path:
                raise ValueError(f"{self.name}.{f.name} is not a column: {self.name} has no row encoder")
        if len(paths) != len(self.fields):
            raise ValueError(f"{self.name} reads a column twice: no row encoder")
        return paths

    def _compile_rows(self, stamp: Callable[[Any], str] | None) -> Callable[[Any], list[dict[str, Any]]]:
        self.flat_columns()
        names = tuple(f.name for f in self.fields)
        converters: list[tuple[str, Callable[[Any], Any]]] = []
        for f in self.fields:
            if f.kind == TIMESTAMP and stamp is not None and not f.stored:
                converters.append((f.name, _unless_none(stamp) if f.nullable else stamp))
            elif f.empty_is_null and not f.stored:
                converters.append((f.name, _empty_is_null))
        if not converters:
            return lambda rows: list(map(dict, map(zip, repeat(names), rows)))
        if len(converters) == 1:
            ((name, convert),) = converters

            def encode_one_conversion(rows: Any) -> list[dict[str, Any]]:
                encoded = list(map(dict, map(zip, repeat(names), rows)))
                for item in encoded:
                    item[name] = convert(item[name])
                return encoded

            return encode_one_conversion

        def encode_rows(rows: Any) -> list[dict[str, Any]]:
            encoded = list(map(dict, map(zip, repeat(names), rows)))
            for item in encoded:
                for name, convert in converters:
                    item[name] = convert(item[name])
            return encoded

        return encode_rows

    def _compile(self, formatted: bool = False, rows_stamp: tuple | None = None) -> Callable[..., dict[str, Any]]:
        reads = self._attribute_reads(formatted, rows_stamp)
        if reads is not None:
            return _encode_by_reads(*reads)
        scope = {param: itemgetter(i) for i, param in enumerate(self.params)}
        items = tuple(self._items(scope, formatted, rows_stamp))

        def encode(*args: Any) -> dict[str, Any]:
            return {name: value(args) for name, value in items}

        return encode

    def _attribute_reads(
        self, formatted: bool, rows_stamp: tuple | None
    ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, Callable[[Any], Any]], ...]] | None:
        """For a shape of one parameter whose every field is read from an attribute of it (no
        `getter`): the wire names, the attribute paths (relative to the parameter) and the
        (wire name, conversion) of the fields converted after the read, in field order. None
        for other shapes, which `_items` encodes field by field."""
        if len(self.params) != 1:
            return None
        fields = self._relative_fields("")
        if fields is None:
            return None
        names, paths, converters = [], [], []
        for f, path in fields:
            if f.getter is not None or not path:
                return None
            names.append(f.name)
            paths.append(path)
            convert = self._conversion(f, formatted, rows_stamp)
            if convert is not None:
                converters.append((f.name, convert))
        return tuple(names), tuple(paths), tuple(converters)

    def _relative_fields(self, prefix: str) -> list[tuple[Field, str]] | None:
        """Each field with its source path relative to the one parameter, behind `prefix`; None
        when a spread shape takes several parameters (its fields are not reads of one object)."""
        out: list[tuple[Field, str]] = []
        for entry in self.entries:
            path = entry.source if isinstance(entry, Spread) else entry.path
            if not all(part.isidentifier() and not keyword.iskeyword(part) for part in path.split(".")):
                raise ValueError(f"{self.name}: source {path!r} is not a dotted attribute path")
            root, _, rest = path.partition(".")
            path = ".".join(part for part in (prefix, rest if root == self.params[0] else path) if part)
            if isinstance(entry, Spread):
                inner = entry.shape._relative_fields(path) if len(entry.shape.params) == 1 else None
                if inner is None:
                    return None
                out.extend(inner)
            else:
                out.append((entry, path))
        return out

    def _conversion(self, f: Field, formatted: bool, rows_stamp: tuple | None) -> Callable[[Any], Any] | None:
        """What turns the value read for `f` into its wire form (None: it already is)."""
        if f.stored:
            return None
        if isinstance(f.kind, Shape):
            child = f.kind
            if len(child.params) != 1:
                raise ValueError(f"{self.name}.{f.name}: a nested shape takes one parameter")
            if f.many and rows_stamp is not None:
                convert = child.encode_rows(*rows_stamp)
            elif f.many:
                one = child.encode_formatted if formatted else child.encode
                convert = lambda items: [one(item) for item in items]  # noqa: E731
            else:
                convert = child.encode_formatted if formatted else child.encode
        elif f.kind == TIMESTAMP and not formatted:
            convert = iso_ms
        elif f.empty_is_null:
            return _empty_is_null
        else:
            return None
        return _unless_none(convert) if f.nullable else convert

    def _items(self, scope: dict[str, Reader], formatted: bool, rows_stamp: tuple | None) -> list[tuple[str, Reader]]:
        """(wire name, reader of its value from the encoder's arguments), in wire order."""
        items: list[tuple[str, Reader]] = []
        for entry in self.entries:
            if isinstance(entry, Spread):
                child = entry.shape
                items.extend(child._items({child.params[0]: self._path(entry.source, scope)}, formatted, rows_stamp))
            else:
                items.append((entry.name, self._value(entry, scope, formatted, rows_stamp)))
        return items

    def _path(self, path: str, scope: dict[str, Reader]) -> Reader:
        if not all(part.isidentifier() and not keyword.iskeyword(part) for part in path.split(".")):
            raise ValueError(f"{self.name}: source {path!r} is not a dotted attribute path")
        root, _, rest = path.partition(".")
        if root not in self.params:
            if len(self.params) != 1:
                raise ValueError(f"{self.name}: source {path!r} does not start with one of {self.params}")
            root, rest = self.params[0], path
        base = scope[root]
        if not rest:
            return base
        read = attrgetter(rest)
        return lambda args: read(base(args))

    def _value(self, f: Field, scope: dict[str, Reader], formatted: bool, rows_stamp: tuple | None) -> Reader:
        if f.getter is not None:
            getter, params = f.getter, [scope[p] for p in self.params]
            return lambda args: getter(*(param(args) for param in params))
        read = self._path(f.path, scope)
        convert = self._conversion(f, formatted, rows_stamp)
        if convert is None:
            return read
        return lambda args: convert(read(args))

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
        if not self.component:
            raise ValueError(f"{self.name} is not a component")
        return {"$ref": f"#/components/schemas/{self.name}"}

    def json_schema(self, *, portable: bool = False) -> dict[str, Any]:
        """The object's schema. By default for /openapi.json (OpenAPI 3.1, nested shapes by `$ref`
        to their component, nullability as `type: [t, "null"]`, as drf-spectacular writes it).
        `portable` for MCP `outputSchema`s: self-contained, no `$ref`, nullability as `anyOf` with a
        `{"type": "null"}` branch, free-form JSON spelled out as the union of JSON's types, because
        clients that map tool schemas onto a single-`type` dialect reject or drop type lists (the
        MCP Inspector's `--strict` check flags them)."""
        properties = {f.name: _property(f, portable) for f in self.fields}
        schema: dict[str, Any] = {"type": "object"}
        if self.description:
            schema["description"] = self.description
        schema["properties"] = properties
        schema["required"] = [f.name for f in self.fields if f.required]
        if self.closed:
            schema["additionalProperties"] = False
        return schema


def _property(f: Field, portable: bool) -> dict[str, Any]:
    if isinstance(f.kind, Shape):
        value = f.kind.ref() if f.kind.component and not portable else f.kind.json_schema(portable=portable)
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


def _encode_by_reads(
    names: tuple[str, ...], paths: tuple[str, ...], converters: tuple[tuple[str, Callable[[Any], Any]], ...]
) -> Callable[[Any], dict[str, Any]]:
    """An encoder of one object: its attributes read in one `attrgetter` call, zipped with the
    wire names (declaration order), then the converted fields replaced in place (a replaced key
    keeps its position). Each read and each zip runs in C, so a flat shape costs about what a
    dict literal of attribute reads does."""
    read = attrgetter(*paths)
    if len(paths) == 1:
        one = read
        read = lambda obj: (one(obj),)  # noqa: E731 - attrgetter of one path returns the value itself
    if not converters:
        return lambda obj: dict(zip(names, read(obj)))

    def encode(obj: Any) -> dict[str, Any]:
        item = dict(zip(names, read(obj)))
        for name, convert in converters:
            item[name] = convert(item[name])
        return item

    return encode


def _unless_none(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else convert(value)


def _empty_is_null(value: Any) -> Any:
    return value or None
