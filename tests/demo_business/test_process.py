"""The Demo Shop as a process: configuration, startup line, clean shutdown, no Django inside."""

import os
import signal
import subprocess
import sys

import pytest

from tests.support.demo_business import REPO_ROOT, running_demo_business


def run_module(args, env_overrides, timeout=30):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEMO_")}
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_missing_tool_secret_refuses_to_start():
    result = run_module(["-m", "demo_business", "--port", "0"], {})
    assert result.returncode == 2
    assert "DEMO_TOOL_SECRET" in result.stderr
    assert result.stdout == ""


def test_invalid_hub_url_refuses_to_start():
    result = run_module(
        ["-m", "demo_business", "--port", "0"], {"DEMO_TOOL_SECRET": "s", "DEMO_HUB_URL": "ftp://x"}
    )
    assert result.returncode == 2


@pytest.mark.parametrize(
    "env",
    [
        {"DEMO_DECISION_AUTH": "hmac"},
        {"DEMO_CLIENT_TOKEN": "has space"},
        {"DEMO_CLIENT_TOKEN": "line\nbreak"},
        {"DEMO_HUB_URL": "http://hub.example/?x=1"},
    ],
)
def test_bad_approval_configuration_refuses_to_start(env):
    result = run_module(["-m", "demo_business", "--port", "0"], {"DEMO_TOOL_SECRET": "s", **env})
    assert result.returncode == 2
    assert result.stdout == ""


def test_approval_configuration_is_optional_and_read_from_the_environment():
    code = (
        "from demo_business.config import DemoConfig; c = DemoConfig.from_env(); "
        "print(c.client_token, c.decision_auth, c.hub_url)"
    )
    plain = run_module(["-c", code], {"DEMO_TOOL_SECRET": "s"})
    assert plain.stdout.split() == ["bearer"]
    env = {"DEMO_TOOL_SECRET": "s", "DEMO_CLIENT_TOKEN": "bk_x", "DEMO_DECISION_AUTH": "Signed"}
    configured = run_module(["-c", code], {**env, "DEMO_HUB_URL": "http://127.0.0.1:8000/"})
    assert configured.stdout.split() == ["bk_x", "signed", "http://127.0.0.1:8000"]


def test_demo_business_does_not_load_django():
    code = "import sys, demo_business.app, demo_business.__main__; print('django' in sys.modules)"
    result = run_module(["-c", code], {})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_sigterm_stops_the_server_cleanly():
    with running_demo_business() as shop:
        assert shop.base_url.startswith("http://127.0.0.1:")
        assert shop.client.get(shop.url("/health")).status_code == 200
        shop.process.send_signal(signal.SIGTERM)
        assert shop.process.wait(timeout=10) == 0


def test_each_process_has_its_own_secret():
    with running_demo_business(secret="first-secret-value") as first:
        response = first.call("GET", "/orders", on_behalf_of="alice", secret="second-secret-value")
        assert response.status_code == 401
        assert first.call("GET", "/orders", on_behalf_of="alice").status_code == 200
