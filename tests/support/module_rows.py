"""Rows that every test of a module reads, made once per module (and xdist worker) instead of once
per test: for modules of hundreds of parametrized cases whose set-up (a route, a provider, a signed-in
user) cost more than the cases.

The rows are committed before the module's first test; each test then runs in its own transaction
as usual, which rolls back whatever the test wrote, so every test sees the rows as they were made.
When the module's tests are done, every table is emptied as a transactional test's teardown does.
A module with shared rows may hold no transactional test (its teardown would empty the tables
under the next test): ``tables_empty`` refuses to run while rows are shared. Model instances live
across tests, so hand tests fresh copies (``Model.objects.get(pk=…)``) or only their plain values.

    @pytest.fixture(scope="module")
    def _shared(django_db_setup, django_db_blocker):
        with module_rows(django_db_blocker):
            yield make_the_rows()
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import connections, transaction

# Tables a teardown keeps: what migrate's post_migrate fills in once (content types, permissions,
# the three role groups and their permissions). No test writes them.
STATIC_TABLES = frozenset({"django_content_type", "auth_permission", "auth_group", "auth_group_permissions"})

_shared = 0


def superuser(db_name: str = "default") -> bool:
    """Do the tests connect as a superuser (who may turn triggers off for a fast empty)?"""
    with connections[db_name].cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        return bool(cursor.fetchone()[0])


def tables_empty(db_name: str = "default") -> None:
    """Empty every table but the static ones, in one transaction with triggers and foreign-key checks
    off (``session_replication_role = replica``: the caller checked :func:`superuser`)."""
    if _shared:
        raise RuntimeError(
            "a transactional test in a module whose rows are shared (tests/support/module_rows.py) "
            "would empty them under the next test: make the test non-transactional, or move it"
        )
    connection = connections[db_name]
    tables = [
        name
        for name in connection.introspection.django_table_names(only_existing=True, include_views=False)
        if name not in STATIC_TABLES
    ]
    with transaction.atomic(using=db_name), connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        for name in tables:
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(name)}")


@contextlib.contextmanager
def module_rows(django_db_blocker) -> Iterator[None]:
    """Database access for a module fixture's rows (committed), and every table emptied after."""
    global _shared
    with django_db_blocker.unblock():
        if not superuser():
            raise RuntimeError("shared module rows need a superuser connection to be emptied again")
        _shared += 1
        try:
            yield
        finally:
            _shared -= 1
            tables_empty()
