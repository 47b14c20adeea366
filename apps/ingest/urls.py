from django.urls import path

from apps.ingest import api

urlpatterns = [
    path("ingest/sessions/<str:externalId>", api.SessionApi.as_view()),
    path("ingest/sessions/<str:externalId>/segments", api.SegmentsApi.as_view()),
    path("ingest/sessions/<str:externalId>/status", api.StatusApi.as_view()),
    path("ingest/sessions/<str:externalId>/transcripts/final", api.FinalTranscriptApi.as_view()),
    path("ingest/sessions/<str:externalId>/boards/<str:boardId>", api.BoardApi.as_view()),
]
