"""Agent API v1 routes (/agent-api/v1/)."""

urlpatterns: list = []
