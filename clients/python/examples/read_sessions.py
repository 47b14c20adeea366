"""Read the latest sessions, their transcripts and a subtitle export; show the response headers
of a read and what a conditional read saves.

    export CONNECT_BASE_URL=http://127.0.0.1:8000 CONNECT_API_KEY=svc_…
    python read_sessions.py
"""

from __future__ import annotations

from connect_client import Connect, NotFound, Session


def latest(client: Connect, count: int = 3) -> list[Session]:
    page = client.sessions.list(status=["completed", "recording"], limit=count).page()
    return page.items


def main() -> None:
    with Connect() as client:  # CONNECT_BASE_URL, CONNECT_API_KEY
        for session in latest(client):
            transcript = client.transcripts.get(session.id)
            words = sum(len(segment.text.split()) for segment in transcript.segments)
            print(f"{session.id} {session.status:<10} {session.label or '(no label)'}: {words} words")
            srt: str = client.transcripts.get(session.id, format="srt", max_cue_chars=80)
            print("  first cue:", srt.split("\n\n", 1)[0].replace("\n", " | ") or "(empty)")

            raw = client.sessions.with_raw_response.get(session.id)
            again = client.sessions.with_raw_response.get(session.id)  # If-None-Match: answered 304
            print(f"  {raw.status_code} then {again.status_code} (from cache: {again.from_cache}),"
                  f" request {again.request_id}, {again.headers.get('RateLimit-Remaining')} requests left")
            assert again.parse() is raw.parse()
        try:
            client.sessions.get("no-such-session")
        except NotFound as error:
            print(error.status, error.code, error.detail, error.request_id)


if __name__ == "__main__":
    main()
