"""Console routes (/console/)."""

app_name = "console"
urlpatterns: list = []
