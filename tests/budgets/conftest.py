import pytest

from tests.support.demo_business import running_demo_business


@pytest.fixture(scope="module")
def demo_shop():
    with running_demo_business() as shop:
        yield shop


from tests.support.chaos_business import chaos_business  # noqa: E402, F401 - the fixture, for this package
