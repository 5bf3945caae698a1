"""Chaos runs against a live hub (``manage.py bailing_chaos --scenario ...``): the database restarted
under traffic (``db_restart.py``) and slow or stalled clients against the front (``slow_clients.py``).
They print figures, never test anything. A tool on top of the hub: it uses the apps' public surfaces,
and no app imports it."""
