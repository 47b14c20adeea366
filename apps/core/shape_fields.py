"""The parts a wire shape is declared with (apps/core/shapes.py): the scalar kinds, `Field` (one
property: its wire name, kind, where its value is read from, nullability, enum values) and
`Spread` (another shape's fields inlined). The representation functions (apps/core/shape_encoders.py)
and the JSON Schemas (apps/core/shape_schemas.py) are built from these declarations alone."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import TextChoices

if TYPE_CHECKING:
    from apps.core.shapes import Shape

STRING, INTEGER, NUMBER, BOOLEAN, TIMESTAMP, JSON = "string", "integer", "number", "boolean", "timestamp", "json"
SCALARS = {STRING: "string", INTEGER: "integer", NUMBER: "number", BOOLEAN: "boolean", TIMESTAMP: "string"}


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
    def nested(self) -> Shape | None:
        """The nested shape, or None for a scalar field."""
        return None if isinstance(self.kind, str) else self.kind

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
