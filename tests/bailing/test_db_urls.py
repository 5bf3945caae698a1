"""``bailing.db.urls``: a libpq URL for a Django connection's settings (what a child process is given)."""

from bailing.db.urls import database_url


def test_a_database_url_names_the_connections_database():
    url = database_url({"HOST": "/tmp/pg sock", "USER": "postgres", "NAME": "test_db", "PORT": ""})
    assert url == "postgres://postgres@/test_db?host=/tmp/pg%20sock"
    assert (
        database_url({"HOST": "db", "USER": "u", "PASSWORD": "p@ss", "NAME": "n", "PORT": 6543})
        == "postgres://u:p%40ss@db:6543/n"
    )
