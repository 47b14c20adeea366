"""`event_recorded` is sent inside the recording transaction (see services.record_event), so a
receiver's writes (webhook deliveries) commit or roll back with the event itself."""

import django.dispatch

event_recorded = django.dispatch.Signal()  # kwargs: event
