"""Query-string validation with DRF serializers, so the same class documents the parameters
(drf-spectacular) and enforces them. Any failure is `400 invalid_request` whose `detail` names
the first failing parameter (in the serializer's order) and what it must be, e.g.
`limit: must be an integer from 1 to 100`; never the value that was sent."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

from apps.core.errors import invalid

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


class StrictIntegerField(serializers.IntegerField):
    """An integer written as digits only: `10` yes; `10.0`, ` 10`, `1e1` no."""

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, str) or not re.fullmatch(r"-?[0-9]{1,9}", data):
            self.fail("invalid")
        return super().to_internal_value(data)


class LimitField(StrictIntegerField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", f"Page size, 1 to {MAX_PAGE_SIZE}; default {DEFAULT_PAGE_SIZE}.")
        super().__init__(required=False, min_value=1, max_value=MAX_PAGE_SIZE, **kwargs)


class CursorField(serializers.CharField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", "Opaque cursor from the previous page's `nextCursor`.")
        super().__init__(required=False, min_length=1, allow_blank=False, trim_whitespace=False, **kwargs)


class RevisionKindField(serializers.ChoiceField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=["committed", "final"], required=False, **kwargs)


def validate_query(serializer_class: type[serializers.Serializer], request) -> dict[str, Any]:
    # A plain dict, not the QueryDict: DRF reads a QueryDict as an HTML form, where `limit=`
    # means "not given". For an API, an empty value is an invalid one.
    serializer = serializer_class(data={name: request.query_params.get(name) for name in request.query_params})
    if not serializer.is_valid():
        name = next(name for name in serializer.fields if name in serializer.errors)
        codes = {getattr(error, "code", None) for error in serializer.errors[name]}
        raise invalid(name, "required" if "required" in codes else expectation(serializer.fields[name]))
    return serializer.validated_data


def expectation(field: serializers.Field) -> str:
    """What a valid value of a query parameter looks like, from the field's own bounds."""
    if isinstance(field, serializers.ChoiceField):
        return "must be one of " + ", ".join(str(choice) for choice in field.choices)
    if isinstance(field, serializers.IntegerField):
        if field.min_value is None or field.max_value is None:
            return "must be an integer"
        return f"must be an integer from {field.min_value} to {field.max_value}"
    if isinstance(field, serializers.CharField):
        if field.max_length is not None:
            return f"must be 1 to {field.max_length} characters"
        return "must not be empty"
    return "invalid"
