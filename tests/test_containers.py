"""The container files (Dockerfile, .dockerignore, compose.yaml, scripts/entrypoint) agree with the
project, and the entrypoint does what the containers need from it.

No Docker engine is needed: the config tests read the files and check them against the code
(management commands, modules, settings, the URLconf, the package list); the behaviour tests run
``scripts/entrypoint`` as the image would — from a home assembled by the Dockerfile's own COPY lines,
with the project importable but not from that home — against a fresh database on this test session's
PostgreSQL server: the Demo Shop, then the hub (migrate, demo seed, the front with gunicorn), then the
knowledge worker, until ``/health/ready`` answers 200. ``.ci/run`` builds the real image wherever an
engine answers.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ENTRYPOINT = ROOT / "scripts" / "entrypoint"
IMAGE_HOME = "/app"
# Variables of the interpreter and the image, not of the project.
INTERPRETER_VARIABLES = {
    "PATH",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED",
    "PIP_NO_CACHE_DIR",
    "PIP_DISABLE_PIP_VERSION_CHECK",
}
DEMO_ONLY_VARIABLES = {
    "SECRET_KEY",
    "POSTGRES_PASSWORD",
    "DEMO_TOOL_SECRET",
    "DEMO_CLIENT_TOKEN",
    "BAILING_METRICS_TOKEN",
    "GRAFANA_ADMIN_PASSWORD",
}
MONITORING_SERVICES = {"prometheus", "grafana"}


# --- reading the files ------------------------------------------------------------------------------------
@dataclass
class Stage:
    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, op: str) -> list[str]:
        return [args for name, args in self.instructions if name == op]


def dockerfile_stages(text: str | None = None) -> list[Stage]:
    """The Dockerfile's stages (comments dropped, continuation lines joined, ``ARG`` defaults before the
    first ``FROM`` substituted into the ``FROM`` lines)."""
    text = (ROOT / "Dockerfile").read_text() if text is None else text
    logical: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        pending += line
        if pending.strip():
            logical.append(pending.strip())
        pending = ""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        op, _, rest = line.partition(" ")
        op = op.upper()
        if op == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
        elif op == "FROM":
            words = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], rest).split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else ""
            stages.append(Stage(base=words[0], name=name))
        else:
            stages[-1].instructions.append((op, rest.strip()))
    return stages


def exec_form(args: str) -> list[str]:
    """``["a", "b"]`` (exec form) or ``a b`` (shell form) as a list of words."""
    if args.startswith("["):
        return json.loads(args)
    return shlex.split(args)


def copy_sources(stage: Stage) -> list[tuple[list[str], str]]:
    """(sources, destination) of the stage's ``COPY`` lines from the build context (not ``--from``)."""
    result = []
    for args in stage.all("COPY"):
        words = exec_form(args)
        if any(word.startswith("--from") for word in words):
            continue
        words = [word for word in words if not word.startswith("--")]
        result.append((words[:-1], words[-1]))
    return result


