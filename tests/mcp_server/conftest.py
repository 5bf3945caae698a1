from tests.support.chaos_business import chaos_business  # noqa: F401 - the fixture, for this package
