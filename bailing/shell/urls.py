"""The root URL map. API surfaces answer JSON everywhere under their prefixes, unknown paths included;
``/`` leads to the console; every other error is the console's styled page (``bailing.shell.errors``)."""

from django.conf import settings
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from bailing.api.surfaces import api_prefix_pattern
from bailing.api.views import ApiNotFound, HealthApi, ReadinessApi
from bailing.metrics import metrics_view
from bailing.shell.api_docs import ApiDocsView

urlpatterns = [
    path("", RedirectView.as_view(url="/console/", permanent=False), name="root"),
    path("health", HealthApi.as_view(), name="health"),
    path("health/ready", ReadinessApi.as_view(), name="health-ready"),
    # Prometheus scrapes (404 unless BAILING_METRICS_TOKEN is set and sent as a bearer token).
    path("metrics", metrics_view, name="metrics"),
    path("agent-auth/v1/", include("agent_runtime.api.auth_urls")),
    # Standard OAuth sign-in for MCP clients: /.well-known/oauth-authorization-server and /oauth/….
    path("", include("agent_runtime.api.oauth_urls")),
    path("agent-api/v1/", include("agent_runtime.api.urls")),
    path("agent-api/v1/workspaces/<segment:route>/knowledge/", include("knowledge.api.agent_urls")),
    path("kb/", include("knowledge.api.push_urls")),
    path("approvals/", include("approvals.api.urls")),
    path("", include("mcp_server.api.urls")),
    path("console/", include("bailing.shell.console.urls")),
    # The OpenAPI 3.1 document and its docs page (docs/api.md "API reference"; bailing/shell/schema.py).
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", ApiDocsView.as_view(), name="api-docs"),
]

if settings.BAILING_BENCH_ENDPOINTS:
    # The benchmarks' bare baseline (benchmarks/views.py), for the server bailing_bench starts.
    urlpatterns.append(path("agent-api/v1/_bench/", include("benchmarks.urls")))

# Last: anything else under the agent and push prefixes (the bare prefixes included, which would otherwise be
# redirected to their slashed form by APPEND_SLASH) answers the JSON 404 envelope.
urlpatterns.append(re_path(api_prefix_pattern(), ApiNotFound.as_view()))

handler400 = "bailing.shell.errors.bad_request"
handler403 = "bailing.shell.errors.permission_denied"
handler404 = "bailing.shell.errors.page_not_found"
handler500 = "bailing.shell.errors.server_error"
