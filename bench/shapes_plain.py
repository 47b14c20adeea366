"""The wire shapes' encoders built the plain way: closures over the declaration, a dict made
by a comprehension at run time, no generated source. Same dicts, same key order as
apps/core/shapes.py's generated ones (bench/mechanisms_inprocess.py checks the bytes).
`install()` makes every Shape build its encoders this way from then on."""

from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import Any, Callable

from apps.core.shapes import TIMESTAMP, Shape, Spread
from apps.core.timestamps import iso_ms


def _read(shape: Shape, path: str, scope: dict[str, Callable]) -> Callable:
    root, _, rest = path.partition(".")
    if root in shape.params:
        base = scope[root]
    else:
        base, rest = scope[shape.params[0]], path
    if not rest:
        return base
    get = attrgetter(rest)
    return lambda args: get(base(args))


def _items(shape: Shape, scope: dict[str, Callable], formatted: bool, rows_stamp) -> list[tuple[str, Callable]]:
    items: list[tuple[str, Callable]] = []
    for entry in shape.entries:
        if isinstance(entry, Spread):
            child = entry.shape
            items += _items(child, {child.params[0]: _read(shape, entry.source, scope)}, formatted, rows_stamp)
        else:
            items.append((entry.name, _value(shape, entry, scope, formatted, rows_stamp)))
    return items


def _value(shape: Shape, f, scope, formatted: bool, rows_stamp) -> Callable:
    if f.getter is not None:
        getter, params = f.getter, [scope[p] for p in shape.params]
        return lambda args: getter(*(p(args) for p in params))
    read = _read(shape, f.path, scope)
    if f.stored:
        return read
    if isinstance(f.kind, Shape):
        child = f.kind
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
        return lambda args: read(args) or None
    else:
        return read
    if f.nullable:
        return lambda args: None if (v := read(args)) is None else convert(v)
    return lambda args: convert(read(args))


def compile_plain(self: Shape, formatted: bool = False, rows_stamp: tuple | None = None) -> Callable[..., dict]:
    scope = {p: itemgetter(i) for i, p in enumerate(self.params)}
    items = _items(self, scope, formatted, rows_stamp)

    def encode(*args: Any) -> dict[str, Any]:
        return {name: value(args) for name, value in items}

    return encode


def compile_rows_plain(self: Shape, stamp) -> Callable[[Any], list[dict]]:
    self.flat_columns()
    names = tuple(f.name for f in self.fields)
    converters = []
    for i, f in enumerate(self.fields):
        if f.kind == TIMESTAMP and stamp is not None and not f.stored:
            converters.append((f.name, (lambda v, s=stamp: None if v is None else s(v)) if f.nullable else stamp))
        elif f.empty_is_null and not f.stored:
            converters.append((f.name, lambda v: v or None))
    if not converters:
        return lambda rows: [dict(zip(names, row)) for row in rows]

    def encode_rows(rows):
        out = []
        for row in rows:
            item = dict(zip(names, row))
            for name, convert in converters:
                item[name] = convert(item[name])
            out.append(item)
        return out

    return encode_rows


def install() -> None:
    Shape._compile = compile_plain
    Shape._compile_rows = compile_rows_plain


def reset(shapes) -> None:
    """Forget every encoder built so far (for an A/B in one process)."""
    for shape in shapes:
        shape._encode = shape._encode_formatted = None
        shape._row_encoders.clear()
