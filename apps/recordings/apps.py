from django.apps import AppConfig


class RecordingsConfig(AppConfig):
    name = "apps.recordings"

    def ready(self) -> None:
        from django_q.models import Schedule

        from apps.core.periodic import keep_schedule
        from apps.events.models import EventType
        from apps.events.shapes import register_data
        from apps.recordings import representations, shapes
        from apps.recordings.semantic import hooks as semantic_hooks

        keep_schedule(
            self, "connect.recordings.compact_search_index", "apps.recordings.services.compact_search_index",
            Schedule.HOURLY,
        )  # fmt: skip
        # The outbox knows no domain: the data of the events recordings' services record.
        register_data(EventType.SESSION_CREATED, shapes.SESSION_CREATED_DATA, envelope_name="SessionCreatedEvent",
                      example=representations.example_session_created)  # fmt: skip
        register_data(EventType.SESSION_STATUS_CHANGED, shapes.SESSION_STATUS_CHANGED_DATA,
                      envelope_name="SessionStatusChangedEvent")  # fmt: skip
        register_data(EventType.TRANSCRIPT_SEGMENT_CREATED, shapes.TRANSCRIPT_SEGMENT_CREATED_DATA,
                      envelope_name="TranscriptSegmentCreatedEvent")  # fmt: skip
        semantic_hooks.connect()  # appended segments get vectors after commit (search by meaning)