def stage_env(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for args in stage.all("ENV"):
        for word in shlex.split(args):
            name, _, value = word.partition("=")
            env[name] = value
    return env


def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def default_services() -> dict[str, dict]:
    """The services ``docker compose up`` starts (those of no profile)."""
    return {name: spec for name, spec in compose()["services"].items() if not spec.get("profiles")}


def project_services() -> dict[str, dict]:
    """The services that run the hub's image (all but the database and the monitoring profile's)."""
    return {name: spec for name, spec in default_services().items() if name != "db"}


def entrypoint_commands() -> set[str]:
    """The subcommands scripts/entrypoint's ``case`` accepts."""
    text = ENTRYPOINT.read_text()
    body = text[text.index('case "$command" in') :]
    return set(re.findall(r"^  ([a-z]+)\)$", body, re.MULTILINE))


def probe_urls() -> list[tuple[str, str]]:
    """(service, URL) of every health check that probes a URL through the entrypoint."""
    found = []
    for name, spec in project_services().items():
        test = (spec.get("healthcheck") or {}).get("test")
        if test:
            assert test[1:3] == [f"{IMAGE_HOME}/scripts/entrypoint", "probe"], (name, test)
            found.append((name, test[3]))
    (healthcheck,) = dockerfile_stages()[-1].all("HEALTHCHECK")
    words = exec_form(healthcheck[healthcheck.index("CMD") + 3 :].strip())
    assert words[:2] == [f"{IMAGE_HOME}/scripts/entrypoint", "probe"], words
    found.append(("Dockerfile", words[2]))
    return found


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _ignore_regex(pattern: str) -> re.Pattern:
    """A .dockerignore pattern (Go's filepath.Match plus ``**``) as a regular expression."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves ``path`` (relative to the context) out of the build context: the last
    pattern matching it or one of its parent directories decides (``!`` re-includes)."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for raw in patterns:
        negate = raw.startswith("!")
        regex = _ignore_regex((raw[1:] if negate else raw).strip("/"))
        if any(regex.match(prefix) for prefix in prefixes):
            excluded = not negate
    return excluded


def tracked_files() -> list[str]:
    output = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line for line in output.splitlines() if (ROOT / line).exists()]


def variables_read_by_the_project() -> set[str]:
    """Environment variables the settings, gunicorn's config, the Demo Shop and the entrypoint read."""
    python_sources = [ROOT / "bailing" / "settings.py", ROOT / "bailing" / "gunicorn.conf.py"]
    python_sources += sorted((ROOT / "demo_business").glob("*.py"))
    text = "\n".join(path.read_text() for path in python_sources)
    read = set(re.findall(r"\benv\.\w+\(\s*\"([A-Z][A-Z0-9_]*)\"", text))
    read |= set(re.findall(r"\benv\.get\(\s*\"([A-Z][A-Z0-9_]*)\"", text))
    read |= set(re.findall(r"os\.environ\.get\(\s*\"([A-Z][A-Z0-9_]*)\"", text))
    read |= set(re.findall(r"\$\{!?([A-Z][A-Z0-9_]*)", ENTRYPOINT.read_text()))
    # ${!name} reads the variables the entrypoint names in its demo_secrets loop
    read |= set(re.findall(r"\b(DEMO_[A-Z_]+):demo-", ENTRYPOINT.read_text()))
    return read


def env_example() -> set[str]:
    return set(re.findall(r"^([A-Z][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.MULTILINE))


def port_of(bind_or_url: str) -> int:
    if "://" in bind_or_url:
        return urlsplit(bind_or_url).port
    return int(bind_or_url.rsplit(":", 1)[1])


# --- config tests -------------------------------------------------------------------------------------------
def test_dockerignore_matching_follows_docker():
    patterns = [".git", "var", "**/__pycache__", "*.egg-info", "tests", "!tests/keep.txt"]
    assert dockerignored("var/pg/PG_VERSION", patterns)
    assert dockerignored("bailing/db/__pycache__/x.pyc", patterns)
    assert dockerignored("bailing_hub.egg-info/PKG-INFO", patterns)
    assert not dockerignored("bailing/var.py", patterns)
    assert not dockerignored("docs/bailing_hub.egg-info", patterns)  # a root pattern stays at the root
    assert dockerignored("tests/test_x.py", patterns)
    assert not dockerignored("tests/keep.txt", patterns)


def test_compose_runs_the_demo_services():
    services = default_services()
    assert set(services) == {"db", "hub", "worker", "shop"}
    assert set(compose()["services"]) - set(services) == MONITORING_SERVICES
    db = services["db"]
    assert db["image"] == "pgvector/pgvector:pg17"
    assert any(volume.endswith(":/var/lib/postgresql/data") for volume in db["volumes"])
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    for name in ("hub", "worker"):
        assert services[name]["depends_on"]["db"]["condition"] == "service_healthy"
    # One image for the three, built here (never pulled from a registry under a guessable name).
    images = {(spec["build"], spec["image"]) for spec in project_services().values()}
    assert images == {(".", "bailing-hub:local")}
    assert [spec["command"][0] for spec in map(services.get, ("hub", "worker", "shop"))] == [
        "hub",
        "worker",
        "shop",
    ]
    hub = services["hub"]
    assert hub["environment"]["BAILING_DEMO"] == "true"  # seeds the demo, as make demo does
    # The hub in the shop's network: the provider's plain-http base URL must be a loopback one. The
    # shop owns that network (it never exits by itself) and publishes the ports, on the loopback
    # interface only, as make demo listens; nothing else publishes any.
    assert hub["network_mode"] == "service:shop"
    assert hub["depends_on"]["shop"]["condition"] == "service_healthy"  # the seed refreshes its tools
    published = [port for spec in services.values() for port in spec.get("ports", [])]
    assert published and published == services["shop"]["ports"]
    assert all(port.startswith("127.0.0.1:") for port in published)


def test_compose_secrets_have_demo_only_defaults():
    text = (ROOT / "compose.yaml").read_text()
    defaults = dict(re.findall(r"\$\{([A-Z][A-Z0-9_]*):-([^}]*)\}", text))
    assert set(defaults) == DEMO_ONLY_VARIABLES
    assert all(value.startswith("demo-only-") for value in defaults.values()), defaults
    # Every secret a service is given comes from the shell or .env, with that default.
    for spec in project_services().values():
        for name, value in spec["environment"].items():
            if name in DEMO_ONLY_VARIABLES:
                assert re.fullmatch(r"\$\{" + name + r":-demo-only-[^}]+\}", value), (name, value)
    assert "DEMO ONLY" in text


def test_every_command_the_containers_run_exists():
    from django.core.management import get_commands

    commands = entrypoint_commands()
    assert {"hub", "serve", "worker", "shop", "migrate", "seed", "probe", "manage"} <= commands
    for name, spec in project_services().items():
        assert spec["command"][0] in commands, name
    final = dockerfile_stages()[-1]
    assert exec_form(final.all("CMD")[0])[0] in commands
    # manage.py commands and python -m modules in the entrypoint and the Dockerfile's RUN lines
    script = [line for line in ENTRYPOINT.read_text().splitlines() if not line.lstrip().startswith("#")]
    text = "\n".join(script + final.all("RUN"))
    management = set(re.findall(r"\bmanage(?:\.py\"?)?\s+([a-z][a-z_]+)", text))
    management |= set(re.findall(r"manage\.py\" ([a-z][a-z_]+)", text))
    assert {"migrate", "bailing_demo", "knowledge_worker", "collectstatic"} <= management
    unknown = management - set(get_commands())
    assert not unknown, unknown
    modules = set(re.findall(r"-m ([a-z_][a-z_.]*)", text))
    assert modules == {"front", "demo_business"}
    for module in modules:
        assert importlib.util.find_spec(f"{module}.__main__") is not None, module


def test_every_variable_the_containers_set_is_read_and_documented():
    read = variables_read_by_the_project()
    listed = env_example()
    set_here: dict[str, str] = {}
    for name, spec in project_services().items():
        for variable in spec["environment"]:
            set_here[variable] = f"compose service {name}"
    for stage in dockerfile_stages():
        for variable in stage_env(stage):
            set_here[variable] = f"Dockerfile stage {stage.name}"
    project = {name: where for name, where in set_here.items() if name not in INTERPRETER_VARIABLES}
    assert {"DATABASE_URL", "SECRET_KEY", "BAILING_HOME", "BAILING_BIND", "DEMO_PORT"} <= set(project)
    assert not {name for name in project if name not in read}, "set but read by nothing"
    assert not {name for name in project if name not in listed}, "set but not in .env.example"
    # The pip variables only steer the build stage's install.
    assert {name for name in set_here if name.startswith("PIP_")} <= set(stage_env(dockerfile_stages()[0]))


def test_health_checks_probe_paths_that_answer():
    from django.urls import resolve

    from demo_business.app import make_app
    from demo_business.config import DemoConfig

    checks = probe_urls()
    assert {service for service, _ in checks} == {"hub", "shop", "Dockerfile"}
    shop = make_app(DemoConfig(tool_secret="config-test"))
    for service, url in checks:
        parts = urlsplit(url)
        assert parts.hostname == "127.0.0.1", url
        if service == "shop":
            statuses = []
            body = shop(
                {"REQUEST_METHOD": "GET", "PATH_INFO": parts.path, "QUERY_STRING": "", "wsgi.input": None},
                lambda status, headers, *_: statuses.append(status),
            )
            b"".join(body)
            assert statuses[0].startswith("200"), (url, statuses)
        else:
            assert resolve(parts.path).url_name in {"health", "health-ready"}, url
    # Readiness (it needs the worker) where compose runs one; liveness for the image run alone.
    assert dict(checks)["hub"].endswith("/health/ready")
    assert dict(checks)["Dockerfile"].endswith("/health")


def bind_mounts(spec: dict) -> dict[str, str]:
    """A service's bind mounts from the repository: container path -> repository path."""
    mounts = {}
    for volume in spec.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("./"):
            mounts[target] = source[2:]
    return mounts


def test_compose_monitoring_profile_is_optional_and_provisioned():
    """``docker compose --profile monitoring up``: Prometheus scraping the hub's /metrics with its token,
    Grafana with that Prometheus and the dashboard, every mounted file in the repository."""
    services = compose()["services"]
    tracked = tracked_files()
    for name in MONITORING_SERVICES:
        spec = services[name]
        assert spec["profiles"] == ["monitoring"], name
        repository, _, tag = spec["image"].rpartition(":")
        assert repository and re.fullmatch(r"v?\d+\.\d+\.\d+", tag), spec["image"]  # pinned, never latest
        for target, source in bind_mounts(spec).items():
            assert (ROOT / source).exists(), (name, source)
            assert any(path == source or path.startswith(source + "/") for path in tracked), source
            assert spec["volumes"][[v.split(":")[1] for v in spec["volumes"]].index(target)].endswith(":ro")
    # Nothing of the demo depends on them: plain `docker compose up` starts none.
    for name, spec in default_services().items():
        assert not set(spec.get("depends_on") or ()) & MONITORING_SERVICES, name
    hub = services["hub"]
    hub_port = port_of(hub["environment"]["BAILING_BIND"])

    # Prometheus: in the hub's network, scraping 127.0.0.1 (an allowed host) with the hub's token.
    prometheus = services["prometheus"]
    assert prometheus["network_mode"] == hub["network_mode"] == "service:shop"
    config_path = bind_mounts(prometheus)["/etc/prometheus/prometheus.yml"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    config = yaml.safe_load((ROOT / config_path).read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert [target for group in job["static_configs"] for target in group["targets"]] == [
        f"127.0.0.1:{hub_port}"
    ]
    from django.conf import settings

    assert "127.0.0.1" in settings.ALLOWED_HOSTS and "ALLOWED_HOSTS" not in hub["environment"]
    assert job["authorization"]["type"] == "Bearer"
    (token_config,) = prometheus["configs"]
    assert token_config["target"] == job["authorization"]["credentials_file"]
    token = compose()["configs"][token_config["source"]]["content"]
    assert token == hub["environment"]["BAILING_METRICS_TOKEN"]
    assert token.startswith("${BAILING_METRICS_TOKEN:-")
    published = [port for spec in services.values() for port in spec.get("ports", [])]
    assert "9090" not in " ".join(published)  # the web UI is not published; Grafana reads it inside

    # Grafana: on the loopback interface only, provisioned with that Prometheus and the dashboard.
    grafana = services["grafana"]
    assert grafana["ports"] == ["127.0.0.1:3000:3000"]
    assert "prometheus" in grafana["depends_on"]
    mounts = bind_mounts(grafana)
    provisioning = ROOT / mounts["/etc/grafana/provisioning"]
    (datasource,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())[
        "datasources"
    ]
    assert datasource["type"] == "prometheus" and datasource["isDefault"] is True
    # Prometheus listens on its default port in the shop's network, which the other services call "shop".
    assert urlsplit(datasource["url"]).hostname == "shop" and urlsplit(datasource["url"]).port == 9090
    assert not any(word.startswith("--web.listen-address") for word in prometheus["command"])
    assert datasource["jsonData"]["timeInterval"] == config["global"]["scrape_interval"]
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "bailing-hub.yml").read_text())["providers"]
    assert provider["type"] == "file"
    dashboards = provider["options"]["path"]
    assert dashboards in mounts
    files = sorted((ROOT / mounts[dashboards]).glob("*.json"))
    assert [path.name for path in files] == ["bailing-hub.json"]
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{dashboards}/bailing-hub.json"
    dashboard = json.loads(files[0].read_text())
    (source_variable,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert source_variable["query"] == datasource["type"]
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:-")


def test_ports_agree():
    services = compose()["services"]
    final = dockerfile_stages()[-1]
    env = stage_env(final)
    hub_port = port_of(env["BAILING_BIND"])
    assert [int(port) for port in final.all("EXPOSE")] == [hub_port]
    hub = services["hub"]
    assert port_of(hub["environment"]["BAILING_BIND"]) == hub_port
    shop = services["shop"]
    published = {int(port.split(":")[2]): int(port.split(":")[1]) for port in shop["ports"]}
    shop_port = int(shop["environment"]["DEMO_PORT"])
    # the shop's port and (the hub lives in the shop's network) the hub's, each under its own number
    assert published == {hub_port: hub_port, shop_port: shop_port}
    public_url = hub["environment"]["BAILING_PUBLIC_URL"]
    assert port_of(public_url) == hub_port
    assert shop["environment"]["DEMO_HUB_URL"] == public_url
    demo = yaml.safe_load((ROOT / "examples" / "demo.yaml").read_text())
    (provider,) = demo["tool_providers"]
    assert port_of(provider["base_url"]) == shop_port
    for service, url in probe_urls():
        assert port_of(url) == (shop_port if service == "shop" else hub_port), (service, url)


def test_the_final_stage_is_slim_and_runs_as_a_fixed_non_root_user():
    stages = dockerfile_stages()
    assert len(stages) >= 2, "multi-stage: the build tools stay in the build stage"
    final = stages[-1]
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-[a-z]+)?", final.base), final.base
    (user,) = final.all("USER")
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and (not gid or int(gid) > 0), user
    assert any(f"--uid {uid}" in run for run in final.all("RUN"))
    # USER comes after every RUN: nothing runs as root at run time, and the state directory is theirs.
    ops = [op for op, _ in final.instructions]
    assert ops.index("USER") > max(i for i, op in enumerate(ops) if op == "RUN")
    assert any(f"chown {uid}" in run and "var" in run for run in final.all("RUN"))
    (entrypoint,) = final.all("ENTRYPOINT")
    copied = {destination for _, destination in copy_sources(final)}
    assert exec_form(entrypoint)[0] in {f"{IMAGE_HOME}/{path}" for path in copied}
    assert stage_env(final)["BAILING_HOME"] == IMAGE_HOME
    assert any(re.search(r"\bmanage\.py collectstatic\b", run) for run in final.all("RUN"))
    # Runtime dependencies only, from a wheel: never editable, never the dev extra.
    install = " ".join(stages[0].all("RUN"))
    assert "pip install /src" in install and " -e " not in install and "[dev]" not in install


def test_every_copy_source_exists_and_reaches_the_build_context():
    patterns = dockerignore_patterns()
    tracked = tracked_files()
    for stage in dockerfile_stages():
        for sources, _ in copy_sources(stage):
            for source in sources:
                assert (ROOT / source).exists(), source
                assert not dockerignored(source, patterns), f"{source} is excluded by .dockerignore"
                inside = [path for path in tracked if path == source or path.startswith(source + "/")]
                assert inside, source
                dropped = [path for path in inside if dockerignored(path, patterns)]
                assert not dropped, dropped
    # What pip needs to build the wheel, and nothing of the local state.
    assert not dockerignored("README.md", patterns) and not dockerignored("LICENSE", patterns)
    for local in (".venv/bin/python", "var/pg/PG_VERSION", ".git/HEAD", ".env", "tests/conftest.py"):
        assert dockerignored(local, patterns), local


def test_the_image_holds_every_app_and_the_home_the_settings_use():
    from django.conf import settings
    from setuptools import find_packages

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packaged = set(find_packages(where=str(ROOT), include=include))
    local_apps = {app.split(".")[0] for app in settings.INSTALLED_APPS if (ROOT / app.split(".")[0]).is_dir()}
    tops = local_apps | {"front", "agent_client", "demo_business"}
    # every package directory of every app is in the wheel (a non-editable install has nothing else)
    on_disk = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for top in tops
        for path in (ROOT / top).rglob("__init__.py")
    }
    assert on_disk <= packaged, sorted(on_disk - packaged)
    build, final = dockerfile_stages()[0], dockerfile_stages()[-1]
    built = {source for sources, _ in copy_sources(build) for source in sources}
    assert tops <= built, sorted(tops - built)
    home = {source for sources, _ in copy_sources(final) for source in sources}
    # the home beside the code: what the settings and the demo seed read under BASE_DIR
    assert {"manage.py", "templates", "static", "examples", "scripts/entrypoint"} <= home
    assert not tops & home, "the packages come from the virtualenv, not copied beside it"
    assert Path(settings.TEMPLATES[0]["DIRS"][0]).name == "templates"
    assert [Path(path).name for path in settings.STATICFILES_DIRS] == ["static"]


def test_ci_builds_the_image_only_where_an_engine_answers():
    script = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in script.splitlines() if line.strip() and not line.startswith("#")]
    assert lines.index("make lint") < lines.index("make test")
    after = "\n".join(lines[lines.index("make test") + 1 :])
    assert "docker info >/dev/null 2>&1" in after
    assert re.search(r"docker build\b.*\s\.$", after, re.MULTILINE)
    assert "not run" in after and "no Docker engine" in after
    assert os.access(ROOT / ".ci" / "run", os.X_OK) and os.access(ENTRYPOINT, os.X_OK)


# --- behaviour: the entrypoint, run as the image runs it -------------------------------------------------
def _server_url(name: str) -> str:
    """A database on this session's PostgreSQL server (the embedded one, or DATABASE_URL's)."""
    from django.db import connection

    settings = connection.settings_dict
    host = settings["HOST"] or settings.get("OPTIONS", {}).get("host", "")
    user = settings["USER"] or "postgres"
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    if host.startswith("/"):
        return f"postgres://{user}{password}@/{name}?host={host}&port={settings['PORT'] or 5432}"
    return f"postgres://{user}{password}@{host}:{settings['PORT'] or 5432}/{name}"


@pytest.fixture
def fresh_database_url() -> Iterator[str]:
    """A new, empty database on the test server (what the db container starts with), dropped after."""
    name = f"bailing_containers_{secrets.token_hex(4)}"
    with psycopg.connect(_server_url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _server_url(name)
    finally:
        with psycopg.connect(_server_url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def image_home(tmp_path) -> Path:
    """The hub's home as the image's final stage lays it out: its COPY lines, from this checkout."""
    home = tmp_path / "app"
    home.mkdir()
    for sources, destination in copy_sources(dockerfile_stages()[-1]):
        for source in sources:
            target = home / destination.removeprefix("./") if destination not in {"./", "."} else home
            if destination.endswith("/") or destination in {".", "./"}:
                target = target / Path(source).name
            target.parent.mkdir(parents=True, exist_ok=True)
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(ROOT / source, target)
    assert not (home / "bailing").exists()  # the code comes from the installed packages
    return home


def _free_port() -> int:
    from front.launcher import free_port

    return free_port()


def _entrypoint_env(home: Path, **extra: str) -> dict[str, str]:
    """The image's environment: the project importable (in the image: the virtualenv's site-packages;
    here: this checkout on PYTHONPATH), the home elsewhere, no setting inherited from this session."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("BAILING_", "DEMO_", "GUNICORN_", "DJANGO_")) and key != "DATABASE_URL"
    }
    env.update(
        PYTHONPATH=str(ROOT),
        BAILING_HOME=str(home),
        BAILING_PYTHON=sys.executable,
        SECRET_KEY=secrets.token_urlsafe(64),
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.update(extra)
    return env


def _run(home: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(home / "scripts" / "entrypoint"), *args],
        env=_entrypoint_env(home, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class Started:
    """A process started through the entrypoint in its own process group, stopped with SIGTERM to the
    group (the shell before its ``exec`` and whatever it runs), SIGKILL if it lingers."""

    def __init__(self, home: Path, command: str, log: Path, env: dict[str, str]):
        self.log = log
        self._output = log.open("w")
        self.process = subprocess.Popen(
            [str(home / "scripts" / "entrypoint"), command],
            env=_entrypoint_env(home, **env),
            stdout=self._output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 45) -> int:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._output.close()
        return self.process.returncode


def _get(url: str) -> tuple[int, bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _wait(condition, what: str, processes: list[Started], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for started in processes:
            if not started.alive():
                raise AssertionError(f"{started.log.name} exited while waiting for {what}:\n{started.text()}")
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(0.5)
    logs = "\n".join(f"--- {p.log.name}\n{p.text()[-3000:]}" for p in processes)
    raise AssertionError(f"timed out waiting for {what}\n{logs}")


def test_the_entrypoint_runs_the_demo_as_compose_does(image_home, fresh_database_url, tmp_path):
    """Shop, then hub (migrate, seed, the front with gunicorn), then worker, as compose starts them: the
    demo is ready (/health/ready 200 with the worker's heartbeat), seeded exactly as make demo seeds
    it, with the demo secrets given through the environment."""
    # collectstatic as the image build runs it: no database behind the dummy URL, a home of its own
    collected = _run(
        image_home,
        "manage",
        "collectstatic",
        "--noinput",
        "-v",
        "0",
        DATABASE_URL="postgres://build@127.0.0.1:1/build",
    )
    assert collected.returncode == 0, collected.stderr
    assert (image_home / "var" / "staticfiles" / "admin").is_dir()

    hub_port, shop_port = _free_port(), _free_port()
    tool_secret, client_token = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    public_url = f"http://127.0.0.1:{hub_port}"
    common = {
        "DATABASE_URL": fresh_database_url,
        "BAILING_PUBLIC_URL": public_url,
        "DEMO_TOOL_SECRET": tool_secret,
        "DEMO_CLIENT_TOKEN": client_token,
        "DEMO_PORT": str(shop_port),
        "BAILING_EMBEDDING_THREADS": "1",
        "GUNICORN_WORKERS": "1",
        "GUNICORN_THREADS": "2",
        "BAILING_DB_WAIT_SECONDS": "240",
    }
    logs = tmp_path / "logs"
    logs.mkdir()
    started: list[Started] = []
    try:
        shop = Started(image_home, "shop", logs / "shop.log", {**common, "DEMO_HUB_URL": public_url})
        started.append(shop)
        _wait(lambda: _get(f"http://127.0.0.1:{shop_port}/health")[0] == 200, "the shop", started, 60)
        hub = Started(
            image_home,
            "hub",
            logs / "hub.log",
            {**common, "BAILING_DEMO": "true", "BAILING_BIND": f"127.0.0.1:{hub_port}"},
        )
        worker = Started(image_home, "worker", logs / "worker.log", common)
        started += [hub, worker]
        _wait(lambda: _get(f"{public_url}/health/ready")[0] == 200, "readiness", started, 420)

        _status, body = _get(f"{public_url}/health/ready")
        checks = json.loads(body)["checks"]
        assert checks["migrations"] == {"ok": True, "unapplied": 0}
        assert checks["knowledge_worker"]["ok"] is True
        assert _get(f"{public_url}/console/login/")[0] == 200  # templates and static from the home
        banner = hub.text()
        tools = re.search(r"Demo Shop tools: (\d+) compiled", banner)
        assert tools and int(tools.group(1)) > 0, banner
        assert f"approvals page at http://127.0.0.1:{shop_port}/approvals" in banner
        ready = re.search(r"Demo knowledge: (\d+) document\(s\) ready", banner)
        assert ready and int(ready.group(1)) == len(list((ROOT / "examples" / "demo-knowledge").glob("*.md")))
        assert f"Console        {public_url}/console/" in banner
        # the secrets came from the environment, into the home's var/, private
        for name, value in (("demo-tool-secret", tool_secret), ("demo-client-token", client_token)):
            path = image_home / "var" / name
            assert path.read_text() == value
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert (image_home / "var" / "demo-admin-password").exists()  # the home's var/, not the checkout's
        with psycopg.connect(fresh_database_url) as conn:
            base_url = conn.execute(
                "SELECT base_url FROM agent_runtime_toolprovider WHERE name = 'demo-shop'"
            ).fetchone()[0]
            users = {row[0] for row in conn.execute("SELECT username FROM auth_user")}
            (tools,) = conn.execute(
                "SELECT tools FROM agent_runtime_route WHERE route_key = 'demo'"
            ).fetchone()
        assert base_url == f"http://127.0.0.1:{shop_port}"
        assert tools["approval"]["url"] == f"http://127.0.0.1:{shop_port}/approvals"  # the webhook too
        assert {"alice", "manager"} <= users
        # the shop answers the hub's signed calls: its approval page is up, reached as the browser would
        assert _get(f"http://127.0.0.1:{shop_port}/approvals")[0] == 200
    finally:
        codes = {started_one.log.name: started_one.stop() for started_one in reversed(started)}
    assert codes == {"worker.log": 0, "hub.log": 0, "shop.log": 0}, codes

    # migrate again, as a restarted hub container does: nothing to do, exit 0
    again = _run(image_home, "migrate", DATABASE_URL=fresh_database_url)
    assert again.returncode == 0, again.stderr
    assert "No migrations to apply" in again.stdout


def test_the_worker_waits_for_the_migrations_and_gives_up(image_home, fresh_database_url):
    """An empty database (the hub never migrated it): the worker waits, then fails with its reason."""
    started = time.monotonic()
    result = _run(image_home, "worker", DATABASE_URL=fresh_database_url, BAILING_DB_WAIT_SECONDS="3")
    assert result.returncode == 1
    assert "migrations are still unapplied" in result.stderr
    assert time.monotonic() - started < 120


def test_the_entrypoint_refuses_what_it_cannot_do(image_home):
    closed = f"http://127.0.0.1:{_free_port()}/health"
    assert _run(image_home, "probe", closed).returncode == 1
    assert _run(image_home, "probe").returncode == 2
    unknown = _run(image_home, "frobnicate")
    assert unknown.returncode == 2 and "unknown command" in unknown.stderr
    # a database that never answers: the wait ends with the reason, not a traceback
    down = _run(
        image_home,
        "migrate",
        DATABASE_URL=f"postgres://nobody@127.0.0.1:{_free_port()}/none",
        BAILING_DB_WAIT_SECONDS="2",
    )
    assert down.returncode == 1
    assert "the database did not answer in time (OperationalError)" in down.stderr
