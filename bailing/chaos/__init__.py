"""Chaos scenarios run against a live hub (``bailing_chaos --scenario ...``); figures, not tests."""
