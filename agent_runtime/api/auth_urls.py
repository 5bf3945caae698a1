"""Agent Auth v1 routes (/agent-auth/v1/)."""

urlpatterns: list = []
