"""``bailing_bench`` end to end, as short as it goes: one round of one second on the bare endpoint
(the fixtures, the in-process checks, the served gunicorn, the load generator, the CPU accounting, the
JSON result and the PNG plot, before/after against itself), on this test session's database. Every
process the command starts is stopped when it returns. The figures are not asserted, only their shape."""

from __future__ import annotations

import json
import os
import struct

import pytest
from django.core.management import call_command

from benchmarks.harness import free_port, process_table
from benchmarks.management.commands.bailing_bench import BENCH_QUERIES, RESULT_SCHEMA


def _children() -> set[int]:
    return {stat.pid for stat in process_table().values() if stat.ppid == os.getpid()}


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _short_round(tmp_path, name: str, **options):
    """One round of one second on the bare endpoint, one worker of two threads; the JSON and the
    plot's paths."""
    result_path, plot_path = tmp_path / f"{name}.json", tmp_path / f"{name}.png"
    call_command(
        "bailing_bench",
        only=["bare"],
        rounds=1,
        duration=1,
        warmup=0,
        connections=2,
        workers=1,
        threads=2,
        json=result_path,
        plot=plot_path,
        **options,
    )
    return result_path, plot_path


@pytest.mark.django_db(transaction=True)
def test_one_short_round_on_the_bare_endpoint_writes_the_json_and_the_plot(tmp_path, capsys):
    before = _children()
    result_path, plot_path = _short_round(tmp_path, "bench", port=free_port())
    assert _children() <= before  # gunicorn (and anything else it started) is gone

    result = json.loads(result_path.read_text())
    assert result["schema"] == RESULT_SCHEMA
    assert result["options"]["rounds"] == 1 and result["options"]["only"] == ["bare"]
    assert result["server"]["max_requests"] == 0 and result["server"]["debug"] is False
    assert result["server"]["workers"] == 1 and result["server"]["threads"] == 2
    assert result["git"]["commit"] and result["machine"]["cpus"] >= 1
    assert result["queries"]["distinct_texts"] == len(BENCH_QUERIES) >= 50
    (bare,) = result["endpoints"]
    assert bare["key"] == "bare" and bare["sql"] is None
    assert [run["position"] for run in bare["rounds"]] == ["start", "end"]
    for run in bare["rounds"]:
        assert run["round"] == 1 and run["requests"] > 0 and run["errors"] == 0
        assert run["cpu_ticks"] is not None and run["cpu_ticks_postgres"] is not None
        assert run["p50_ms"] <= run["p99_ms"]
    # The ratios of the bare runs are against their own mean: the median of two is exactly 1.
    assert bare["median"]["ratio"] == pytest.approx(1.0)
    assert "bare DRF endpoint" in capsys.readouterr().out

    assert min(_png_size(plot_path)) > 100
    after_path = tmp_path / "after.png"
    from benchmarks.harness import plot_ratios

    plot_ratios(after_path, result, baseline=result)
    assert min(_png_size(after_path)) > 100


@pytest.mark.django_db
def test_bad_options_are_refused_before_anything_starts(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("bailing_bench", rounds=0)
    bad = tmp_path / "old.json"
    bad.write_text('{"schema": "something else"}')
    with pytest.raises(CommandError):
        call_command("bailing_bench", baseline=bad)


@pytest.mark.django_db(transaction=True)
def test_the_front_suite_compares_both_topologies_and_holds_idle_connections(tmp_path):
    """``--suite front`` on the bare endpoint: gunicorn alone and the front before gunicorn, both
    measured in the round, the front's own CPU counted, idle connections held and all still open."""
    from benchmarks.front import FRONT_SCHEMA

    before = _children()
    result_path, plot_path = _short_round(tmp_path, "front", suite="front", idle=40)
    assert _children() <= before  # both hubs (and the front's gunicorn) are gone

    result = json.loads(result_path.read_text())
    assert result["schema"] == FRONT_SCHEMA
    (bare,) = result["endpoints"]
    assert bare["key"] == "bare" and bare["goal"] == 0.9
    assert {run["topology"] for run in result["runs"]} == {"direct", "front"}
    for run in result["runs"]:
        assert run["requests"] > 0 and run["errors"] == 0
        assert (run["cpu_ticks_front"] is not None) == (run["topology"] == "front")
    assert bare["front_over_direct_rps"] > 0
    idle = result["idle"]
    assert idle["connections"] == 40 and idle["still_open"] == 40
    assert idle["front_rss_kib_held"] > 0 and idle["bare_under_idle"]["errors"] == 0
    assert _png_size(plot_path)[0] > 0
