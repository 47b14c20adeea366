"""The resource namespaces of `Connect` (sync) and `AsyncConnect` (async), one module each."""

from .boards import AsyncBoards, Boards
from .deliveries import AsyncDeliveries, Deliveries
from .events import AsyncEvents, Events
from .ingest import AsyncIngest, AsyncIngestSessions, Ingest, IngestSessions
from .sessions import AsyncSessions, Sessions
from .transcripts import AsyncTranscripts, Transcripts
from .webhooks import AsyncWebhooks, Webhooks

__all__ = [
    "AsyncBoards", "AsyncDeliveries", "AsyncEvents", "AsyncIngest", "AsyncIngestSessions", "AsyncSessions",
    "AsyncTranscripts", "AsyncWebhooks", "Boards", "Deliveries", "Events", "Ingest", "IngestSessions", "Sessions",
    "Transcripts", "Webhooks",
]
