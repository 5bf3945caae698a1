"""``bailing_chaos``: the db-restart scenario against a real hub (gunicorn, the demo's supervisor, a
dedicated embedded PostgreSQL it stops and kills), and the slow-clients hand-off.

The db-restart run is the no-lost-no-duplicated-turns property across real restarts: turns submitted
while the database is down answer 503 and, retried with the same idempotency ids after recovery,
exist exactly once; turns created before the outage are all still there; nothing answers 500.
"""

from __future__ import annotations

import io
import json
import re
import sys
import types
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from bailing.db import embedded


def test_db_restart_loses_and_duplicates_no_turn(tmp_path):
    out = io.StringIO()
    figures_file = tmp_path / "figures.json"
    call_command(
        "bailing_chaos",
        scenario="db-restart",
        json=str(figures_file),
        writers=3,
        readers=1,
        warmup=1.0,
        settle=1.0,
        timeout=240.0,
        stdout=out,
    )
    text = out.getvalue()
    figures = json.loads(figures_file.read_text())
    assert figures["ok"] is True, text

    requests = figures["requests"]
    assert requests["500"] == 0 and requests["other"] == 0, text
    assert requests["200"] > 0 and requests["503"] > 0
    assert set(requests["by_status"]) == {"200", "503"}

    assert [outage["kind"] for outage in figures["outages"]] == ["fast", "crash"]
    for outage in figures["outages"]:
        assert outage["recovered"] is True
        assert outage["answered_503"] > 0 and outage["answered_other"] == 0
        # Back within seconds of the stop (the supervisor looks every 0.5 s); bounded for slow machines.
        assert outage["server_back_after_seconds"] < 10
        assert outage["first_200_after_restart_seconds"] < 10

    turns = figures["turns"]
    assert turns["lost"] == 0 and turns["duplicated"] == 0, turns
    assert turns["unconfirmed"] == 0 and turns["run_id_mismatches"] == 0
    assert turns["messages_lost"] == 0 and turns["messages_duplicated"] == 0
    assert turns["rows"] == turns["sent"]
    assert turns["retried_after_503"] > 0  # turns really were caught by an outage and retried
    assert turns["confirmed_before_first_outage"] > 0
    assert turns["before_first_outage_present"] == turns["confirmed_before_first_outage"]

    log = figures["hub_log"]
    assert log["tracebacks"] == 0
    # One outage line per failed request, paired by request id: each 503 a client saw has exactly
    # one, no other answer has any (a probe from outside the stream is counted apart).
    assert log["stream_outage_lines"] == requests["503"], text
    assert log["answers_503_without_line"] == 0 and log["lines_for_other_answers"] == 0
    assert log["requests_logged_twice"] == 0
    assert len(figures["supervisor_restarts_seconds"]) == 2

    # The dedicated server and its directory are gone; the shared one was never touched.
    pgdata = Path(re.search(r"dedicated embedded PostgreSQL on (\S+)", text).group(1))
    assert not pgdata.parent.exists()
    assert not embedded.embedded_server_running(pgdata)
    assert "requests answered:" in text and "lost 0, duplicated 0" in text


def test_the_scenario_refuses_any_server_but_a_fresh_dedicated_one():
    with pytest.raises(CommandError):
        call_command(
            "bailing_chaos",
            scenario="db-restart",
            dedicated_server=str(Path(settings.BASE_DIR) / "var" / "pg"),
            stdout=io.StringIO(),
        )


def test_unknown_outages_are_refused():
    with pytest.raises(CommandError):
        call_command("bailing_chaos", scenario="db-restart", outages="fast,flood", stdout=io.StringIO())


def test_slow_clients_without_its_module_says_so_and_exits_2(monkeypatch):
    monkeypatch.setitem(sys.modules, "chaos.slow_clients", None)  # import fails as if absent
    with pytest.raises(CommandError) as caught:
        call_command("bailing_chaos", scenario="slow-clients", stdout=io.StringIO())
    assert caught.value.returncode == 2


def test_slow_clients_runs_the_module_and_writes_its_figures(monkeypatch, tmp_path):
    calls = []

    def run(*, stdout, connections=200, seconds=20.0, **options):
        calls.append((connections, seconds))
        stdout.write("slow clients: running")
        return {"connections": connections, "answers": {"200": 7}}

    module = types.ModuleType("chaos.slow_clients")
    module.run = run
    monkeypatch.setitem(sys.modules, "chaos.slow_clients", module)
    out = io.StringIO()
    figures_file = tmp_path / "slow.json"
    call_command(
        "bailing_chaos",
        scenario="slow-clients",
        connections=5,
        seconds=1.5,
        json=str(figures_file),
        stdout=out,
    )
    assert calls == [(5, 1.5)]
    assert "answers.200: 7" in out.getvalue()
    assert json.loads(figures_file.read_text()) == {"connections": 5, "answers": {"200": 7}}
