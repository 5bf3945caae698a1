"""``bailing_soak``: the 60-second version of the soak, once, against the shipped topology on a
dedicated embedded PostgreSQL (the front and gunicorn, a knowledge worker, the Demo Shop behind the
reset proxy, the database supervisor), with one of each fault.

What it must show, from its JSON: every kind of the workload answered, every fault recorded with its
recovery, no 5xx outside the fault windows (and only 503 inside the database outage), no write lost or
duplicated between the hub's journal and the shop's records, figures in every bucket, a PNG, and
nothing it started still running afterwards, the dedicated server and its directory included.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from bailing.db import embedded
from chaos.soak import FAULTS, KINDS, SCHEMA, pid_running


def test_the_60_second_soak_loses_nothing_and_leaves_nothing_running(tmp_path):
    figures_file, plot_file = tmp_path / "soak.json", tmp_path / "soak.png"
    out = io.StringIO()
    call_command("bailing_soak", seconds=60, json=str(figures_file), plot=str(plot_file), stdout=out)
    text = out.getvalue()
    figures = json.loads(figures_file.read_text())

    assert figures["schema"] == SCHEMA
    assert figures["options"]["bucket_seconds"] == 10
    assert figures["machine"]["cpus"] >= 1
    assert len(figures["buckets"]) == 6
    for kind in KINDS:
        assert figures["totals"]["by_kind"][kind] > 0, (kind, text)
    for bucket in figures["buckets"]:
        assert bucket["requests"] > 0
        assert set(bucket["kinds"]) == set(KINDS)
        roles = bucket["rss_kib"]
        for role in ("front", "gunicorn_master", "gunicorn_worker", "knowledge_worker", "shop", "postmaster"):
            assert roles[role] > 0, (role, bucket)
        assert bucket["pss_kib_total"] > 0
        assert bucket["hub_connections"] is not None

    # One of each fault, each with a window that ends in a recovery.
    assert sorted(fault["fault"] for fault in figures["faults"]) == sorted(FAULTS)
    for fault in figures["faults"]:
        assert fault["recovered"] is True, (fault, text)
        assert fault["recovered_s"] >= fault["start_s"]
    restart = next(fault for fault in figures["faults"] if fault["fault"] == "db-restart")
    assert restart["statuses_inside"].get("503", 0) > 0  # the outage was felt, and answered 503

    verdict = figures["verdict"]
    outside = verdict["no_5xx_outside_faults"]
    assert outside["5xx_outside"] == 0 and outside["no_answer_outside"] == 0, (
        figures["outside_faults_failures"],
        text,
    )
    assert outside["inside_db_restart_5xx_not_503"] == 0
    assert sum(bucket["5xx_outside_faults"] for bucket in figures["buckets"]) == 0

    writes = figures["writes"]
    assert writes["journal_writes"] > 0  # approved writes did run
    assert writes["lost"] == 0 and writes["duplicated"] == 0, (writes, text)
    assert writes["business_only_unflagged"] == 0
    assert verdict["journal_equals_business"]["pass"] is True
    assert figures["totals"]["approver"].get("303", 0) > 0  # decided on the shop's page, as a person does
    for goal in ("rss_growth", "p99_last_vs_second"):  # judged, whatever the verdict on this machine
        assert isinstance(verdict[goal]["pass"], bool)

    assert plot_file.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Every process it started is gone, the dedicated server and its directory too.
    started = [pid for pids in figures["processes"].values() for pid in pids]
    assert {"front", "gunicorn_master", "gunicorn_worker", "knowledge_worker", "shop", "supervisor"} <= set(
        figures["processes"]
    )
    assert figures["processes_alive_after"] == []
    assert not [pid for pid in started if pid_running(pid)]
    pgdata = Path(figures["pgdata"])
    assert not embedded.embedded_server_running(pgdata)
    assert not pgdata.parent.exists()


@pytest.mark.parametrize(
    "options",
    [{"faults": "db-restart,flood"}, {"seconds": 5}, {"threads": 0}],
)
def test_bad_options_are_refused_before_anything_starts(options):
    with pytest.raises(CommandError):
        call_command("bailing_soak", stdout=io.StringIO(), **options)


def test_it_refuses_any_server_but_a_fresh_dedicated_one(settings):
    with pytest.raises(CommandError):
        call_command(
            "bailing_soak",
            seconds=60,
            dedicated_server=str(Path(settings.BASE_DIR) / "var" / "pg"),
            stdout=io.StringIO(),
        )
