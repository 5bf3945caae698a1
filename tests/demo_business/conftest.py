import pytest

# The chaos business fixture, for this package only (tests/support/chaos_business.py).
from tests.support.chaos_business import chaos_business  # noqa: F401
from tests.support.demo_business import running_demo_business


@pytest.fixture(scope="session")
def demo_shop():
    """One live Demo Shop process for the session; tests use distinct orders and idempotency keys."""
    with running_demo_business() as shop:
        yield shop
