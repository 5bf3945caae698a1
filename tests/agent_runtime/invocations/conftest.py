import pytest

from tests.support.demo_business import running_demo_business


@pytest.fixture(scope="module")
def demo_shop():
    """One live Demo Shop process per test module (distinct orders and idempotency keys per test)."""
    with running_demo_business() as shop:
        yield shop


from tests.support.chaos_business import chaos_business  # noqa: E402, F401 - the fixture, for this package
