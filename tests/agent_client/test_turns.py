"""The reference client's ``turn`` command and the calls made in a turn (``invoke --run``), its
``new-id``, and the ``resume`` command ``invoke`` prints, pasted as it is. Against a live hub (real
HTTP) whose workspace calls the Demo Shop process."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from agent_client import ReferenceAgentClient, main
from agent_runtime.models import AgentConversation, AgentRun, ToolInvocation
from tests.support.demo_business import running_demo_business
from tests.support.invocations import agent, provider_for, workspace

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "shop"


@pytest.fixture(scope="module")
def shop():
    with running_demo_business() as business:
        yield business


@pytest.fixture
def token_file(live_server, shop, tmp_path):
    """A token file (as ``login --save`` writes one) of alice's session in a Demo Shop workspace."""
    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=["create_ticket", "cancel_order"])
    session = agent(route_key=ROUTE)
    path = tmp_path / "my tokens.json"  # a space: the printed commands must quote it
    path.write_text(
        json.dumps(
            {"hub": live_server.url, "client_app_id": session.client.app_id, "access_token": session._access}
        )
    )
    return path


def test_turn_prints_the_run_id_on_stdout_and_what_was_frozen_on_stderr(token_file, capsys):
    code = main(
        [
            "turn",
            "--tokens",
            str(token_file),
            "--workspace",
            ROUTE,
            "--conversation",
            "conv-1",
            "Where is SO-1002?",
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    run_id = captured.out.strip()
    run = AgentRun.objects.select_related("conversation").get(run_id=run_id)
    assert (run.conversation.client_conversation_id, run.user_input) == ("conv-1", "Where is SO-1002?")
    assert run.client_turn_id.startswith("cli-turn-") and run.user_message_id.startswith("cli-msg-")
    assert f"Turn ready: run {run_id}, conversation conv-1, turn {run.client_turn_id}" in captured.err
    assert "list_orders" in captured.err
    assert f"--workspace {ROUTE} --run {run_id} TOOL" in captured.err
    assert f"--tokens '{token_file}'" in captured.err

    # The same conversation id continues the conversation; --json prints the frozen context.
    again = main(
        [
            "turn",
            "--tokens",
            str(token_file),
            "--workspace",
            ROUTE,
            "--conversation",
            "conv-1",
            "--json",
            "And SO-1001?",
        ]
    )
    assert again == 0
    context = json.loads(capsys.readouterr().out)
    assert context["schema_version"] == "bailing.agent-turn-context.v1" and context["run_id"] != run_id
    assert AgentConversation.objects.get(client_conversation_id="conv-1").runs.count() == 2


def test_calls_made_with_run_are_linked_to_the_turn(token_file, capsys):
    assert main(["turn", "--tokens", str(token_file), "--workspace", ROUTE, "Open a ticket"]) == 0
    run_id = capsys.readouterr().out.strip()
    for tool, arguments in (
        ("list_orders", "{}"),
        ("create_ticket", '{"subject": "Mat", "message": "Smells of glue", "order_id": "SO-1004"}'),
    ):
        assert (
            main(
                [
                    "invoke",
                    "--tokens",
                    str(token_file),
                    "--workspace",
                    ROUTE,
                    "--run",
                    run_id,
                    tool,
                    arguments,
                ]
            )
            == 0
        )
        assert '"state": "executed"' in capsys.readouterr().out
    assert main(["invoke", "--tokens", str(token_file), "--workspace", ROUTE, "list_orders"]) == 0
    capsys.readouterr()
    linked = ToolInvocation.objects.filter(run_id=run_id).order_by("id").values_list("tool", flat=True)
    assert list(linked) == ["list_orders", "create_ticket"]
    assert ToolInvocation.objects.filter(run__isnull=True).count() == 1  # the call without --run


def test_the_printed_resume_command_works_pasted_as_it_is(token_file, capsys, monkeypatch):
    assert main(["new-id"]) == 0
    invocation_id = capsys.readouterr().out.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", invocation_id)
    argv = ["invoke", "--tokens", str(token_file), "--workspace", ROUTE, "--id", invocation_id]
    assert main([*argv, "cancel_order", '{"order_id": "SO-1005", "reason": "Ordered twice"}']) == 0
    out = capsys.readouterr().out
    assert '"state": "awaiting_approval"' in out
    printed = next(line for line in out.splitlines() if line.startswith("Resume later with: "))
    command = shlex.split(printed.removeprefix("Resume later with: "))
    assert command[1:3] == ["-m", "agent_client"]
    assert command[3:] == ["resume", "--tokens", str(token_file), "--workspace", ROUTE, invocation_id]
    assert "FILE" not in printed
    assert main(command[3:]) == 0
    assert '"state": "awaiting_approval"' in capsys.readouterr().out  # nobody decided yet
    assert main(["receipt", "--tokens", str(token_file), "--workspace", ROUTE, invocation_id]) == 0
    assert '"dispatch_state": "not_dispatched"' in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        [
            "invoke",
            "--tokens",
            "t.json",
            "--workspace",
            ROUTE,
            "--run",
            "list_orders",
            "{}",
        ],  # $RUN was empty
        ["invoke", "--tokens", "t.json", "--workspace", ROUTE, "--id", "ABC", "list_orders"],
        ["resume", "--tokens", "t.json", "not-an-id"],
        ["turn", "--tokens", "t.json", "--workspace", ROUTE, "--conversation", "has space", "hi"],
    ],
)
def test_malformed_ids_are_usage_errors_before_anything_is_sent(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "not a" in err or "ids are" in err


def test_the_library_turn_refuses_an_unknown_schema(live_server, token_file, monkeypatch):
    saved = json.loads(token_file.read_text())
    client = ReferenceAgentClient(saved["hub"], saved["client_app_id"], [ROUTE])
    client.access_token = saved["access_token"]
    try:
        context = client.turn(ROUTE, "hello", conversation_id="c-1", turn_id="t-1", message_id="m-1")
        assert context["schema_version"] == "bailing.agent-turn-context.v1"
        monkeypatch.setattr(client, "_authed", lambda *a, **k: {"schema_version": "other"})
        with pytest.raises(AssertionError):
            client.turn(ROUTE, "hello", conversation_id="c-1", turn_id="t-1", message_id="m-1")
    finally:
        client.close()
