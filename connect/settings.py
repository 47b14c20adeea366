"""Connect settings: one module, configured from the environment (README.md, Configuration).

Defaults are the embedded setup: SQLite under var/, in-memory channel layer, no Redis.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"


def env(name: str, default: str = "") -> str:
    """A variable set to the empty string counts as unset, as in envbool and envint."""
    return os.environ.get(name) or default


def envbool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def envint(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


DEVELOPMENT_SECRET_KEY = "connect-development-secret-key-do-not-use-in-production"
SECRET_KEY = env("SECRET_KEY", DEVELOPMENT_SECRET_KEY)
DEBUG = envbool("DEBUG", False)
# `make run` marks its checkout as a development one (var/development), so the commands the docs
# show after it run as written without CONNECT_DEVELOPMENT in the reader's shell. A deployment
# never runs `make run`; CONNECT_DEVELOPMENT=0 overrides the mark.
DEVELOPMENT_MARK = VAR_DIR / "development"
CONNECT_DEVELOPMENT = envbool("CONNECT_DEVELOPMENT", DEVELOPMENT_MARK.is_file())
if not DEBUG and SECRET_KEY == DEVELOPMENT_SECRET_KEY and not CONNECT_DEVELOPMENT:
    # Anything else with DEBUG off is production.
    raise ImproperlyConfigured(
        "Set SECRET_KEY: production refuses to start with the development secret "
        "(in a development checkout, `make run` once or set CONNECT_DEVELOPMENT=1)."
    )

CONNECT_BASE_URL = env("CONNECT_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
CONNECT_AUTH_URL = env("CONNECT_AUTH_URL", CONNECT_BASE_URL).rstrip("/")

ALLOWED_HOSTS = [h.strip() for h in env("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver").split(",") if h.strip()]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "oauth2_provider",
    "channels",
    "django_q",
    "corsheaders",
    "apps.core",
    "apps.tenancy",
    "apps.oauth",
    "apps.access",
    "apps.recordings",
    "apps.ingest",
    "apps.webhooks",
    "apps.events",
    "apps.stream",
    "apps.mcp",
]

MIDDLEWARE = [
    # The route template for the door's access line and metrics (apps/access/door.py).
    "apps.access.door.RouteMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # gzip for bodies of 1 KiB and more, never a stream (apps/core/compression.py); outermost
    # but one, so it compresses the final body.
    "apps.core.compression.CompressionMiddleware",
    # CORS first: it answers preflights on the Bearer-only paths (apps/core/cors.py).
    "corsheaders.middleware.CorsMiddleware",
    "apps.core.middleware.UploadLimitMiddleware",
    "apps.core.middleware.NulCharacterMiddleware",
    "apps.core.middleware.PlainOptionsHeadMiddleware",
    "apps.core.middleware.RequestDeadlineMiddleware",
    "apps.access.rest.RateLimitHeadersMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "connect.urls"
ASGI_APPLICATION = "connect.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------

DATABASE_URL = env("DATABASE_URL", f"sqlite:///{VAR_DIR / 'connect.sqlite3'}")
# Request code runs on a fixed set of long-lived threads per server process (the lanes of
# engine/lanes.py, the event hub's executor), each with its own
# connection. On SQLite that connection is kept (CONN_MAX_AGE None): opening one per request
# (connect, PRAGMAs, reading the schema, a cold page cache) was a third of a small request.
# On PostgreSQL connections come from psycopg's pool, which Django allows only with
# CONN_MAX_AGE 0: closing one at the end of a request hands it back (as fast as persistent
# connections; docs/decisions/runtime.md "Runtime").
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # The server processes, the task workers and management commands write at once: WAL lets
    # readers run beside a writer, IMMEDIATE takes the write lock at BEGIN (so a transaction
    # never fails half-way on lock upgrade) and the timeout makes writers queue, not fail.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        # WAL itself is switched on once per process (engine/sqlite.py): the file keeps it.
        "init_command": "PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
    }
    # Also django-q2's processes keep their connection from task to task: its ORM broker and
    # workers close connections older than CONN_MAX_AGE before every task. A forked child
    # drops the one it inherited (engine/forking.py).
    DATABASES["default"]["CONN_MAX_AGE"] = None
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": envint("CONNECT_DB_POOL_MIN", 2),
        "max_size": envint("CONNECT_DB_POOL_MAX", 10),  # per server process
        # How long a request waits for a connection: when the database is unreachable it
        # answers 503 unavailable after this, well inside the request timeout.
        "timeout": 5,
    }
    # Django's backend, with each connection tried as it leaves the pool, so one the server or
    # a proxy closed while idle is replaced before a request gets it (engine/postgresql).
    DATABASES["default"]["ENGINE"] = "engine.postgresql"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis, channels ------------------------------------------------------------------------

REDIS_URL = env("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- Auth, i18n, static ---------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "/static/"
STATIC_ROOT = Path(env("STATIC_ROOT") or VAR_DIR / "static")
# `collectstatic` writes hashed, compressed copies; ServeStatic serves them (connect/asgi.py).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "apps.core.static.HashedStaticStorage"},
}

# --- REST -----------------------------------------------------------------------------------

REST_FRAMEWORK = {
    # Bearer authentication, then the per-credential and per-workspace rate limit.
    "DEFAULT_AUTHENTICATION_CLASSES": ["apps.access.rest.BearerAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "apps.core.negotiation.JSONOnly",
    "EXCEPTION_HANDLER": "apps.access.rest.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "UNAUTHENTICATED_TOKEN": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Connect API",
    "DESCRIPTION": "Read-only data API over workspace data: sessions, transcripts and AI boards.",
    "VERSION": "1.0.0",
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],  # the contract and its docs page are public
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVERS": [{"url": CONNECT_BASE_URL}],
    "DEFAULT_GENERATOR_CLASS": "connect.openapi.SchemaGenerator",
    "POSTPROCESSING_HOOKS": ["apps.core.openapi.postprocess"],
    "ENUM_NAME_OVERRIDES": {},
}

# --- Connect --------------------------------------------------------------------------------

CONNECT_SCOPES = {
    "svc:sessions:read": "Read sessions and receive session events",
    "svc:transcripts:read": "Read and search transcripts and receive transcript events",
    "svc:boards:read": "Read AI board contents",
    "svc:webhooks:read": "Read webhook endpoints and delivery history",
    "svc:webhooks:write": "Create, update, delete, test and replay webhooks",
}
CONNECT_READ_SCOPES = ["svc:sessions:read", "svc:transcripts:read", "svc:boards:read"]

CONNECT_WEBHOOKS_ALLOW_PRIVATE = envbool("CONNECT_WEBHOOKS_ALLOW_PRIVATE", False)
CONNECT_WEBHOOK_RETRY_SCHEDULE = [
    int(s) for s in env("CONNECT_WEBHOOK_RETRY_SCHEDULE", "60,300,1800,7200,28800,86400").split(",")
]
# Webhooks (apps/webhooks): private halves of signing keys are sealed with this 32-byte key
# (base64); unset, it is derived from SECRET_KEY — then rotating SECRET_KEY needs new signing keys.
CONNECT_WEBHOOK_KEY_ENCRYPTION_KEY = env("CONNECT_WEBHOOK_KEY_ENCRYPTION_KEY")
CONNECT_WEBHOOK_TIMEOUT_SECONDS = float(env("CONNECT_WEBHOOK_TIMEOUT_SECONDS", "10"))
# An attempt's lease must outlast the request timeout; deliveries whose lease expired are due
# again. The queue lease is how long a queued drain task is trusted to be on its way: until it
# passes, new deliveries queue no other (apps/webhooks/tasks.py). The sweeper (every
# CONNECT_WEBHOOK_SWEEP_SECONDS) queues a drain while any delivery is due.
CONNECT_WEBHOOK_LEASE_SECONDS = envint("CONNECT_WEBHOOK_LEASE_SECONDS", 60)
CONNECT_WEBHOOK_QUEUE_LEASE_SECONDS = envint("CONNECT_WEBHOOK_QUEUE_LEASE_SECONDS", 60)
CONNECT_WEBHOOK_SWEEP_SECONDS = float(env("CONNECT_WEBHOOK_SWEEP_SECONDS", "5"))
# Attempt batches one endpoint may have in flight at once, across all workers: a slow receiver
# holds at most this many workers, and the rest serve the other endpoints.
CONNECT_WEBHOOK_ENDPOINT_CONCURRENCY = max(1, envint("CONNECT_WEBHOOK_ENDPOINT_CONCURRENCY", 1))
# Extra networks webhooks may never reach (comma-separated CIDRs), beside the built-in metadata list.
CONNECT_WEBHOOK_DENY_NETWORKS = [n.strip() for n in env("CONNECT_WEBHOOK_DENY_NETWORKS").split(",") if n.strip()]

# django-q2 runs webhook attempts. Embedded default: the ORM broker (no Redis); with REDIS_URL,
# Redis. Deployments sharing one Redis need distinct CONNECT_Q_NAMEs.
Q_CLUSTER = {
    "name": env("CONNECT_Q_NAME", "connect"),
    "workers": envint("CONNECT_Q_WORKERS", 2),
    "timeout": 30,  # an attempt is bounded at 10 s; this only stops a stuck worker
    "retry": 90,  # ORM broker: an unacknowledged task is handed out again after this
    "max_attempts": 1,  # the Delivery row owns retries, not the broker
    "ack_failures": True,
    "save_limit": -1,  # successful tasks are not stored: Delivery and DeliveryAttempt are the record
    "catch_up": False,
    "poll": 0.1,
    "label": "Tasks",
    **({"redis": REDIS_URL} if REDIS_URL else {"orm": "default"}),
}
# Attempt batches of slow endpoints (apps/webhooks/delivery.py) in flight at once, across all
# workers: by default all workers but one, which is kept for the endpoints that answer quickly.
CONNECT_WEBHOOK_SLOW_BATCHES = max(1, envint("CONNECT_WEBHOOK_SLOW_BATCHES", Q_CLUSTER["workers"] - 1))

# The event log's retention (apps/events/retention.py, enforced by `purge_events`): session
# events as long as webhook deliveries can be replayed or recovered; segment events a day.
CONNECT_EVENT_RETENTION_DAYS = envint("CONNECT_EVENT_RETENTION_DAYS", 30)
CONNECT_SEGMENT_EVENT_RETENTION_HOURS = envint("CONNECT_SEGMENT_EVENT_RETENTION_HOURS", 24)

CONNECT_SSE_HEARTBEAT_SECONDS = envint("CONNECT_SSE_HEARTBEAT_SECONDS", 15)
CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE = envint("CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE", 10)
CONNECT_SSE_RESUME_SECONDS = envint("CONNECT_SSE_RESUME_SECONDS", 300)
# A stream's slot (the per-workspace limit, apps/stream/slots/) is a Redis member or a row with a lease
# its process renews every third of it while the stream is open; a killed process's slots lapse
# after one lease. Short only in tests.
CONNECT_SSE_SLOT_LEASE_SECONDS = envint("CONNECT_SSE_SLOT_LEASE_SECONDS", 45)
# Events one stream may have waiting for its client; a client that falls further behind is
# disconnected (apps/stream/hub.py), so a slow reader never grows memory or slows the others.
CONNECT_SSE_QUEUE_EVENTS = envint("CONNECT_SSE_QUEUE_EVENTS", 1000)

# Browser origins for CORS on Bearer-only paths and /mcp's Origin check (apps/core/origins.py):
# comma-separated, or `*`; empty = this service's origin plus loopback origins on any port.
CONNECT_ALLOWED_ORIGINS = env("CONNECT_ALLOWED_ORIGINS")

# Threads per server process ("lanes", engine/lanes.py) that run the sync code of
# Django's views and of /mcp: up to this many requests per process proceed at once. Keep
# CONNECT_DB_POOL_MAX at least as large.
CONNECT_SYNC_THREADS = envint("CONNECT_SYNC_THREADS", 4)
# How long a request waits for one of those threads when all are busy; past it the process is
# saturated and sheds the request: 503 unavailable with Retry-After, at once. Health probes are
# never shed. Keep it well under CONNECT_REQUEST_TIMEOUT_SECONDS.
CONNECT_QUEUE_TIMEOUT_SECONDS = float(env("CONNECT_QUEUE_TIMEOUT_SECONDS", "2"))

# Rate limits (apps/access/ratelimit/): requests per fixed window, per credential and per
# workspace, counted in Redis when REDIS_URL is set, else in the database. 0 turns one off.
# The defaults are far above what the benchmarks or an agent send.
CONNECT_RATE_LIMIT_WINDOW_SECONDS = envint("CONNECT_RATE_LIMIT_WINDOW_SECONDS", 60)
CONNECT_RATE_LIMIT_PER_CREDENTIAL = envint("CONNECT_RATE_LIMIT_PER_CREDENTIAL", 60_000)
CONNECT_RATE_LIMIT_PER_WORKSPACE = envint("CONNECT_RATE_LIMIT_PER_WORKSPACE", 120_000)

# Database time per request (engine/deadlines.py): PostgreSQL statement_timeout in the
# server processes, an SQLite progress-handler deadline; past it the client gets 503 timeout.
CONNECT_REQUEST_TIMEOUT_SECONDS = float(env("CONNECT_REQUEST_TIMEOUT_SECONDS", "10"))

# `serve` kills and restarts a server process whose event loop has not said it is alive for
# this long (engine/serve.py): a frozen process would keep its share of new connections.
# Generous, so that a process busy under load is never taken for a frozen one; 0 turns it off.
CONNECT_SERVE_LIVENESS_SECONDS = float(env("CONNECT_SERVE_LIVENESS_SECONDS", "10"))

# CORS (django-cors-headers) on the Bearer-only paths, from the origin policy and the header
# lists in apps/core/cors.py; the Channels routes get the same from its ASGI wrapper.
from apps.core import cors as _cors  # noqa: E402

CORS_URLS_REGEX = _cors.URLS_REGEX
CORS_ALLOW_HEADERS = _cors.ALLOW_HEADERS
CORS_EXPOSE_HEADERS = _cors.EXPOSE_HEADERS
CORS_ALLOW_METHODS = _cors.ALLOW_METHODS
CORS_PREFLIGHT_MAX_AGE = _cors.PREFLIGHT_MAX_AGE
CORS_ALLOW_CREDENTIALS = False

# The MCP endpoint (apps/mcp): the largest request body it reads; a larger one gets 413.
CONNECT_MCP_MAX_BODY_BYTES = envint("CONNECT_MCP_MAX_BODY_BYTES", 1_000_000)
# The most text one MCP result carries (about 20k tokens); longer ones page (apps/mcp/budget.py).
CONNECT_MCP_RESULT_BUDGET_BYTES = envint("CONNECT_MCP_RESULT_BUDGET_BYTES", 80_000)

# Search by meaning (apps/recordings/semantic), an optional extra: requirements/semantic.txt.
CONNECT_SEMANTIC_SEARCH = envbool("CONNECT_SEMANTIC_SEARCH")
CONNECT_SEMANTIC_EMBEDDER = env("CONNECT_SEMANTIC_EMBEDDER", "minilm")
CONNECT_SEMANTIC_THREADS = envint("CONNECT_SEMANTIC_THREADS", 1)  # torch threads per process
# Question vectors kept per process (LRU by model and text; 0: none): a next page or a repeated
# question skips the model. Each is 384 float32 numbers.
CONNECT_SEMANTIC_QUERY_CACHE = envint("CONNECT_SEMANTIC_QUERY_CACHE", 256)

# An API key's last-used timestamp is written at most this often, so reads stay reads.
CONNECT_API_KEY_TOUCH_SECONDS = 60

# --- OAuth (django-oauth-toolkit); policy lives in apps.oauth -------------------------------

from apps.oauth.conf import OAUTH2_PROVIDER, OAUTH2_PROVIDER_MODELS  # noqa: E402

globals().update(OAUTH2_PROVIDER_MODELS)
# The issuer is `{auth_url}/api/auth` (docs/api/authentication-and-scopes.md); DOT builds the RFC 8414 document from it.
OAUTH2_PROVIDER = {**OAUTH2_PROVIDER, "OIDC_ISS_ENDPOINT": f"{CONNECT_AUTH_URL}/api/auth"}
# Tests only: the CA of a loopback Client ID Metadata Document server. Deliberately read from
# no environment variable, and ignored unless CONNECT_DEVELOPMENT is on (apps/oauth/cimd.py).
CONNECT_CIMD_TESTING_CA_FILE = None

# --- Deployment over HTTPS -------------------------------------------------------------------
# With an https base URL: cookies only over TLS, HSTS, and plain-http requests redirected —
# except the health endpoints, which load balancers probe over plain http.
# CONNECT_BEHIND_PROXY=1 trusts the proxy's X-Forwarded-Proto (only behind a proxy that sets it).
if CONNECT_BASE_URL.startswith("https://"):
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = envbool("CONNECT_SSL_REDIRECT", True)
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
    SECURE_HSTS_SECONDS = envint("CONNECT_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("CONNECT_HSTS_INCLUDE_SUBDOMAINS", False)
    CSRF_TRUSTED_ORIGINS = [CONNECT_BASE_URL, CONNECT_AUTH_URL]
if envbool("CONNECT_BEHIND_PROXY"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Logging --------------------------------------------------------------------------------

# CONNECT_LOG_FORMAT: `json` in production (one object per line), `text` by default
# (apps/core/logs.py). Every line written while serving carries the request's ids.
CONNECT_LOG_FORMAT = env("CONNECT_LOG_FORMAT", "text")
from apps.core.logs import logging_config  # noqa: E402

LOGGING_CONFIG = "apps.core.logs.configure"
LOGGING = logging_config(CONNECT_LOG_FORMAT, env("LOG_LEVEL", "INFO"))

# --- Metrics --------------------------------------------------------------------------------
# `/metrics` (Prometheus, connect/scrape.py) answers only a scrape carrying this token as
# Bearer; unset, the path is 404. `serve` sums all its processes (PROMETHEUS_MULTIPROC_DIR).
CONNECT_METRICS_TOKEN = env("CONNECT_METRICS_TOKEN")
