from django.urls import path

from apps.recordings import api

urlpatterns = [
    path("sessions", api.SessionListApi.as_view()),
    path("sessions/<str:id>", api.SessionDetailApi.as_view()),
    path("sessions/<str:id>/transcripts", api.TranscriptRevisionsApi.as_view()),
    path("sessions/<str:id>/transcript", api.FlatTranscriptApi.as_view()),
    path("sessions/<str:sessionId>/boards", api.BoardListApi.as_view()),
    path("sessions/<str:sessionId>/boards/<str:boardSpecId>", api.BoardDetailApi.as_view()),
    path("transcripts/search", api.TranscriptSearchApi.as_view()),
]
