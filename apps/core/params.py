"""Query-string validation with DRF serializers, so the same class documents the parameters
(drf-spectacular) and enforces them. Any failure is `400 invalid_request`."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

from apps.core.errors import InvalidRequest

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
        raise InvalidRequest()
    return serializer.validated_data
