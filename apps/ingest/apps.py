from django.apps import AppConfig


class IngestConfig(AppConfig):
    """Data in: the write door recorders use (the ingest API) and the history importer. Every
    write goes through apps.recordings' services, so events fire as for any other producer."""

    name = "apps.ingest"
