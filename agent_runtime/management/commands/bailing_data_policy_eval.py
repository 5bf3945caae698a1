"""Quality of the data policy's built-in detectors: ``manage.py bailing_data_policy_eval``.

Generates the labelled evaluation set (``agent_runtime.data_policy.evalset``: the same set for the
same ``--seed`` and sizes), with the demo knowledge base's documents among the negatives, runs every
built-in detector over it and prints, per detector, the planted values, recall, precision and the
false findings, then the false findings per 100 KB of negatives. The goals of issue 23 — recall of
at least 0.99 for the checksum-backed detectors, at most 1 false finding per 100 KB of negatives —
are checked last: a missed goal exits non-zero.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from agent_runtime.data_policy.evalset import (
    CHECKSUM_DETECTORS,
    FALSE_PER_100KB_GOAL,
    RECALL_GOAL,
    EvalReport,
    evaluate,
    evaluation_set,
)

DEMO_KNOWLEDGE = Path("examples") / "demo-knowledge"
DOCUMENT_SUFFIXES = (".md", ".txt")


def demo_documents(folder: Path) -> list[tuple[str, str]]:
    """(name, text) of every Markdown and text file of ``folder``."""
    if not folder.is_dir():
        raise CommandError(f"{folder}: not a directory")
    return [
        (path.name, path.read_text(encoding="utf-8"))
        for path in sorted(folder.iterdir())
        if path.suffix in DOCUMENT_SUFFIXES
    ]


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


class Command(BaseCommand):
    help = (
        "Measure the data policy's built-in detectors on a generated labelled set: precision and recall "
        "per detector, false findings per 100 KB of negatives; exits non-zero when a goal is missed."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--per-detector", type=int, default=300, help="positives generated per built-in detector"
        )
        parser.add_argument(
            "--negative-kib", type=int, default=512, help="KiB of generated negatives (look-alike text)"
        )
        parser.add_argument(
            "--seed", type=int, default=23, help="seed of the generator (same seed, same set)"
        )
        parser.add_argument(
            "--documents",
            type=Path,
            default=None,
            help="folder of .md/.txt documents added to the negatives (default: the demo knowledge base)",
        )
        parser.add_argument(
            "--show", type=int, default=0, help="print up to this many missed values and false findings"
        )
        parser.add_argument("--json", dest="json_path", default="", help="write the figures to this file")
        parser.add_argument(
            "--progress",
            action="store_true",
            help="draw the progress bar even when standard error is not a terminal (default: only on one)",
        )

    def handle(self, *args, **options):
        if options["per_detector"] < 1 or options["negative_kib"] < 0:
            raise CommandError("--per-detector must be positive and --negative-kib not negative")
        folder = options["documents"] or Path(settings.BASE_DIR) / DEMO_KNOWLEDGE
        documents = demo_documents(folder)
        samples = evaluation_set(
            per_detector=options["per_detector"],
            negative_kib=options["negative_kib"],
            seed=options["seed"],
            documents=documents,
        )
        self.stdout.write(
            f"data policy evaluation: {len(samples)} samples (seed {options['seed']}), "
            f"{len(documents)} documents from {folder}"
        )

        def progress(items):
            # On the real standard error (tqdm redraws in place), off a terminal only when asked.
            return tqdm(
                items,
                total=len(samples),
                unit="sample",
                file=sys.stderr,
                disable=False if options["progress"] else None,
            )

        report = evaluate(samples, progress=progress)
        self._report(report, options)

    def _report(self, report: EvalReport, options) -> None:
        out = self.stdout.write
        out("")
        out(
            f"{'detector':16} {'planted':>7} {'recall':>7} {'precision':>9} {'true':>6} {'false':>6} "
            f"{'in neg.':>7}"
        )
        for name, score in report.scores.items():
            out(
                f"{name:16} {score.planted:7d} {_ratio(score.recall):>7} {_ratio(score.precision):>9} "
                f"{score.true_findings:6d} {score.false_findings:6d} {report.negative_false.get(name, 0):7d}"
            )
        kb = report.negative_bytes / 1000
        total_false = sum(report.negative_false.values())
        out(
            f"negatives: {report.negative_samples} samples, {kb:.1f} KB, {total_false} false findings = "
            f"{report.false_per_100kb:.2f} per 100 KB (goal <= {FALSE_PER_100KB_GOAL:g})"
        )
        out(
            f"goal: recall >= {RECALL_GOAL} for {', '.join(CHECKSUM_DETECTORS)}; 'false' counts findings of "
            "a detector anywhere but its planted value"
        )
        shown = options["show"]
        if shown:
            for line in report.missed[:shown]:
                out(f"  missed {line}")
            for line in report.false_sources[:shown]:
                out(f"  false  {line}")
        if options["json_path"]:
            Path(options["json_path"]).write_text(
                json.dumps(
                    {
                        "seed": options["seed"],
                        "per_detector": options["per_detector"],
                        "negative_kib": options["negative_kib"],
                        "negative_bytes": report.negative_bytes,
                        "false_per_100kb": report.false_per_100kb,
                        "detectors": {
                            name: {
                                "planted": score.planted,
                                "recall": score.recall,
                                "precision": score.precision,
                                "true_findings": score.true_findings,
                                "false_findings": score.false_findings,
                                "false_in_negatives": report.negative_false.get(name, 0),
                            }
                            for name, score in report.scores.items()
                        },
                    },
                    indent=2,
                )
                + "\n"
            )
            out(f"figures written to {options['json_path']}")
        problems = report.goal_problems()
        if problems:
            for problem in problems:
                self.stderr.write(f"goal missed: {problem}")
            raise CommandError("the data policy misses its quality goals")
        out("goals met")
