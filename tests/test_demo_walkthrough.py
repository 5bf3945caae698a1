"""The README's "Demo walk-through", run as written against the demo topology.

The shell blocks of that section are parsed here, so the test follows the text: every command is a
``python -m agent_client …`` line (or a ``NAME=…`` assignment, ``NAME=$(…)`` capturing one), run as
a real subprocess in order, with only the hub's address and the token file's place swapped for this
run's. The demo is the shipped one: a live hub (the front before gunicorn, ``tests/support/live_hub``)
on the test database, seeded by ``bailing_demo`` exactly as ``make demo`` seeds it, and the Demo
Shop process (``tests/support/demo_business``) it calls and notifies. Alice approves the sign-in on
the consent page in Chromium; the decisions the text asks for (**Approve** / **Deny** after a call
that waits) are made in the console in Chromium as ``manager``. Each command's trailing comment
states its outcome (``# executed``, ``# awaiting_approval``, ``# denied``, ``# run id``), and that is
what is asserted, plus what the text promises around it: one refund in the shop, the denied
cancellation never sent, the turn linked to its calls on the Conversations page.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path

import pytest
from django.conf import global_settings
from django.core.management import call_command
from django.urls import reverse

from agent_runtime.models import AgentRun, ToolInvocation
from bailing.management.commands.bailing_demo import DEMO_CLIENT_TOKEN, DEMO_TOOL_SECRET, _ensure_private_file
from tests.support.console import csp_violations
from tests.support.demo_business import running_demo_business
from tests.support.live_hub import live_hub

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# What the text names and this run replaces: the hub make demo serves, the token file it saves.
README_HUB = "http://127.0.0.1:8000"
README_TOKENS = "var/agent-tokens.json"
INTERPRETER = ".venv/bin/python"
STATES = (
    "executed",
    "awaiting_approval",
    "denied",
    "rejected_before_dispatch",
    "business_rejected",
    "reconciliation_required",
    "in_progress",
)
COMMAND_TIMEOUT = 120


# --- the text -----------------------------------------------------------------------------------------


@dataclass
class Step:
    """One logical shell line of the walk-through: its code, its trailing comment, and the prose that
    follows its block (where the text says what to decide before the next block)."""

    code: str
    comment: str
    after: str = ""


@dataclass
class Block:
    steps: list[Step] = field(default_factory=list)
    after: str = ""


def walkthrough_section() -> str:
    text = README.read_text(encoding="utf-8")
    assert "\n## Demo walk-through\n" in text, "the README lost its walk-through"
    return text.split("\n## Demo walk-through\n", 1)[1].split("\n## ", 1)[0]


def split_comment(line: str) -> tuple[str, str]:
    """``code  # comment`` → (code, comment); a ``#`` inside quotes is code."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip(), line[index + 1 :].strip()
    return line.rstrip(), ""


def walkthrough_blocks() -> list[Block]:
    section = walkthrough_section()
    parts = re.split(r"```sh\n(.*?)```", section, flags=re.S)
    # parts: prose, block, prose, block, …, prose
    blocks = []
    for index in range(1, len(parts), 2):
        block = Block(after=parts[index + 1])
        joined = re.sub(r"\\\n\s*", " ", parts[index])  # line continuations
        for line in joined.splitlines():
            if not line.strip():
                continue
            code, comment = split_comment(line)
            if code:
                block.steps.append(Step(code=code, comment=comment))
        blocks.append(block)
    assert len(blocks) >= 4, "the walk-through has lost its shell blocks"
    return blocks


def expand(code: str, variables: dict[str, str]) -> str:
    """``$NAME`` / ``${NAME}`` outside single quotes, as the shell would (unknown names fail)."""
    out, quote, index = [], None, 0
    while index < len(code):
        char = code[index]
        if quote == "'":
            quote = None if char == "'" else quote
        elif char == "'" and quote is None:
            quote = "'"
        elif char == '"':
            quote = None if quote == '"' else '"'
        elif char == "$" and code[index + 1 : index + 2] != "(":
            match = re.match(r"\$(?:\{(\w+)\}|(\w+))", code[index:])
            assert match, f"cannot expand {code[index:]!r}"
            name = match.group(1) or match.group(2)
            assert name in variables, f"${name} is used before the text sets it"
            out.append(variables[name])
            index += match.end()
            continue
        out.append(char)
        index += 1
    return "".join(out)


# --- running it ---------------------------------------------------------------------------------------


