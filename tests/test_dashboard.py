"""The Grafana dashboard (deploy/grafana/dashboards/bailing-hub.json) charts what the hub exports.

Every PromQL query of the dashboard (panel targets and template variables) is parsed as Prometheus
would (``promql-parser``) and the metric of each of its vector selectors must be one the hub's
``GET /metrics`` answers: a test client's scrape after a few requests, plus a scrape of the hub in its
shipped topology (the front before gunicorn), where the front's own gauge lives. The reverse holds
too: every ``bailing_*`` metric the hub exports is charted somewhere. The JSON has the basics Grafana
needs to load it (unique panel ids, a data source and queries on every panel, a grid position).
"""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request
from pathlib import Path

import promql_parser
import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.support.live_hub import live_hub

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "bailing-hub.json"
TOKEN = "metrics-token-for-dashboard-tests"
# Grafana's own interval variables, as a duration Prometheus accepts.
GRAFANA_INTERVALS = re.compile(r"\$\{?__(?:rate_interval|interval|range)\}?")
# Series names each metric type puts in the exposition (prometheus-client's text format).
SERIES_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def data_panels(board: dict) -> list[dict]:
    """Every panel that queries (rows are layout only), rows' collapsed children included."""
    found = []
    for panel in board["panels"]:
        if panel["type"] == "row":
            found += panel.get("panels", [])
        else:
            found.append(panel)
    return found


def grafana_expand(expr: str, board: dict) -> str:
    """The query as Grafana sends it: its interval variables as a duration, the dashboard's own
    variables as their "All" value. Anything else starting with ``$`` is an unknown variable."""
    expr = GRAFANA_INTERVALS.sub("5m", expr)
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            expr = re.sub(r"\$\{?" + variable["name"] + r"\b\}?", variable.get("allValue") or ".*", expr)
    assert "$" not in expr, expr
    return expr


def dashboard_queries(board: dict) -> list[tuple[str, str]]:
    """(where, PromQL) of every query: panel targets and query variables (``label_values(selector,
    label)`` is Grafana's; its selector is PromQL)."""
    queries = []
    for panel in data_panels(board):
        for target in panel["targets"]:
            queries.append((f"panel {panel['id']} {panel['title']!r} {target['refId']}", target["expr"]))
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query.strip())
        assert match, (variable["name"], query)
        queries.append((f"variable {variable['name']}", match.group(1)))
    return [(where, grafana_expand(expr, board)) for where, expr in queries]


def metric_names(expr: str) -> set[str]:
    """The metric each vector selector of ``expr`` names (its name, or an exact ``__name__``)."""
    names: set[str] = set()

    def visit(node) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            name = node.name
            if name is None:
                exact = [
                    m.value
                    for m in node.matchers.matchers
                    if m.name == "__name__" and m.op == promql_parser.MatchOp.Equal
                ]
                assert exact, f"a selector without a fixed metric name: {expr}"
                name = exact[0]
            names.add(name)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def exported_series(text: str) -> dict[str, str]:
    """Series name -> the family it belongs to, for every family of an exposition (a family declared
    with no sample yet, a labelled counter never incremented, still names its series)."""
    families = list(text_string_to_metric_families(text))
    names = {family.name for family in families}
    series = {}
    for family in families:
        # The classic text format has no created timestamps: prometheus_client writes a counter's or a
        # histogram's as a gauge family of its own, ``<name>_created``, once it has a sample. It is a
        # series of the counter's family, not a metric of its own.
        name = family.name
        if family.type == "gauge" and name.endswith("_created") and name.removesuffix("_created") in names:
            name = name.removesuffix("_created")
        for suffix in SERIES_SUFFIXES.get(family.type, ("",)):
            series[family.name + suffix] = name
        for sample in family.samples:
            series[sample.name] = name
    return series


def scrape_values(text: str) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


# --- the helpers themselves -------------------------------------------------------------------------------
def test_metric_names_come_from_selectors_only():
    expr = (
        'histogram_quantile(0.95, sum by (route, le) (rate(a_seconds_bucket{route=~"x", status="5.."}[5m])))'
        " / ignoring(status) group_left sum without (lane) (b_total offset 5m) or on() vector(0)"
        ' + max_over_time(c[1h:5m]) * {__name__="d"}'
    )
    assert metric_names(expr) == {"a_seconds_bucket", "b_total", "c", "d"}
    with pytest.raises(ValueError):
        metric_names("sum(rate(x[5m])")  # unbalanced: Prometheus would refuse it too
    with pytest.raises(ValueError):
        metric_names("rate(x)")  # a range vector expected
    board = {"templating": {"list": [{"type": "query", "name": "route", "allValue": ".*"}]}}
    assert grafana_expand('rate(x{route=~"$route"}[$__rate_interval])', board) == 'rate(x{route=~".*"}[5m])'
    with pytest.raises(AssertionError):
        grafana_expand('x{a="$nobody"}', board)


