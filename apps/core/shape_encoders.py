"""A shape's representation functions, built once from its declaration (apps/core/shapes.py
`Shape.encode`, `encode_formatted`, `encode_rows`, `encode_with_rows` cache what these return).

Each is a closure over the declaration that builds the dict in declaration order (the bytes on
the wire are part of the contract: webhook bodies are signed). A shape of one object read
attribute by attribute reads them all in one `attrgetter` call and zips them with the wire
names, both in C; the others are encoded field by field. docs/decisions/mechanisms.md says why
closures and not generated code."""

from __future__ import annotations

import keyword
from collections.abc import Callable
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

from apps.core.shape_fields import TIMESTAMP, Field, Spread
from apps.core.timestamps import iso_ms

if TYPE_CHECKING:
    from apps.core.shapes import Shape

# What an encoder reads one value with: a function of the encoder's arguments (a tuple).
Reader = Callable[[tuple], Any]


def object_encoder(shape: Shape, formatted: bool = False, rows_stamp: tuple | None = None) -> Callable[..., dict[str, Any]]:
    """The function from the shape's parameters to its dict. `formatted`: timestamps are wire
    text already (copied, not converted). `rows_stamp`: a list of a flat shape is given as rows
    for that shape's `encode_rows(*rows_stamp)`."""
    reads = _attribute_reads(shape, formatted, rows_stamp)
    if reads is not None:
        return _encode_by_reads(*reads)
    scope = {param: itemgetter(i) for i, param in enumerate(shape.params)}
    items = tuple(_items(shape, scope, formatted, rows_stamp))

    def encode(*args: Any) -> dict[str, Any]:
        return {name: value(args) for name, value in items}

    return encode


def rows_encoder(shape: Shape, stamp: Callable[[Any], str] | None) -> Callable[[Any], list[dict[str, Any]]]:
    """The function from rows (tuples of `shape.flat_columns()`) to the list of dicts, each
    tuple zipped with the wire names; `stamp` converts timestamps that are not wire text."""
    shape.flat_columns()
    names = tuple(f.name for f in shape.fields)
    converters: list[tuple[str, Callable[[Any], Any]]] = []
    for f in shape.fields:
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


def check_path(shape: Shape, path: str) -> None:
    if not all(part.isidentifier() and not keyword.iskeyword(part) for part in path.split(".")):
        raise ValueError(f"{shape.name}: source {path!r} is not a dotted attribute path")


def _attribute_reads(
    shape: Shape, formatted: bool, rows_stamp: tuple | None
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, Callable[[Any], Any]], ...]] | None:
    """For a shape of one parameter whose every field is read from an attribute of it (no
    `getter`): the wire names, the attribute paths (relative to the parameter) and the
    (wire name, conversion) of the fields converted after the read, in field order. None
    for other shapes, which `_items` encodes field by field."""
    if len(shape.params) != 1:
        return None
    fields = _relative_fields(shape, "")
    if fields is None:
        return None
    names, paths, converters = [], [], []
    for f, path in fields:
        if f.getter is not None or not path:
            return None
        names.append(f.name)
        paths.append(path)
        convert = _conversion(shape, f, formatted, rows_stamp)
        if convert is not None:
            converters.append((f.name, convert))
    return tuple(names), tuple(paths), tuple(converters)


def _relative_fields(shape: Shape, prefix: str) -> list[tuple[Field, str]] | None:
    """Each field with its source path relative to the one parameter, behind `prefix`; None
    when a spread shape takes several parameters (its fields are not reads of one object)."""
    out: list[tuple[Field, str]] = []
    for entry in shape.entries:
        path = entry.source if isinstance(entry, Spread) else entry.path
        check_path(shape, path)
        root, _, rest = path.partition(".")
        path = ".".join(part for part in (prefix, rest if root == shape.params[0] else path) if part)
        if isinstance(entry, Spread):
            inner = _relative_fields(entry.shape, path) if len(entry.shape.params) == 1 else None
            if inner is None:
                return None
            out.extend(inner)
        else:
            out.append((entry, path))
    return out


def _conversion(shape: Shape, f: Field, formatted: bool, rows_stamp: tuple | None) -> Callable[[Any], Any] | None:
    """What turns the value read for `f` into its wire form (None: it already is)."""
    if f.stored:
        return None
    child = f.nested
    if child is not None:
        if len(child.params) != 1:
            raise ValueError(f"{shape.name}.{f.name}: a nested shape takes one parameter")
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


def _items(shape: Shape, scope: dict[str, Reader], formatted: bool, rows_stamp: tuple | None) -> list[tuple[str, Reader]]:
    """(wire name, reader of its value from the encoder's arguments), in wire order."""
    items: list[tuple[str, Reader]] = []
    for entry in shape.entries:
        if isinstance(entry, Spread):
            child = entry.shape
            items.extend(_items(child, {child.params[0]: _path(shape, entry.source, scope)}, formatted, rows_stamp))
        else:
            items.append((entry.name, _value(shape, entry, scope, formatted, rows_stamp)))
    return items


def _path(shape: Shape, path: str, scope: dict[str, Reader]) -> Reader:
    check_path(shape, path)
    root, _, rest = path.partition(".")
    if root not in shape.params:
        if len(shape.params) != 1:
            raise ValueError(f"{shape.name}: source {path!r} does not start with one of {shape.params}")
        root, rest = shape.params[0], path
    base = scope[root]
    if not rest:
        return base
    read = attrgetter(rest)
    return lambda args: read(base(args))


def _value(shape: Shape, f: Field, scope: dict[str, Reader], formatted: bool, rows_stamp: tuple | None) -> Reader:
    if f.getter is not None:
        getter, params = f.getter, [scope[p] for p in shape.params]
        return lambda args: getter(*(param(args) for param in params))
    read = _path(shape, f.path, scope)
    convert = _conversion(shape, f, formatted, rows_stamp)
    if convert is None:
        return read
    return lambda args: convert(read(args))


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