@dataclass
class Run:
    """The commands' surroundings: where the hub is, where the tokens go, the shell's variables."""

    hub: str
    tokens: Path
    variables: dict[str, str] = field(default_factory=dict)

    def argv(self, code: str) -> list[str]:
        words = shlex.split(expand(code, self.variables))
        assert words[:3] == [INTERPRETER, "-m", "agent_client"], f"not a reference-client command: {code}"
        swapped = [
            word.replace(README_HUB, self.hub).replace(README_TOKENS, str(self.tokens)) for word in words
        ]
        return [sys.executable, *swapped[1:]]

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.tokens.parent),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            # login opens the consent page with the webbrowser module: here the test is the browser.
            "BROWSER": "true",
        }

    def run(self, code: str) -> subprocess.CompletedProcess:
        completed = subprocess.run(
            self.argv(code),
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
        assert completed.returncode == 0, f"{code}\nstdout: {completed.stdout}\nstderr: {completed.stderr}"
        return completed


def printed_json(stdout: str) -> dict:
    """The JSON document a command printed after its ``--- label`` line."""
    start = stdout.index("{")
    document, _ = json.JSONDecoder().raw_decode(stdout[start:])
    return document


def expected_state(comment: str) -> str | None:
    words = re.findall(r"[a-z_]+", comment.lower())
    return next((word for word in words if word in STATES), None)


def sign_in(page, base: str, username: str, password: str, url: str) -> None:
    page.goto(base + url)
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()


def login_with_consent(run: Run, code: str, page, password: str) -> None:
    """The ``login`` line: the command waits on its loopback listener while alice approves in Chromium."""
    process = subprocess.Popen(
        run.argv(code), cwd=ROOT, env=run.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True)
    reader.start()
    try:
        url = None
        while url is None:
            line = lines.get(timeout=60)
            if line.strip().startswith("http") and "/console/consent/" in line:
                url = line.strip()
        # The hub hands out its public URL (make demo's); this run's hub has another port.
        page.goto(url.replace(README_HUB, run.hub))
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(re.compile(r".*/console/consent/.*"))
        page.get_by_role("button", name="Approve").click()
        page.wait_for_url(re.compile(r"http://127\.0\.0\.1:\d+/callback\?.*"))
        assert process.wait(timeout=60) == 0, process.stderr.read()
        reader.join(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()
    output = "".join(iter_queue(lines))
    assert "Tokens written to" in output, output
    assert run.tokens.exists()


def iter_queue(lines: queue.Queue[str]):
    while not lines.empty():
        yield lines.get_nowait()


def decide_in_console(page, base: str, approval_id: int, decision: str) -> None:
    """As ``manager``: the approval's page, its Approve… or Deny… link, then the confirmation page's
    own button ("Approve the call" / "Deny the call"), as the walk-through says."""
    page.goto(base + reverse("console:approval_detail", args=[approval_id]))
    verb = "Approve" if decision == "approved" else "Deny"
    page.get_by_role("link", name=f"{verb}…", exact=True).click()
    page.wait_for_load_state()
    page.get_by_role("button", name=f"{verb} the call", exact=True).click()
    page.wait_for_load_state()
    assert page.url.startswith(base + reverse("console:approval_detail", args=[approval_id]))


def decision_in(prose: str) -> str | None:
    """What the text asks the approver to do before the next block."""
    approve, deny = "**Approve**" in prose, "**Deny**" in prose
    assert not (approve and deny), "the text asks for both decisions at once"
    return "approved" if approve else "denied" if deny else None


# --- the test -----------------------------------------------------------------------------------------


@pytest.fixture
def demo(settings, tmp_path):
    """``make demo``'s topology on the test database: the Demo Shop, the hub (front + gunicorn), the
    demo seed applied against both; yields (hub URL, shop, the seed's banner)."""
    # The seed's passwords must be checked by the hub process, which hashes as shipped.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    tool_secret, _ = _ensure_private_file(DEMO_TOOL_SECRET, lambda: "walkthrough-" + uuid.uuid4().hex)
    client_token, _ = _ensure_private_file(DEMO_CLIENT_TOKEN, lambda: "walkthrough-" + uuid.uuid4().hex)
    with live_hub(tmp_path) as hub:
        env = {"DEMO_CLIENT_TOKEN": client_token, "DEMO_HUB_URL": hub}
        with running_demo_business(secret=tool_secret, extra_env=env) as shop:
            banner = StringIO()
            call_command("bailing_demo", "--shop-url", shop.base_url, "--public-url", hub, stdout=banner)
            assert re.search(r"Demo Shop tools: \d+ compiled", banner.getvalue()), banner.getvalue()
            assert "document(s) ready in demo-handbook" in banner.getvalue()
            yield hub, shop, banner.getvalue()


def test_the_readme_walkthrough_runs_as_written(demo, chromium, tmp_path, screenshot):
    hub, shop, banner = demo
    alice_password = banner.split("alice / ", 1)[1].split()[0]
    manager_password = banner.split("manager / ", 1)[1].split()[0]
    run = Run(hub=hub, tokens=tmp_path / "agent-tokens.json")
    alice = chromium.new_context(viewport={"width": 1280, "height": 860}).new_page()
    manager = chromium.new_context(viewport={"width": 1280, "height": 860}).new_page()
    violations = [csp_violations(page) for page in (alice, manager)]
    for page in (alice, manager):
        page.set_default_timeout(20_000)
    sign_in(manager, hub, "manager", manager_password, reverse("console:approval_list"))

    seen: dict[str, list[str]] = {}  # state → tools, as the commands answered
    calls: dict[str, dict] = {}  # invocation id → last result
    pending: list[dict] = []  # results that wait for a decision, oldest first
    run_id = None
    for block in walkthrough_blocks():
        for step in block.steps:
            assignment = re.fullmatch(r"([A-Z_][A-Z0-9_]*)=(.*)", step.code)
            if assignment:
                name, value = assignment.groups()
                inner = re.fullmatch(r"\$\((.*)\)", value)
                if inner:
                    run.variables[name] = run.run(inner.group(1)).stdout.strip()
                    if " turn " in inner.group(1):
                        assert "run id" in step.comment
                        run_id = run.variables[name]
                        assert AgentRun.objects.filter(run_id=uuid.UUID(run_id)).exists()
                else:
                    (run.variables[name],) = shlex.split(expand(value, run.variables))
                continue
            words = shlex.split(expand(step.code, run.variables))
            command = words[3]
            if command == "login":
                assert "approve in the browser as alice" in step.comment
                login_with_consent(run, step.code, alice, alice_password)
                continue
            completed = run.run(step.code)
            result = printed_json(completed.stdout)
            state = result["result"]["state"] if command == "receipt" else result["state"]
            assert state == expected_state(step.comment), f"{step.code}: {state}, text says {step.comment!r}"
            seen.setdefault(state, []).append(result.get("tool") or result["result"]["tool"])
            calls[result["invocation_id"]] = result
            if command == "invoke" and state == "awaiting_approval":
                pending.append(result)
                assert "Resume later with: " in completed.stdout and "FILE" not in completed.stdout
        decision = decision_in(block.after)
        if decision is not None:
            waiting = pending.pop(0)
            decide_in_console(manager, hub, waiting["approval_id"], decision)
    assert not pending, "a call waits for a decision the text never asks for"

    # What the text says around the commands.
    assert seen["awaiting_approval"] == ["request_refund", "cancel_order"]
    assert seen["denied"] == ["cancel_order"]
    records = shop.records()
    refunds = [r for r in records["refunds"] if r["order_id"] == "SO-1002"]
    assert [(r["amount"], r["requested_by"]) for r in refunds] == [(650, "alice")]  # once, however resumed
    assert next(o for o in records["orders"] if o["order_id"] == "SO-1005")["status"] == "processing"
    assert [t["order_id"] for t in records["tickets"]] == ["SO-1004"]
    linked = ToolInvocation.objects.filter(run_id=uuid.UUID(run_id)).values_list("tool", flat=True)
    assert sorted(linked) == ["cancel_order", "create_ticket", "list_orders", "request_refund"]

    # The Conversations page: the turn links to its calls.
    alice.goto(hub + reverse("console:conversation_list"))
    alice.locator("tbody tr").first.locator("a").first.click()
    turn = alice.locator("article.turn").first
    assert "My espresso machine arrived broken" in turn.inner_text()
    turn.get_by_role("link", name="4 calls").click()
    alice.wait_for_url(re.compile(r".*[?&]run=" + run_id))
    listed = alice.locator("tbody").inner_text()
    for tool in ("list_orders", "create_ticket", "request_refund", "cancel_order"):
        assert tool in listed
    screenshot(alice, "walkthrough-turn-calls")

    # The Demo Shop's page shows both console decisions as the hub holds them.
    shop_page = shop.client.get(shop.url("/approvals")).text
    assert "0 pending." in shop_page
    assert "Approved by manager in the hub console" in shop_page
    assert "Denied by manager in the hub console" in shop_page
    assert violations == [[], []]
