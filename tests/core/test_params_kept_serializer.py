"""validate_query keeps one serializer per class and thread (apps/core/params.py): the same
validated values and the same 400 as a serializer built for the request, for every query
declaration of the API."""

from __future__ import annotations

import itertools
import threading

import pytest
from django.http import QueryDict
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from apps.core.errors import InvalidRequest
from apps.core.params import NoQuery, expectation, invalid, query_data, validate_query
from apps.events.api import EventListApi
from apps.recordings.api import SessionListApi, TranscriptQuery, TranscriptRevisionsApi, TranscriptSearchApi
from apps.webhooks.api import EndpointListApi

VALUES = {
    "limit": ["1", "100", "0", "101", "10.0", "", "abc"],
    "cursor": ["abc", ""],
    "status": ["completed", "completed,failed", "nope"],
    "createdAfter": ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00", "x"],
    "createdBefore": ["2026-01-01T00:00:00+01:00"],
    "format": ["json", "vtt", "pdf"],
    "maxCueChars": ["5", "0", "99999"],
    "revisionKind": ["final", "draft"],
    "query": ["hello", "", "x" * 501],
}


def fresh_serializer(serializer_class, request, also=()):
    """validate_query as it was: a serializer built for the request."""
    serializer = serializer_class(data=query_data(serializer_class, request, also))
    if not serializer.is_valid():
        name = next(name for name in serializer.fields if name in serializer.errors)
        codes = {getattr(error, "code", None) for error in serializer.errors[name]}
        raise invalid(name, "required" if "required" in codes else expectation(serializer.fields[name]))
    return serializer.validated_data


def outcome(fn):
    try:
        return "ok", dict(fn())
    except InvalidRequest as error:
        return "invalid", error.body(request_id=False)


@pytest.mark.parametrize("declaration", [
    NoQuery, SessionListApi.QueryIn, TranscriptQuery, TranscriptRevisionsApi.QueryIn, TranscriptSearchApi.QueryIn,
    EventListApi.QueryIn, EndpointListApi.QueryIn,
], ids=lambda c: c.__qualname__)  # fmt: skip
def test_the_kept_serializer_validates_as_a_new_one(declaration):
    names = list(declaration().fields)
    queries = [""]
    for name in names:
        queries += [f"{name}={value}" for value in VALUES.get(name, ["1", "x", ""])]
    for a, b in itertools.combinations(names, 2):
        queries += [f"{a}={VALUES.get(a, ['1'])[0]}&{b}={VALUES.get(b, ['x'])[-1]}"]
    factory = APIRequestFactory()
    for query in queries:
        request = Request(factory.get("/", QueryDict(query)))
        also = ("type",) if declaration is EventListApi.QueryIn else ()
        kept = outcome(lambda: validate_query(declaration, request, also=also))
        fresh = outcome(lambda: fresh_serializer(declaration, request, also=also))
        assert kept == fresh, (declaration.__qualname__, query)
        # And from another thread, with its own instance.
        other: list = []
        thread = threading.Thread(target=lambda: other.append(outcome(lambda: validate_query(declaration, request, also=also))))
        thread.start()
        thread.join()
        assert other == [fresh]
