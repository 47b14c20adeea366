#!/usr/bin/env python3
"""The transcript's own work without the HTTP stack: the 500-segment flat transcript read and
encoded the way 9b501a8 did it (model instances, a dict each, DRF's JSONRenderer) against the
fast path (`selectors.transcript_rows`, `flat_transcript_rows_repr(rows.stamp)`, orjson), alternating in one
process, medians of 7 rounds of 20. Run against a seeded bench database:

    DATABASE_URL=sqlite:///bench/data/ab.sqlite3 DJANGO_SETTINGS_MODULE=bench.settings CONNECT_DEVELOPMENT=1 .venv/bin/python bench/transcript_encode.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
import statistics
import time

import django

django.setup()
import orjson
from django.db.models import Count
from rest_framework.renderers import JSONRenderer
from apps.recordings import selectors
from apps.recordings.models import Transcript, Segment, RevisionKind, Session
from apps.recordings.representations import flat_segment_repr, flat_transcript_rows_repr
from apps.tenancy.models import Workspace
ws = Workspace.objects.get(slug="bench")
t = Transcript.objects.filter(workspace=ws).annotate(n=Count("segments")).order_by("-n").first()
sid = t.session_id
def old():
    session = Session.objects.get(workspace=ws, id=sid)
    by_kind = {x.revision_kind: x for x in Transcript.objects.filter(session=session)}
    tr = by_kind.get(RevisionKind.FINAL) or by_kind.get(RevisionKind.COMMITTED)
    order = "session_committed_index" if tr.revision_kind == RevisionKind.COMMITTED else "sequence"
    segs = list(Segment.objects.filter(transcript=tr).order_by(order, "sequence"))
    return JSONRenderer().render({"sessionId": sid, "transcript": [flat_segment_repr(s) for s in segs]})
def new():
    rows = selectors.transcript_rows(workspace=ws, session_id=sid, flat=True)
    return orjson.dumps(flat_transcript_rows_repr(rows.stamp)(rows.session.id, rows.flat[1]))
assert orjson.loads(old()) == orjson.loads(new())
res = {"old": [], "new": []}
for r in range(7):
    for name, f in (("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old)):
        t0 = time.perf_counter()
        for _ in range(20): f()
        res[name].append((time.perf_counter() - t0) / 20 * 1000)
o, n = statistics.median(res["old"]), statistics.median(res["new"])
print(f"{django.db.connection.vendor}: 500-segment transcript, selector+encode only: old {o:.2f} ms, new {n:.2f} ms, ratio {o/n:.2f}x (medians of 7 alternating rounds of 20)")
