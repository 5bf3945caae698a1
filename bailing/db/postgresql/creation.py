"""Test databases are dropped ``WITH (FORCE)`` (PostgreSQL 13+).

A test run that was killed leaves its test database behind with sessions that may still be attached
(a hub or worker process it started, outliving it), and a backend whose client has just closed its
connection can still be on its way out when the run ends. A plain ``DROP DATABASE`` then fails with
"is being accessed by other users" — at the next run's creation, where Django gives up the whole run,
or at the end of a run. Production never creates nor drops a test database: only the test runner
calls these.
"""

from __future__ import annotations

from django.db.backends.postgresql import creation


class DatabaseCreation(creation.DatabaseCreation):
    def _execute_create_test_db(self, cursor, parameters, keepdb=False):
        if not keepdb:
            cursor.execute(f"DROP DATABASE IF EXISTS {parameters['dbname']} WITH (FORCE)")
        super()._execute_create_test_db(cursor, parameters, keepdb)

    def _destroy_test_db(self, test_database_name, verbosity):
        with self._nodb_cursor() as cursor:
            name = self.connection.ops.quote_name(test_database_name)
            cursor.execute(f"DROP DATABASE {name} WITH (FORCE)")
