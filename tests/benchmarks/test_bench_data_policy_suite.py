"""``bailing_bench --suite data-policy`` as short as it goes: one round of one second per variant (the
Demo Shop, both workspaces of each endpoint, the served gunicorn, the JSON result and the plot), on
this test session's database. The figures are not asserted, only their shape and that the policy-on
variants really ran under the policy."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from benchmarks.harness import free_port
from benchmarks.management.commands.bailing_bench import (
    DATA_POLICY_ALL,
    POLICY_GOAL,
    POLICY_SCHEMA,
    Command,
)
from tests.benchmarks.test_bench_command import _children, _png_size


@pytest.mark.django_db(transaction=True)
def test_one_short_round_of_each_variant_writes_the_ratio_json_and_plot(tmp_path, capsys):
    before = _children()
    result_path, plot_path = tmp_path / "policy.json", tmp_path / "policy.png"
    call_command(
        "bailing_bench",
        suite="data-policy",
        rounds=1,
        duration=1,
        warmup=1,  # a cold first request (the embedding model loading) is no figure and may outlast 1 s
        connections=2,
        workers=1,
        threads=2,
        port=free_port(),
        json=result_path,
        plot=plot_path,
    )
    assert _children() <= before  # gunicorn and the Demo Shop are gone

    result = json.loads(result_path.read_text())
    assert result["schema"] == POLICY_SCHEMA and result["data_policy"] == DATA_POLICY_ALL
    assert result["invocations_not_executed"] == 0
    variants = {item["key"]: item for item in result["variants"]}
    assert set(variants) == {
        "bare",
        "tool_invocation.off",
        "tool_invocation.on",
        "knowledge_search.off",
        "knowledge_search.on",
    }
    for key, item in variants.items():
        assert item["errors"] == 0 and len(item["rounds"]) == (2 if key == "bare" else 1)
        assert all(
            run["requests"] > 0 and run["p50_ms"] <= run["p95_ms"] <= run["p99_ms"] for run in item["rounds"]
        )
    # The policy-on invocation read SO-1007's notes and redacted them; the policy-off one did not.
    seen = variants["tool_invocation.on"]["data_policy_in_process"]
    assert seen["action"] == "redact"
    assert {"email", "payment_card", "injection", "external_media"} <= set(seen["findings"])
    assert variants["tool_invocation.off"]["data_policy_in_process"] is None
    assert variants["knowledge_search.off"]["data_policy_in_process"] is None

    assert [item["key"] for item in result["endpoints"]] == ["tool_invocation", "knowledge_search"]
    for item in result["endpoints"]:
        assert item["goal"] == POLICY_GOAL and len(item["ratios"]) == 1
        assert item["ratio"] == pytest.approx(item["on"]["rps"] / item["off"]["rps"])
    out = capsys.readouterr().out
    assert "on ÷ off req/s" in out and "policy on" in out
    assert min(_png_size(plot_path)) > 100


def test_the_variants_of_an_endpoint_run_back_to_back_and_take_turns_going_first():
    targets = [
        SimpleNamespace(key=key)
        for key in (
            "tool_invocation.off",
            "tool_invocation.on",
            "knowledge_search.off",
            "knowledge_search.on",
        )
    ]
    order_of = Command._policy_order(targets)
    rounds = [[target.key for target in order_of(number)] for number in range(4)]
    assert rounds == [
        ["tool_invocation.off", "tool_invocation.on", "knowledge_search.off", "knowledge_search.on"],
        ["tool_invocation.on", "tool_invocation.off", "knowledge_search.on", "knowledge_search.off"],
        ["knowledge_search.off", "knowledge_search.on", "tool_invocation.off", "tool_invocation.on"],
        ["knowledge_search.on", "knowledge_search.off", "tool_invocation.on", "tool_invocation.off"],
    ]


@pytest.mark.django_db
def test_the_suite_refuses_bad_options_before_anything_starts(tmp_path):
    with pytest.raises(CommandError):
        call_command("bailing_bench", suite="data-policy", rounds=0)
    with pytest.raises(CommandError):
        call_command("bailing_bench", suite="data-policy", baseline=tmp_path / "old.json")
    with pytest.raises(CommandError):
        call_command("bailing_bench", "--suite", "nonsense")