def test_exported_series_follow_the_metric_types():
    text = (
        "# TYPE a_total counter\n# TYPE b_seconds histogram\n# TYPE c gauge\nc 1\n"
        '# TYPE a2 counter\na2_total{x="1"} 3\n'
    )
    series = exported_series(text)
    assert {"a_total", "b_seconds_bucket", "b_seconds_count", "b_seconds_sum", "c", "a2_total"} <= set(series)
    assert "b_seconds" not in series and "a" not in series  # the bare family name of neither is a series
    created = exported_series(
        '# TYPE a2 counter\na2_total{x="1"} 3\n# TYPE a2_created gauge\na2_created{x="1"} 1.7e9\n'
    )
    assert created["a2_created"] == "a2"  # prometheus_client's created timestamp: a series of the counter


# --- the dashboard ------------------------------------------------------------------------------------------
def test_the_dashboard_json_has_what_grafana_needs():
    board = dashboard()
    assert board["uid"] == "bailing-hub" and board["title"] and isinstance(board["schemaVersion"], int)
    ids = [panel["id"] for panel in board["panels"]] + [
        child["id"]
        for panel in board["panels"]
        if panel["type"] == "row"
        for child in panel.get("panels", [])
    ]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
    (datasource,) = [v for v in board["templating"]["list"] if v["type"] == "datasource"]
    assert datasource["query"] == "prometheus"
    source = {"type": "prometheus", "uid": "${" + datasource["name"] + "}"}
    panels = data_panels(board)
    assert len(panels) >= 12
    for panel in panels:
        assert panel["datasource"] == source, panel["title"]
        assert panel["type"] in {"timeseries", "stat", "bargauge", "gauge", "table"}, panel["title"]
        assert panel["title"] and panel.get("description"), panel["id"]
        assert panel["targets"], panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target.get("datasource", source) == source and target["expr"].strip(), panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"] == source, variable["name"]
    # No two panels overlap on the grid (Grafana would move one).
    cells = set()
    for panel in board["panels"] + [
        c for p in board["panels"] if p["type"] == "row" for c in p.get("panels", [])
    ]:
        grid = panel["gridPos"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, panel["title"]
        cells |= mine


@pytest.fixture(scope="module")
def live_scrape(django_db_setup, tmp_path_factory):
    """``/metrics`` of the hub in its shipped topology (the front before gunicorn) on the test database,
    and a function scraping it again."""
    with live_hub(tmp_path_factory.mktemp("dashboard"), {"BAILING_METRICS_TOKEN": TOKEN}) as url:

        def scrape() -> str:
            request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.read().decode()

        with urllib.request.urlopen(f"{url}/health", timeout=30) as response:
            assert response.status == 200
        yield url, scrape


@pytest.mark.django_db
def test_every_dashboard_query_names_a_metric_the_hub_exports(settings, live_scrape):
    settings.BAILING_METRICS_TOKEN = TOKEN
    client = Client()
    assert client.get("/health").status_code == 200
    assert client.get("/no-such-page-for-the-dashboard-test").status_code == 404
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    in_process = exported_series(response.content.decode())
    assert "bailing_http_requests_total" in in_process
    _, scrape = live_scrape
    shipped = exported_series(scrape())
    assert "bailing_front_connections" in shipped  # the front's gauge, read by gunicorn's workers
    exported = {**in_process, **shipped}

    board = dashboard()
    used: set[str] = set()
    for where, expr in dashboard_queries(board):
        names = metric_names(expr)
        assert names, f"{where} names no metric: {expr}"
        unknown = names - set(exported)
        assert not unknown, f"{where} names {sorted(unknown)}, which the hub does not export"
        used |= {exported[name] for name in names}
    hub_families = {family for family in exported.values() if family.startswith("bailing_")}
    assert not hub_families - used, f"exported but on no panel: {sorted(hub_families - used)}"


def test_the_front_counts_the_connections_it_holds_open(live_scrape):
    url, scrape = live_scrape
    host, port = url.removeprefix("http://").split(":")

    def open_connections(expected: float) -> float:
        deadline = time.monotonic() + 10
        while True:
            value = scrape_values(scrape())["bailing_front_connections"]
            if value == expected or time.monotonic() > deadline:
                return value
            time.sleep(0.1)

    # The scrape's own connection is one of them; idle ones stay open for the header timeout (10 s).
    assert open_connections(1) == 1
    idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(3)]
    try:
        assert open_connections(4) == 4
    finally:
        for sock in idle:
            sock.close()
    assert open_connections(1) == 1
