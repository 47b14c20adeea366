"""The official Python client for the Connect API.

    from connect_client import Connect
    client = Connect("https://connect.example.com", api_key="svc_…")   # or Connect(): CONNECT_BASE_URL, CONNECT_API_KEY
    for session in client.sessions.list():
        print(session.id, session.status, session.created_at)
"""

from __future__ import annotations

from . import errors, models, types, webhooks
from ._http import RetryPolicy
from ._response import APIResponse, ETagCache
from .client import OPERATIONS, AsyncConnect, Connect
from .ingest import IngestSegment
from .errors import *  # noqa: F403 - one exception per wire code, importable from the package
from .errors import BY_CODE, ConfigurationError, ConnectError, WebhookVerificationError
from .models import (
    AppendResult,
    Board,
    BoardSummary,
    Delivery,
    DeliveryAttempt,
    Event,
    FinalTranscriptResult,
    IngestSession,
    Recovery,
    RevisionSegment,
    SearchHit,
    Segment,
    Session,
    SessionSummary,
    Transcript,
    TranscriptRevision,
    Webhook,
    WebhookFilter,
)
from .pagination import AsyncPaginator, Page, Paginator
from .stream import AsyncEventStream, EventStream

__version__ = "0.2.0"

__all__ = [
    "APIResponse", "ConfigurationError", "ETagCache", "types",
    "AppendResult", "FinalTranscriptResult", "IngestSegment", "IngestSession",
    "AsyncConnect", "AsyncEventStream", "AsyncPaginator", "BY_CODE", "Board", "BoardSummary", "Connect",
    "ConnectError", "Delivery", "DeliveryAttempt", "Event", "EventStream", "OPERATIONS", "Page", "Paginator",
    "Recovery", "RetryPolicy", "RevisionSegment", "SearchHit", "Segment", "Session", "SessionSummary",
    "Transcript", "TranscriptRevision", "Webhook", "WebhookFilter", "WebhookVerificationError", "errors",
    "models", "webhooks",
]
