"""The ingest API: thin views over apps.recordings' services, which record the events, so a
recorder's writes reach the event log, streams, MCP and webhooks as any producer's do.

Every view: an ingest credential (`ingest = True`: apps/access/admission.py), the body checked whole
(apps/ingest/inputs.py), then one transaction that writes and, with an `Idempotency-Key`,
stores the answer (apps/ingest/idempotency.py). A session is named by the producer's own id,
in the credential's workspace: another workspace's session of that id is another session.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

import orjson
from django.db import transaction
from django.http import HttpResponse
from rest_framework.request import Request
from rest_framework.views import APIView

from apps.access.rest import HasScope
from apps.core.errors import ApiError, Conflict, NotFound, as_api_error, error_response, invalid
from apps.core.text import NotText, loads_text
from apps.ingest import idempotency, inputs, openapi, shapes
from apps.recordings import selectors, services
from apps.recordings.models import Session
from apps.recordings.representations import board_repr
from apps.tenancy.models import INGEST_SCOPE

ingest_session_repr = shapes.INGEST_SESSION.encode
ingest_append_repr = shapes.INGEST_APPEND.encode
ingest_final_repr = shapes.INGEST_FINAL.encode


def _json(data: Any, status: int) -> HttpResponse:
    return HttpResponse(orjson.dumps(data), content_type="application/json", status=status)


def _body(request: Request) -> Any:
    content_type = (request.content_type or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise invalid("Content-Type", "must be application/json")
    try:
        return loads_text(request.body or b"")
    except NotText:
        raise invalid("body", "must be JSON text (UTF-8, no U+0000, no lone surrogate, no NaN or Infinity)") from None


def _checked(parse: Callable[..., Any], *args: Any) -> Any:
    try:
        return parse(*args)
    except inputs.Invalid as bad:
        raise invalid(bad.name, bad.why) from None


def _session(request: Request, external_id: str) -> Session:
    _checked(inputs.path_id, external_id, "externalId", inputs.EXTERNAL_ID)
    return selectors.session_by_external_id(workspace=request.auth.workspace, external_id=external_id)


def _replayed(answer: idempotency.Answer) -> HttpResponse:
    response = HttpResponse(answer.body, content_type="application/json", status=answer.status)
    response[idempotency.REPLAYED] = "true"
    return response


def idempotent(handler: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Runs `handler` in one transaction; with an `Idempotency-Key`, stores its answer in that
    transaction (or, for a refusal, on its own) and answers a repeat with it."""

    @wraps(handler)
    def view(self, request: Request, **kwargs: Any) -> HttpResponse:
        key = request.headers.get(idempotency.HEADER)
        if key is None:
            with transaction.atomic():
                return handler(self, request, **kwargs)
        _checked(inputs.path_id, key, idempotency.HEADER, inputs.IDEMPOTENCY_KEY)
        claimed = idempotency.claim(
            principal=request.auth,
            key=key,
            fingerprint=idempotency.fingerprint(request.method, request.path, request.body or b""),
        )
        if isinstance(claimed, idempotency.Answer):
            return _replayed(claimed)
        try:
            with transaction.atomic():
                response = handler(self, request, **kwargs)
                idempotency.store(claimed, response.status_code, response.content)
            return response
        except Exception as exc:
            error = as_api_error(exc)
            if error is not None and error.status < 500:
                idempotency.store(claimed, error.status, error_response(error).content)
            else:
                idempotency.release(claimed)
            raise

    return view


class IngestView(APIView):
    ingest = True  # the door admits ingest credentials only (apps/access/admission.py)
    permission_classes = [HasScope.of(INGEST_SCOPE)]


class SessionApi(IngestView):
    @openapi.put_session
    @idempotent
    def put(self, request: Request, externalId: str) -> HttpResponse:
        _checked(inputs.path_id, externalId, "externalId", inputs.EXTERNAL_ID)
        changes = _checked(inputs.session_changes, _body(request))
        try:
            session, created = services.put_external_session(
                workspace=request.auth.workspace, external_id=externalId, **changes
            )
        except services.InvalidTimes:
            raise invalid("endedAt", "must not be before startedAt") from None
        return _json(ingest_session_repr(session), 201 if created else 200)


class SegmentsApi(IngestView):
    @openapi.append_segments
    @idempotent
    def post(self, request: Request, externalId: str) -> HttpResponse:
        # The session is found by the statement that locks it (no read of its own); the
        # answers are as for any ingest call: an unknown session is 404 before a bad body.
        _checked(inputs.path_id, externalId, "externalId", inputs.EXTERNAL_ID)
        try:
            first, segments = _checked(inputs.append_batch, _body(request))
        except ApiError:
            _session(request, externalId)
            raise
        try:
            appended = services.append_sequenced_segments(
                workspace_id=request.auth.workspace.pk, external_id=externalId, first_sequence=first, segments=segments
            )
        except Session.DoesNotExist:
            raise NotFound() from None
        except services.SequenceConflict as conflict:
            raise Conflict(detail=str(conflict), expectedSequence=conflict.expected) from None
        except services.SessionClosed as closed:
            raise Conflict(detail=str(closed)) from None
        answer = ingest_append_repr(appended.session_id, len(appended.created), appended.acknowledged,
                                    appended.next_sequence)
        return _json(answer, 200)


class StatusApi(IngestView):
    @openapi.set_status
    @idempotent
    def post(self, request: Request, externalId: str) -> HttpResponse:
        session = _session(request, externalId)
        status = _checked(inputs.target_status, _body(request))
        try:
            session, _ = services.set_session_status(session=session, status=status)
        except services.InvalidTransition:
            allowed = sorted(services.STATUS_TRANSITIONS[session.status])
            raise Conflict(
                detail=f"status: a {session.status} session cannot become {status}; "
                + (f"it can become {', '.join(allowed)}" if allowed else "it is final")
            ) from None
        return _json(ingest_session_repr(session), 200)


class FinalTranscriptApi(IngestView):
    @openapi.put_final_transcript
    @idempotent
    def put(self, request: Request, externalId: str) -> HttpResponse:
        session = _session(request, externalId)
        segments = _checked(inputs.final_segments, _body(request))
        transcript = services.write_final_transcript(session=session, segments=segments)
        return _json(ingest_final_repr(transcript, len(segments)), 200)


class BoardApi(IngestView):
    @openapi.put_board
    @idempotent
    def put(self, request: Request, externalId: str, boardId: str) -> HttpResponse:
        session = _session(request, externalId)
        _checked(inputs.path_id, boardId, "boardId", inputs.BOARD_ID)
        status, kind, payload = _checked(inputs.board, _body(request))
        board, added = services.put_board(
            session=session, board_id=boardId, payload=payload, source_revision_kind=kind, status=status
        )
        return _json(board_repr(board), 201 if added else 200)
