"""Writes to webhooks: endpoints, deliveries (created, replayed, cancelled, purged), recover.

One module per kind of write: `endpoints` (an endpoint's row, its signing secrets and its
installation), `deliveries` (deliveries queued, cancelled and purged) and `recover` (a window's
missed events queued again). Callers use the names below, `services.X`; a test that replaces a
module-level setting replaces it in the submodule that reads it (`services.recover.RECOVER_MAX`).
"""

from __future__ import annotations

from apps.webhooks.services.deliveries import (
    TEST_EVENT_TYPE,
    cancel_active_deliveries,
    create_event_deliveries,
    event_facts,
    purge_terminal_deliveries,
    queue_deliveries,
    queue_delivery,
    replay_delivery,
    resume_endpoint,
    send_test_delivery,
)
from apps.webhooks.services.endpoints import (
    DEFAULT_SECRET_GRACE_SECONDS,
    MAX_NAME_LENGTH,
    MAX_SECRET_GRACE_SECONDS,
    create_endpoint,
    delete_endpoint,
    disable_unauthorized,
    reconcile_installations,
    rotate_secret,
    standard_secrets,
    update_endpoint,
)
from apps.webhooks.services.recover import RECOVER_CHUNK, RECOVER_MAX, RECOVERABLE, recover_deliveries

__all__ = [
    "DEFAULT_SECRET_GRACE_SECONDS", "MAX_NAME_LENGTH", "MAX_SECRET_GRACE_SECONDS", "RECOVERABLE", "RECOVER_CHUNK",
    "RECOVER_MAX", "TEST_EVENT_TYPE", "cancel_active_deliveries", "create_endpoint", "create_event_deliveries",
    "delete_endpoint", "disable_unauthorized", "event_facts", "purge_terminal_deliveries", "queue_deliveries", "queue_delivery",
    "reconcile_installations", "recover_deliveries", "replay_delivery", "resume_endpoint", "rotate_secret",
    "send_test_delivery", "standard_secrets", "update_endpoint",
]
