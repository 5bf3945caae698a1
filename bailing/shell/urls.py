"""URL map. Agent surfaces answer JSON everywhere under their prefixes, including unknown paths."""

from django.conf import settings
from django.urls import include, path, re_path

from bailing.api.views import ApiNotFound, HealthApi

urlpatterns = [
    path("health", HealthApi.as_view(), name="health"),
    path("agent-auth/v1/", include("agent_runtime.api.auth_urls")),
    path("agent-api/v1/", include("agent_runtime.api.urls")),
    path("kb/", include("knowledge.api.push_urls")),
    path("console/", include("bailing.shell.console.urls")),
]

if settings.BAILING_BENCH_ENDPOINTS:
    from bailing.api.bench import BareApi

    urlpatterns.append(path("agent-api/v1/_bench/bare", BareApi.as_view()))

# Last: anything else under the agent and push prefixes (the bare prefixes included, which would otherwise be
# redirected to their slashed form by APPEND_SLASH) answers the JSON 404 envelope.
urlpatterns.append(re_path(r"^(?:agent-api|agent-auth|kb)(?:/.*)?$", ApiNotFound.as_view()))
