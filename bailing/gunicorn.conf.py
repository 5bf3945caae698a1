"""gunicorn settings for Bailing Hub (``gunicorn -c bailing/gunicorn.conf.py bailing.wsgi``).

In production, and under ``make demo``, gunicorn runs behind the front (``python -m front``,
the package front/), which reads every request whole before gunicorn sees it: a thread here is never held
by a slow client. Run alone (tests of the WSGI stack, benchmarks, behind another buffering proxy) it
listens on ``BAILING_BIND``.

Sync workers with a few threads each: agent calls are short and database-bound, and persistent
database connections (``DB_CONN_MAX_AGE``) are kept per thread. Every value can be overridden from
the environment. Access logs are off by default: request lines carry query strings (the hub writes its
own bailing.access line per request, docs/production.md "Operations"; metrics: PROMETHEUS_MULTIPROC_DIR
below).
"""

import multiprocessing
import os
import shutil
import tempfile

bind = os.environ.get("BAILING_BIND") or "127.0.0.1:8000"
workers = int(os.environ.get("GUNICORN_WORKERS") or max(2, multiprocessing.cpu_count()))
threads = int(os.environ.get("GUNICORN_THREADS") or 4)
worker_class = "gthread"
timeout = int(os.environ.get("GUNICORN_TIMEOUT") or 60)
graceful_timeout = 20
keepalive = 5
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS") or 5000)
max_requests_jitter = 500
# X-Forwarded-Proto / -For are believed only from the proxies BAILING_TRUSTED_PROXIES names (none by
# default; the same list the front and TrustedProxyMiddleware use).
forwarded_allow_ips = os.environ.get("BAILING_TRUSTED_PROXIES") or ""
# Behind the front (front/) gunicorn listens on a private unix socket and learns each client's
# address from a PROXY protocol v1 line the front sends first ("v1"); off when run alone.
proxy_protocol = os.environ.get("GUNICORN_PROXY_PROTOCOL") or "off"
# Request limits (limit_request_line, limit_request_field_size, limit_request_fields) are not set
# here: behind the front the launcher passes them on the command line, derived from the front's own
# (front.server.upstream_limits), so a request within the front's limits is never gunicorn's
# HTML 414/431; run alone, gunicorn keeps its defaults.
accesslog = os.environ.get("GUNICORN_ACCESSLOG") or None
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOGLEVEL") or "info"
# gunicorn's control socket defaults to one path per user (~/.gunicorn/gunicorn.ctl), which every
# instance of that user would share (the demo, tests, benchmarks): off unless a path is given.
control_socket = os.environ.get("GUNICORN_CONTROL_SOCKET") or "var/gunicorn.ctl"
control_socket_disable = not os.environ.get("GUNICORN_CONTROL_SOCKET")
# Settings start or attach to the embedded PostgreSQL once in the master, before workers fork.
preload_app = True


# Prometheus (bailing/metrics.py): every worker writes its counters to files in one directory and a
# scrape sums them (prometheus-client's multiprocess mode). Set here, before the app is loaded (the
# value class is chosen when prometheus_client is imported); a given directory is emptied at start,
# since files of a previous run would add old counts. A dead worker's live gauges are dropped.
_metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
_metrics_dir_ours = not _metrics_dir
if _metrics_dir:
    shutil.rmtree(_metrics_dir, ignore_errors=True)
    os.makedirs(_metrics_dir, mode=0o700)
else:
    _metrics_dir = tempfile.mkdtemp(prefix="bailing-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = _metrics_dir


def pre_fork(server, worker):
    # A database connection the master opened while loading the app (settings, checks) must not be
    # inherited: two processes on one socket would interleave their protocol messages, and their
    # prepared statements would collide in the one server session they share.
    from django.db import connections

    from bailing.db import locks

    connections.close_all()
    locks.close_all()  # the advisory locks' own connections (bailing/db/locks.py), by the same rule


def post_fork(server, worker):
    # Tracing (bailing/tracing.py, off unless OTEL_* asks): the provider and its batch processor's
    # export thread are made in each worker, after the fork; the master only installed the
    # instrumentation (bailing/wsgi.py), whose tracers wait for this provider.
    from bailing import tracing

    tracing.provider_start()


def worker_exit(server, worker):
    # Export the spans still buffered before the worker goes.
    from bailing import tracing

    tracing.shutdown()


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    if _metrics_dir_ours:  # a directory we made for this run; a given one is left for the operator
        shutil.rmtree(_metrics_dir, ignore_errors=True)
