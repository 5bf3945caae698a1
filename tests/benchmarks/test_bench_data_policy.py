"""``bailing_bench_data_policy`` as short as it goes: both 16 KiB answers are built, every case runs,
the table and the JSON come out with findings in them. The figures are not asserted, only their shape."""

from __future__ import annotations

import io
import json
import random

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchmarks.management.commands.bailing_bench_data_policy import (
    ANSWER_BYTES,
    _compact_bytes,
    json_answer,
    text_answer,
)


def test_the_answers_are_16_kib_and_deterministic():
    for build in (json_answer, text_answer):
        first, second = build(random.Random(23)), build(random.Random(23))
        assert first == second
        assert ANSWER_BYTES - 1024 < _compact_bytes(first) <= ANSWER_BYTES


def test_every_case_runs_and_the_figures_are_written(tmp_path):
    out = io.StringIO()
    figures = tmp_path / "bench.json"
    call_command("bailing_bench_data_policy", iterations=3, warmup=1, json_path=str(figures), stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("data policy benchmark: 3 calls per case")
    runs = json.loads(figures.read_text())["runs"]
    assert [(run["answer"], run["policy"]) for run in runs] == [
        (answer, policy)
        for policy in ("all built-in, redact", "issue sample (block, flag, custom)", "no policy")
        for answer in ("json", "text")
    ]
    for run in runs[:2]:
        assert run["action"] == "redact"
        assert {"phone", "payment_card", "injection", "external_media"} <= set(run["findings"])
    assert all(run["findings"] == {} for run in runs[4:])
    assert all(run["p50_ms"] <= run["p95_ms"] <= run["p99_ms"] for run in runs)


def test_bad_options_are_refused():
    with pytest.raises(CommandError):
        call_command("bailing_bench_data_policy", iterations=0, stdout=io.StringIO())
