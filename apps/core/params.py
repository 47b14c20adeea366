"""Query-string validation with DRF serializers, so the same class documents the parameters
(drf-spectacular) and enforces them. Any failure is `400 invalid_request` whose `detail` names
the first failing parameter (in the serializer's order) and what it must be, e.g.
`limit: must be an integer from 1 to 100`; never the value that was sent.

Every REST GET calls validate_query, with `NoQuery` when it takes no parameters: a parameter
the operation does not declare is `400` naming it (`label: unknown query parameter; the
parameters are cursor, limit, …`), not silently ignored (a `?status=` that is ignored looks like
a filter to the client, and is not). Views call it after DRF's authentication and scope checks, so a request
without a valid credential is 401 whatever its parameters (an `access_token` in the query is
never a credential: it is an unknown parameter like any other)."""

from __future__ import annotations

import functools
import re
import threading
from datetime import datetime
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from apps.core.errors import InvalidRequest, invalid
from apps.core.timestamps import parse_iso

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
SEARCH_QUERY_MAX = 500


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


class SearchQueryField(serializers.CharField):
    """Words to find: 1 to SEARCH_QUERY_MAX characters, taken as sent."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(min_length=1, allow_blank=False, trim_whitespace=False, max_length=SEARCH_QUERY_MAX, **kwargs)


class RevisionKindField(serializers.ChoiceField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=["committed", "final"], required=False, **kwargs)


class ChoicesField(serializers.ListField):
    """One or more of `choices`: repeated (`status=a&status=b`) or comma-separated (`status=a,b`),
    deduplicated, in the order given."""

    def __init__(self, choices: list[str], **kwargs: Any) -> None:
        self.choices = list(choices)
        kwargs.setdefault("required", False)
        super().__init__(child=serializers.ChoiceField(choices=self.choices), allow_empty=False, **kwargs)

    def to_internal_value(self, data: Any) -> list[str]:
        values = [part for item in (data if isinstance(data, list) else [data]) for part in str(item).split(",")]
        return list(dict.fromkeys(super().to_internal_value(values)))


@extend_schema_field(OpenApiTypes.DATETIME)
class TimestampField(serializers.Field):
    """An ISO 8601 timestamp with a time zone (`2026-01-01T00:00:00Z`); `+` in an offset must be
    sent as `%2B`, like any `+` in a query string."""

    default_error_messages = {"invalid": "must be an ISO 8601 timestamp with a time zone"}

    def to_internal_value(self, data: Any) -> datetime:
        try:
            parsed = parse_iso(data) if isinstance(data, str) else None
        except ValueError:
            parsed = None
        if parsed is None or parsed.tzinfo is None:
            self.fail("invalid")
        return parsed

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


class NoQuery(serializers.Serializer):
    """The parameters of an operation that takes none."""


# What a parameter's name may look like to be echoed in a 400: anything else (a token pasted
# as a name) is counted, not shown.
_SHOWABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\[\]-]{0,39}")


def unknown_parameters(known: list[str], names) -> InvalidRequest | None:
    """The 400 for query parameters `names` has beyond `known`, naming them (the event stream,
    not a DRF view, calls it with its one parameter)."""
    unknown = [name for name in dict.fromkeys(names) if name not in known]
    if not unknown:
        return None
    shown = [n for n in unknown if _SHOWABLE_NAME.fullmatch(n) and not n.lower().startswith("svc_")]
    hidden = len(unknown) - len(shown)
    label = ", ".join(shown + ([f"{hidden} more not shown"] if hidden else []))
    what = "unknown query parameter" + ("s" if len(unknown) > 1 else "")
    takes = f"the parameters are {', '.join(known)}" if known else "this operation takes no query parameters"
    return invalid(label, f"{what}; {takes}")


@functools.cache
def _parameters(serializer_class: type[serializers.Serializer]) -> dict[str, bool]:
    """The parameter names a query serializer declares, in order, and whether each is a list."""
    return {name: isinstance(field, serializers.ListField) for name, field in serializer_class().fields.items()}


def query_data(serializer_class: type[serializers.Serializer], request, also: tuple[str, ...] = ()) -> dict[str, Any]:
    """The declared parameters' values to validate; a parameter not declared (nor in `also`)
    is the 400 naming it."""
    fields = _parameters(serializer_class)
    refused = unknown_parameters([*fields, *also], request.query_params)
    if refused is not None:
        raise refused
    # A plain dict, not the QueryDict: DRF reads a QueryDict as an HTML form, where `limit=`
    # means "not given". For an API, an empty value is an invalid one. List fields get every
    # value of a repeated parameter.
    return {
        name: request.query_params.getlist(name) if fields[name] else request.query_params.get(name)
        for name in request.query_params
        if name in fields
    }


def validate_query(serializer_class: type[serializers.Serializer], request, also: tuple[str, ...] = ()) -> dict[str, Any]:
    """The validated parameters of `serializer_class`; `also`: parameters the view reads and
    validates itself (known, so not refused, and not in the result)."""
    data = query_data(serializer_class, request, also)
    serializer = _serializer(serializer_class)
    try:
        # What `serializer_class(data=data).is_valid()` runs, on an instance kept per class and
        # thread: a new one deep-copies its declared fields on first use, per request.
        return serializer.run_validation(data)
    except ValidationError as failed:
        errors = failed.detail
    name = next(name for name in serializer.fields if name in errors)
    codes = {getattr(error, "code", None) for error in errors[name]}
    raise invalid(name, "required" if "required" in codes else expectation(serializer.fields[name]))


_serializers = threading.local()


def _serializer(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    """This thread's instance of a query serializer, its fields bound once. Validation keeps no
    state on it (`run_validation` returns the values or raises); the threads of a process each
    get their own, as a lane runs one request at a time."""
    kept = _serializers.__dict__.setdefault("by_class", {})
    serializer = kept.get(serializer_class)
    if serializer is None:
        serializer = kept[serializer_class] = serializer_class()
        serializer.fields  # noqa: B018 - bind the fields now
    return serializer


def expectation(field: serializers.Field) -> str:
    """What a valid value of a query parameter looks like, from the field's own bounds."""
    if isinstance(field, ChoicesField):
        return "must be one or more of " + ", ".join(field.choices) + " (repeated or comma-separated)"
    if isinstance(field, serializers.ChoiceField):
        return "must be one of " + ", ".join(str(choice) for choice in field.choices)
    if isinstance(field, TimestampField):
        return "must be an ISO 8601 timestamp with a time zone, e.g. 2026-01-01T00:00:00Z"
    if isinstance(field, serializers.IntegerField):
        if field.min_value is None or field.max_value is None:
            return "must be an integer"
        return f"must be an integer from {field.min_value} to {field.max_value}"
    if isinstance(field, serializers.CharField):
        if field.max_length is not None:
            return f"must be 1 to {field.max_length} characters"
        return "must not be empty"
    return "invalid"
