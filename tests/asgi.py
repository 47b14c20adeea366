"""The application the test servers run (tests/settings.py): production's, plus what only
tests read (tests/events/stats.py)."""

from connect.asgi import application as production
from tests.events.stats import with_stream_stats

application = with_stream_stats(production)
