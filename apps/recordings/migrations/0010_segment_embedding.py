"""Vectors for search by meaning (apps/recordings/semantic), and the triggers that delete a
segment's vector with the segment and when its text changes, on every write path (ORM deletes,
a final revision's rewrite, raw SQL), so that no stale vector is ever read. PostgreSQL deletes a
statement's rows at once (a transition table), as a revision's rewrite deletes thousands."""

from django.db import migrations, models


TABLE = "recordings_segmentembedding"

SQLITE = [
    f"""CREATE TRIGGER recordings_segment_embedding_ad AFTER DELETE ON recordings_segment BEGIN
        DELETE FROM {TABLE} WHERE segment_id = old.id; END""",
    f"""CREATE TRIGGER recordings_segment_embedding_au AFTER UPDATE OF text ON recordings_segment
        WHEN old.text IS NOT new.text BEGIN DELETE FROM {TABLE} WHERE segment_id = old.id; END""",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS recordings_segment_embedding_ad",
    "DROP TRIGGER IF EXISTS recordings_segment_embedding_au",
]
POSTGRESQL = [
    f"""CREATE FUNCTION recordings_segment_embedding_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN DELETE FROM {TABLE} AS e USING old_segments AS o WHERE e.segment_id = o.id; RETURN NULL; END $$""",
    """CREATE TRIGGER recordings_segment_embedding_ad AFTER DELETE ON recordings_segment
    REFERENCING OLD TABLE AS old_segments FOR EACH STATEMENT EXECUTE FUNCTION recordings_segment_embedding_deleted()""",
    f"""CREATE FUNCTION recordings_segment_embedding_rewritten() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN DELETE FROM {TABLE} WHERE segment_id = OLD.id; RETURN NULL; END $$""",
    """CREATE TRIGGER recordings_segment_embedding_au AFTER UPDATE OF text ON recordings_segment
    FOR EACH ROW WHEN (OLD.text IS DISTINCT FROM NEW.text)
    EXECUTE FUNCTION recordings_segment_embedding_rewritten()""",
]
POSTGRESQL_DOWN = [
    "DROP TRIGGER IF EXISTS recordings_segment_embedding_ad ON recordings_segment",
    "DROP TRIGGER IF EXISTS recordings_segment_embedding_au ON recordings_segment",
    "DROP FUNCTION IF EXISTS recordings_segment_embedding_deleted()",
    "DROP FUNCTION IF EXISTS recordings_segment_embedding_rewritten()",
]


def _run(schema_editor, statements: dict) -> None:
    for sql in statements.get(schema_editor.connection.vendor, []):
        schema_editor.execute(sql)


def forwards(apps, schema_editor) -> None:
    _run(schema_editor, {"sqlite": SQLITE, "postgresql": POSTGRESQL})


def backwards(apps, schema_editor) -> None:
    _run(schema_editor, {"sqlite": SQLITE_DOWN, "postgresql": POSTGRESQL_DOWN})


class Migration(migrations.Migration):

    dependencies = [
        ('recordings', '0009_session_external_id'),
    ]

    operations = [
        migrations.CreateModel(
            name='SegmentEmbedding',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('segment_id', models.CharField(max_length=40, unique=True)),
                ('workspace_id', models.CharField(max_length=40)),
                ('transcript_id', models.CharField(max_length=40)),
                ('model', models.CharField(max_length=100)),
                ('text_hash', models.CharField(max_length=32)),
                ('vector', models.BinaryField()),
                ('scale', models.FloatField()),
            ],
            options={
                'indexes': [models.Index(fields=['workspace_id', 'model', 'id'], name='embedding_ws_model')],
            },
        ),
        migrations.RunPython(forwards, backwards),
    ]
