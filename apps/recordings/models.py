from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from apps.core.ids import new_id
from apps.tenancy.models import Workspace


class SessionStatus(models.TextChoices):
    RECORDING = "recording"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"


class RevisionKind(models.TextChoices):
    COMMITTED = "committed"  # produced in realtime, while recording
    FINAL = "final"  # generated after recording


class Session(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_id, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="sessions")
    label = models.CharField(max_length=500, null=True, blank=True)
    memo = models.TextField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=SessionStatus.choices, default=SessionStatus.RECORDING)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # The producer's own id for the session (the ingest API's `{externalId}` and the importer's
    # key): unique in its workspace, so a producer that says it twice means one session.
    external_id = models.CharField(max_length=200, null=True, blank=True)

    class Meta:
        # The list is newest first with a keyset cursor on (created_at, id).
        indexes = [models.Index(fields=["workspace", "-created_at", "-id"], name="session_ws_newest")]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "external_id"],
                condition=models.Q(external_id__isnull=False),
                name="session_ws_external_id",
            )
        ]

    def __str__(self) -> str:
        return self.label or self.id


class Transcript(models.Model):
    """One revision of a session's transcript: at most one `committed` and one `final`."""

    id = models.CharField(primary_key=True, max_length=40, default=new_id, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="transcripts")
    revision_kind = models.CharField(max_length=10, choices=RevisionKind.choices)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "revision_kind"], name="transcript_one_per_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} {self.revision_kind}"


class Segment(models.Model):
    """A transcript segment. Text is indexed for full-text search by the database itself
    (FTS5 triggers on SQLite; on PostgreSQL a generated tsvector that triggers turn into the
    index by revision, `RevisionWord`: see migrations), so every write path, bulk ones included,
    keeps the index in step."""

    id = models.CharField(primary_key=True, max_length=40, default=new_id, editable=False)
    # No index of its own: no read selects segments by workspace alone, and every append paid
    # for it (migration 0011). Workspaces are suspended, never deleted.
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+", db_index=False)
    # No index of its own: the two below start with it. (With one, PostgreSQL read a committed
    # revision through it and sorted, rather than in segment_commit_order's order.)
    transcript = models.ForeignKey(Transcript, on_delete=models.CASCADE, related_name="segments", db_index=False)
    sequence = models.IntegerField()
    session_committed_index = models.IntegerField()
    timestamp_start = models.IntegerField(help_text="milliseconds from the session start")
    timestamp_end = models.IntegerField(help_text="milliseconds from the session start")
    speaker_label = models.CharField(max_length=200, null=True, blank=True)
    text = models.TextField()
    confidence = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["transcript", "sequence"], name="segment_unique_sequence"),
        ]
        # A committed revision in commit order, ties by sequence (the transcript read,
        # apps/recordings/selectors.py): the index's order, so the database does not sort the
        # rows. Its prefix serves the append's MAX(session_committed_index).
        indexes = [
            models.Index(fields=["transcript", "session_committed_index", "sequence"], name="segment_commit_order")
        ]


class BoardStatus(models.TextChoices):
    GENERATING = "generating"
    READY = "ready"
    FAILED = "failed"


class BoardContent(models.Model):
    """One version of an AI board for a session; `board_id` is the board spec's id."""

    id = models.CharField(primary_key=True, max_length=40, default=new_id, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="boards")
    board_id = models.CharField(max_length=100)
    version = models.IntegerField()
    status = models.CharField(max_length=20, choices=BoardStatus.choices)
    is_current = models.BooleanField(default=False)
    source_revision_kind = models.CharField(max_length=10, choices=RevisionKind.choices)
    payload = models.JSONField()
    payload_hash = models.CharField(max_length=80)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "board_id", "version"], name="board_unique_version"),
            models.UniqueConstraint(
                fields=["session", "board_id"], condition=models.Q(is_current=True), name="board_one_current"
            ),
        ]
        indexes = [models.Index(fields=["session", "board_id", "-version"], name="board_session_versions")]


class RevisionWord(models.Model):
    """PostgreSQL's search index by revision: for each word of a revision, the sequences of its
    segments that contain it (migration 0005; not created on SQLite, whose FTS5 rowids already
    put a revision's entries together). Written only by triggers on recordings_segment, so every
    write path (appends, the final transcript's rewrite, COPY, deletes) keeps it in step; read
    only by apps/recordings/search/postgresql.py. A model so that `flush` empties it.

    `word` is a lexeme as the segment's search_vector holds it, without the workspace prefix;
    `created_at` and `revision_kind` are the transcript's, copied so that "the newest revisions
    containing this word" is one index range (workspace_id, word, created_at DESC, transcript_id DESC);
    `weights` lets a window be ranked without reading its candidates' texts."""

    pk = models.CompositePrimaryKey("transcript_id", "word")
    transcript_id = models.CharField(max_length=40)
    word = models.TextField()
    workspace_id = models.CharField(max_length=40)
    created_at = models.DateTimeField()
    revision_kind = models.CharField(max_length=10, choices=RevisionKind.choices)
    session_created_at = models.DateTimeField()  # the session's: the ranking's tie-break (migration 0008)
    sequences = ArrayField(models.IntegerField())
    # Parallel to `sequences`: what scoring reads of each of those segments (its word count
    # × 1024 + this word's occurrences, or -1 when unknown; migration 0008).
    weights = ArrayField(models.IntegerField(), default=list)

    class Meta:
        managed = True
        indexes = [
            models.Index(fields=["workspace_id", "word", "-created_at", "-transcript_id"], name="revision_word_newest")
        ]


class SegmentEmbedding(models.Model):
    """A segment's vector for search by meaning (apps/recordings/semantic): written after the
    segment's transaction commits, by a task, never on the append path. `model` names the
    embedder and its version, so that vectors of two models are never compared: the current
    model's rows are read, the others re-embedded. `text_hash` is the text the vector was made
    from; database triggers (migration 0010) delete the row with its segment and when the
    segment's text changes, so a stale vector is never read. No foreign key: the triggers keep
    deletes of a whole revision one statement, as they are without vectors.

    The vector is int8 (`vector`, one byte a dimension) times `scale`: a unit vector's
    components lie in [-1, 1], and one scale per vector keeps the rounding error below half a
    percent of its largest component."""

    id = models.BigAutoField(primary_key=True)  # growing: a process's cache reads only rows past the last it has
    segment_id = models.CharField(max_length=40, unique=True)
    workspace_id = models.CharField(max_length=40)
    transcript_id = models.CharField(max_length=40)
    model = models.CharField(max_length=100)
    text_hash = models.CharField(max_length=32)
    vector = models.BinaryField()
    scale = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["workspace_id", "model", "id"], name="embedding_ws_model")]
