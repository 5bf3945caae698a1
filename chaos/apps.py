from django.apps import AppConfig


class ChaosConfig(AppConfig):
    name = "chaos"
    verbose_name = "Chaos runs"
