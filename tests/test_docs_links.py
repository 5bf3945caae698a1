"""The README and docs/ hold together: every relative link resolves to a file that exists (and its
``#anchor`` to a heading of that file, slugged as GitHub slugs them), the README's "Where to read on"
indexes every file of docs/ (docs/benchmarks/README.md every file of its folder), and both layout
trees (the README's short one, docs/architecture.md "Layout") name exactly the repository's
top-level entries."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+).+?\1", re.DOTALL)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _tracked(*patterns: str) -> list[str]:
    return subprocess.run(
        ["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()


def _markdown_files() -> list[Path]:
    return [ROOT / name for name in _tracked("README.md", "docs/*.md") if (ROOT / name).is_file()]


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans, where brackets are not links."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercased, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in _FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for target in _LINK.findall(_prose(path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: … are not files of ours
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(root)}: {target}"
        if not linked.exists() or root not in (linked, *linked.parents):
            broken.append(f"{where} (no such file)")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{where} (no such heading)")
    return broken


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _linked_targets(path: Path, text: str) -> set[Path]:
    targets = [t for t in _LINK.findall(_prose(text)) if "://" not in t]
    return {(path.parent / t.partition("#")[0]).resolve() for t in targets}


def _tree_entries(section: str) -> set[str]:
    """The top-level names of a layout tree: the names that start a line, before its description."""
    tree = section.split("```\n", 1)[1].split("```", 1)[0]
    names = set()
    for line in tree.splitlines():
        if line[:1].strip():  # not indented: a top-level line, not a sub-entry or a wrapped line
            for name in re.split(r"\s{2,}", line, maxsplit=1)[0].split():
                names.add(name.strip("`").split("/", 1)[0])
    return names


def _top_level_entries() -> set[str]:
    # What `ls` shows of the repository, plus the two dot-entries a newcomer needs (CI, settings).
    names = {name.split("/", 1)[0] for name in _tracked()}
    return {name for name in names if not name.startswith(".")} | {".ci", ".env.example"}


def test_slug_follows_github():
    assert slug("Slow clients (measured; `bailing_chaos --scenario slow-clients`)") == (
        "slow-clients-measured-bailing_chaos---scenario-slow-clients"
    )
    assert slug("The reference client's token file") == "the-reference-clients-token-file"
    assert slug("Libraries, and why") == "libraries-and-why"


def test_the_checker_finds_a_broken_link_and_a_broken_anchor(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\n## Real heading\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#real-heading) [gone](missing.md) [bad](a.md#nope) [self](#b) `[code](x.md)`\n\n"
        "# B\n\n```\n[fenced](y.md)\n```\n[web](https://example.com/x.md)\n",
        encoding="utf-8",
    )
    assert broken_links(page, root=tmp_path) == [
        "b.md: missing.md (no such file)",
        "b.md: a.md#nope (no such heading)",
    ]


def test_every_relative_link_resolves():
    files = _markdown_files()
    assert ROOT / "README.md" in files and len(files) > 10
    assert [broken for path in files for broken in broken_links(path)] == []


def test_the_readme_indexes_every_docs_file():
    readme = ROOT / "README.md"
    indexed = _linked_targets(readme, _section(readme.read_text(encoding="utf-8"), "Where to read on"))
    docs = {ROOT / name for name in _tracked("docs/*.md") if "/" not in name.removeprefix("docs/")}
    assert sorted(p.name for p in docs - indexed) == []
    assert ROOT / "docs" / "benchmarks" / "README.md" in indexed

    bench_index = ROOT / "docs" / "benchmarks" / "README.md"
    listed = _linked_targets(bench_index, bench_index.read_text(encoding="utf-8"))
    measured = {ROOT / name for name in _tracked("docs/benchmarks/*.md")} - {bench_index}
    assert sorted(p.name for p in measured - listed) == []


def test_both_layout_trees_name_the_top_level_entries():
    expected = _top_level_entries()
    assert {"bailing", "agent_runtime", "knowledge", "mcp_server", "approvals", "front", "docs"} <= expected
    for path in (ROOT / "README.md", ROOT / "docs" / "architecture.md"):
        assert _tree_entries(_section(path.read_text(encoding="utf-8"), "Layout")) == expected, path.name
