"""The resilient client in docs/events.md, run as written (the fenced `python client` block is
extracted and executed) against a live `manage.py serve` that is stopped and started again
under it: it receives every matching event in order, resumes with Last-Event-ID after the
restart without missing or repeating one, and reconciles through REST when resume is not
available."""

from __future__ import annotations

import re
import threading
import time
from types import ModuleType

import pytest

from apps.events.models import Event
from apps.recordings import services as recordings
from tests import docs, factories
from tests.servers import ROOT
from tests.events.live import WAIT, start_server

pytestmark = pytest.mark.django_db(transaction=True)

DOC = ROOT / "docs" / "events.md"
SEGMENT = "transcript.segment.created"


def doc_client() -> ModuleType:
    return docs.run_block(DOC, "python client", name="doc_events_client")


@pytest.fixture(scope="module")
def client_module() -> ModuleType:
    return doc_client()


class Live:
    """One `serve` that a test may restart on the same port (clients reconnect to the same URL)."""

    def __init__(self, log_dir) -> None:
        self.log_dir = log_dir
        self.server = start_server(log_dir)

    @property
    def url(self) -> str:
        return self.server.url

    def restart(self, while_down, **env: str) -> None:
        port = self.server.port
        self.server.stop()
        while_down()
        self.server = start_server(self.log_dir, port=port, **env)


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory):
    server = Live(tmp_path_factory.mktemp("events-docs-client"))
    yield server
    server.server.stop()


