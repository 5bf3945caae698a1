import pytest

from tests.support.demo_business import running_demo_business


@pytest.fixture(scope="module")
def demo_shop():
    """One live Demo Shop process per test module."""
    with running_demo_business() as shop:
        yield shop
