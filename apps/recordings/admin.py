"""Read-only back office for recordings: browse sessions, transcripts, segments and boards.

Nothing here writes: workspace data changes only through the services, where its realtime events
are recorded. Segments can number in the millions, so their pages never count or list them all.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from apps.core.admin import CappedCountPaginator, ReadOnlyMixin, clipped, short_time
from apps.recordings.models import BoardContent, Segment, Session, Transcript


def segments_url(transcript: Transcript) -> str:
    return reverse("admin:recordings_segment_changelist") + f"?transcript={transcript.pk}"


def change_link(obj, text: str | None = None) -> str:
    opts = obj._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, text if text is not None else str(obj))


class TranscriptInline(ReadOnlyMixin, admin.TabularInline):
    model = Transcript
    fields = ["revision", "created_at", "segments"]
    readonly_fields = fields
    extra = 0

    @admin.display(description="revision")
    def revision(self, obj: Transcript) -> str:
        return change_link(obj, obj.revision_kind)

    @admin.display(description="segments")
    def segments(self, obj: Transcript) -> str:
        return format_html('<a href="{}">{} segments</a>', segments_url(obj), obj.segments.count())


class BoardInline(ReadOnlyMixin, admin.TabularInline):
    model = BoardContent
    fields = ["board", "version", "status", "is_current", "source_revision_kind", "created_at"]
    readonly_fields = fields
    ordering = ["board_id", "-version"]
    extra = 0

    @admin.display(description="board")
    def board(self, obj: BoardContent) -> str:
        return change_link(obj, obj.board_id)


@admin.register(Session)
class SessionAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["__str__", "status", "workspace", "created", "ended"]
    list_filter = ["status", "workspace"]
    list_select_related = ["workspace"]
    search_fields = ["=id", "label"]
    ordering = ["-created_at", "-id"]
    show_full_result_count = False
    fields = ["id", "workspace", "label", "memo", "status", "started_at", "ended_at", "created_at", "updated_at"]
    readonly_fields = fields
    inlines = [TranscriptInline, BoardInline]

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Session) -> str:
        return short_time(obj.created_at)

    @admin.display(description="ended", ordering="ended_at")
    def ended(self, obj: Session) -> str:
        return short_time(obj.ended_at)


@admin.register(Transcript)
class TranscriptAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["transcript_id", "session_link", "revision_kind", "created", "segments_link"]
    list_filter = ["revision_kind"]
    list_select_related = ["session"]
    search_fields = ["=id", "=session__id"]
    ordering = ["-created_at", "-id"]
    show_full_result_count = False
    fields = ["id", "workspace", "session", "revision_kind", "created_at", "segment_count"]
    readonly_fields = fields

    @admin.display(description="id", ordering="id")
    def transcript_id(self, obj: Transcript) -> str:
        return clipped(obj.id, width="narrow")

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Transcript) -> str:
        return short_time(obj.created_at)

    @admin.display(description="session", ordering="session__label")
    def session_link(self, obj: Transcript) -> str:
        return change_link(obj.session)

    @admin.display(description="segments")
    def segments_link(self, obj: Transcript) -> str:
        return format_html('<a href="{}">segments</a>', segments_url(obj))

    @admin.display(description="segments")
    def segment_count(self, obj: Transcript) -> str:
        return format_html('<a href="{}">{} segments</a>', segments_url(obj), obj.segments.count())


@admin.register(Segment)
class SegmentAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """Browse one transcript's segments: `?transcript=<id>` (links from sessions and transcripts)."""

    list_display = ["sequence", "session_committed_index", "timestamp_start", "timestamp_end", "speaker_label",
                    "short_text", "confidence"]  # fmt: skip
    # The (transcript, sequence) unique index serves this order, with or without the filter.
    ordering = ["transcript", "sequence"]
    list_per_page = 100
    paginator = CappedCountPaginator
    show_full_result_count = False
    raw_id_fields = ["transcript"]
    fields = ["id", "workspace", "transcript", "sequence", "session_committed_index", "timestamp_start",
              "timestamp_end", "speaker_label", "text", "confidence", "created_at"]  # fmt: skip
    readonly_fields = fields

    @admin.display(description="text")
    def short_text(self, obj: Segment) -> str:
        return Truncator(obj.text).chars(120)


@admin.register(BoardContent)
class BoardContentAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["board_id", "version", "session_link", "status", "is_current", "source_revision_kind",
                    "created"]  # fmt: skip
    list_filter = ["board_id", "status", "is_current", "source_revision_kind"]
    list_select_related = ["session"]
    search_fields = ["=id", "=session__id", "board_id"]
    ordering = ["-created_at", "-id"]
    show_full_result_count = False
    fields = ["id", "workspace", "session", "board_id", "version", "status", "is_current", "source_revision_kind",
              "payload_hash", "created_at", "pretty_payload"]  # fmt: skip
    readonly_fields = fields

    @admin.display(description="session", ordering="session__label")
    def session_link(self, obj: BoardContent) -> str:
        return change_link(obj.session)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: BoardContent) -> str:
        return short_time(obj.created_at)

    @admin.display(description="payload")
    def pretty_payload(self, obj: BoardContent) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.payload, indent=2, ensure_ascii=False))