class Run:
    """The documented EventStream on its own thread, recording what it hands the application."""

    def __init__(self, module: ModuleType, url: str, key: str, *, reconcile=None, **kwargs) -> None:
        self.events: list[tuple[str, dict]] = []
        self.reconciles: list[str] = []
        self.error: BaseException | None = None
        self.done = False
        self._reconcile = reconcile
        self._cond = threading.Condition()
        self.stream = module.EventStream(
            url, key, on_event=self._on_event, on_reconcile=self._on_reconcile, min_backoff=0.2, max_backoff=2.0,
            **kwargs,
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.stream.run()
        except BaseException as error:  # noqa: BLE001 - reported to the test
            self.error = error
        finally:
            with self._cond:
                self.done = True
                self._cond.notify_all()

    def _on_event(self, event_id: str, envelope: dict) -> None:
        with self._cond:
            self.events.append((event_id, envelope))
            self._cond.notify_all()

    def _on_reconcile(self, reason: str) -> None:
        if self._reconcile is not None:
            self._reconcile(reason)
        with self._cond:
            self.reconciles.append(reason)
            self._cond.notify_all()

    def wait(self, predicate, what: str, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                if self.done and self.error is not None:
                    raise AssertionError(f"client ended while waiting for {what}: {self.error!r}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}; events={[e[1]['type'] for e in self.events]}")
                self._cond.wait(remaining)

    def stop(self) -> None:
        self.stream.stop()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the client did not stop"


def test_receives_in_order_and_resumes_after_a_server_restart_missing_nothing(client_module, live, acme, alice_key):
    # Everything the filters match happens after the stream opens. (A stream may also carry an
    # event committed an instant before it opened; nothing subscribed here is made before.)
    followed = factories.session(acme, label="followed")
    entries = [{"type": "session.status_changed"}, {"type": SEGMENT, "sessionId": followed.id}]
    run = Run(client_module, live.url, alice_key, filters=entries)
    try:
        run.wait(lambda r: r.reconciles == ["start"], "the stream to open")
        first_id = Event.objects.order_by("-id").values_list("id", flat=True).first()

        recordings.append_committed_segments(session=followed, segments=factories.segments(["one", "two"]))
        run.wait(lambda r: len(r.events) == 2, "the first two events")

        other: list = []

        def while_down() -> None:
            recordings.append_committed_segments(session=followed, segments=factories.segments(["three", "four"]))
            session = factories.session(acme, label="changed while down")
            other.append(session)
            recordings.change_session_status(session=session, status="processing")
            # Another session's segments: not in the filters, neither live nor on resume.
            recordings.append_committed_segments(session=session, segments=factories.segments(["not followed"]))

        live.restart(while_down)
        run.wait(lambda r: r.stream.connections >= 2 and len(r.events) == 5, "the missed events after the restart",
                 timeout=3 * WAIT)
        recordings.append_committed_segments(session=followed, segments=factories.segments(["five"]))
        recordings.change_session_status(session=followed, status="completed")
        run.wait(lambda r: len(r.events) == 7, "the live events after the resume")
    finally:
        run.stop()

    assert run.error is None
    matching = [
        e for e in Event.objects.filter(id__gt=first_id).order_by("id")
        if e.type == "session.status_changed" or (e.type == SEGMENT and e.session_id == followed.id)
    ]
    received_ids = [event_id for event_id, _ in run.events]
    assert received_ids == [e.id for e in matching]  # every one, in order, none twice
    assert len(matching) == 7
    assert [env["data"]["text"] for _, env in run.events if env["type"] == SEGMENT] == [
        "one", "two", "three", "four", "five",
    ]
    assert [(env["sessionId"], env["data"]["status"]) for _, env in run.events if env["type"] != SEGMENT] == [
        (other[0].id, "processing"), (followed.id, "completed"),
    ]
    # It resumed (the missed events came from Last-Event-ID, no REST reconcile was needed).
    assert run.stream.connections >= 2
    assert run.reconciles == ["start"]
    assert run.stream.last_event_id == received_ids[-1]


def test_a_client_away_across_a_burst_of_500_events_catches_up_from_the_log_none_twice(
    client_module, live, acme, alice_key
):
    """The server comes back unable to replay (its resume window set to nothing), so the client
    pages `GET /api/v1/events?after=<last id>` while the stream is open: it ends with every one
    of the 500 events recorded while it was away, in log order, none twice, then live ones."""
    followed = factories.session(acme, label="burst")
    entries = [{"type": "session.status_changed"}, {"type": SEGMENT, "sessionId": followed.id}]
    run = Run(client_module, live.url, alice_key, filters=entries)
    try:
        run.wait(lambda r: r.reconciles == ["start"], "the stream to open")
        recordings.append_committed_segments(session=followed, segments=factories.segments(["before"]))
        run.wait(lambda r: len(r.events) == 1, "the first event")

        def burst() -> None:
            texts = [f"burst {i}" for i in range(500)]
            for start in range(0, 500, 50):
                recordings.append_committed_segments(session=followed, segments=factories.segments(texts[start:start + 50]))

        try:
            live.restart(burst, CONNECT_SSE_RESUME_SECONDS="0")
            run.wait(lambda r: len(r.events) >= 501, "the burst, from the log", timeout=3 * WAIT)
            recordings.change_session_status(session=followed, status="completed")
            run.wait(lambda r: len(r.events) >= 502, "a live event after the catch-up")
        finally:
            run.stop()
            live.restart(lambda: None)  # the module's other tests resume as usual
    finally:
        run.stop()

    assert run.error is None
    received = [event_id for event_id, _ in run.events]
    assert len(received) == len(set(received)) == 502  # none twice
    texts = [env["data"]["text"] for _, env in run.events if env["type"] == SEGMENT]
    assert texts == ["before", *(f"burst {i}" for i in range(500))]
    logged = [e.id for e in Event.objects.filter(session_id=followed.id).exclude(type="session.created")
              .order_by("position", "id")]
    assert received == logged  # every one, in log order
    assert run.reconciles == ["start"]  # the log filled the gap: no reconcile through the resources


def test_resume_unavailable_reconciles_through_rest_then_streams_live(client_module, live, acme, alice_key):
    before = [factories.session(acme, label=f"earlier {i}") for i in range(3)]
    reconciled: list[list[dict]] = []

    def reconcile(reason: str) -> None:
        reconciled.append(client_module.list_sessions(live.url, alice_key, page_size=2))

    run = Run(client_module, live.url, alice_key, filters=[{"type": "session.status_changed"}], reconcile=reconcile,
              last_event_id="evt_" + "0" * 26)
    try:
        run.wait(lambda r: r.reconciles, "a reconcile")
        assert run.reconciles == ["resume-unavailable"]
        [sessions] = reconciled
        assert sorted(s["id"] for s in sessions) == sorted(s.id for s in before)  # both pages of two
        recordings.change_session_status(session=before[1], status="completed")
        run.wait(lambda r: len(r.events) == 1, "the live event")
    finally:
        run.stop()
    assert run.error is None
    event_id, envelope = run.events[0]
    assert envelope["type"] == "session.status_changed" and envelope["sessionId"] == before[1].id
    assert event_id == Event.objects.get(session_id=before[1].id, type="session.status_changed").id


def test_the_reconcile_listing_pages_to_the_end_and_keeps_its_filters(client_module, live, acme, alice_key):
    """issue 23: the documented list_sessions stopped after ten pages (1,000 sessions at its page
    size); it pages until nextCursor is null, sending its filters with every cursor."""
    sessions = factories.sessions_at_distinct_times(acme, 23)
    for session in sessions[::4]:
        recordings.change_session_status(session=session, status="completed")
    everything = client_module.list_sessions(live.url, alice_key, page_size=2)  # 12 pages
    assert [s["id"] for s in everything] == [s.id for s in reversed(sessions)]
    completed = client_module.list_sessions(live.url, alice_key, page_size=2, status="completed")
    assert [s["id"] for s in completed] == [s.id for s in reversed(sessions[::4])]  # 6 sessions, 3 pages


@pytest.mark.parametrize(
    "key, filters, status",
    [
        ("svc_not-a-key", None, 401),
        (None, [{"type": SEGMENT}], 400),  # no sessionId: invalid_filters
        (None, [{"type": "session.created"}] * 11, 400),  # filter_cost_exceeded
    ],
)
def test_refusals_are_final_and_not_retried(client_module, live, acme, alice_key, key, filters, status):
    stream = client_module.EventStream(live.url, key or alice_key, filters=filters, min_backoff=0.2)
    with pytest.raises(client_module.StreamRefused) as refused:
        stream.run()
    assert refused.value.status == status
    assert stream.connections == 0


def test_backoff_grows_exponentially_with_jitter_and_honours_retry_after(client_module):
    stream = client_module.EventStream("http://127.0.0.1:9", "key", min_backoff=1.0, max_backoff=60.0)
    for failures, ceiling in [(0, 1), (1, 2), (3, 8), (5, 32), (6, 60), (20, 60)]:
        delays = [stream._backoff(failures) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays), failures
        assert len(set(delays)) > 1  # jittered
    assert stream._backoff(0, retry_after=30) == 30
