"""Hand-written run directories in the documented format (docs/ARCHITECTURE.md, "Run directory").

Used by the report tests for what real runs rarely contain: step text with HTML and LaTeX,
string ids with "/", a run without trees, an unfinished run without summary.json.
``tests/test_report_support.py`` checks the writer against the documented schema, so the fixture
cannot drift from the format the runner writes. ``runner_runs`` makes real run directories instead, through the real
``eval`` CLI with scripted engines.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from tests.helpers.scripted import problems

RESULT_KEYS = ("id", "question", "answer", "prediction", "correct", "generated_tokens", "prm_calls",
               "judge_calls", "expanded", "pruned", "seconds", "path", "error", "algo", "seed", "pruner")
NODE_KEYS = ("id", "parent", "depth", "text", "prior", "value", "visits", "tokens", "terminal",
             "on_path", "merged_into", "judge_prob")
NASTY = "Let $x<y$ & </script><b>bold</b> \\frac{1}{2}"


def _node(i: int, parent: int | None, depth: int, text: str, **kw: Any) -> dict[str, Any]:
    node = dict(id=i, parent=parent, depth=depth, text=text, prior=kw.pop("prior", 0.5), value=kw.pop("value", 0.5),
                visits=kw.pop("visits", 1), tokens=kw.pop("tokens", 10), terminal=kw.pop("terminal", False),
                on_path=kw.pop("on_path", False), merged_into=kw.pop("merged_into", None),
                judge_prob=kw.pop("judge_prob", None))
    assert not kw, kw
    return node


def tree_nodes(pruned: bool) -> list[dict[str, Any]]:
    """Root, three first steps (two merged into the first when ``pruned``), and a second level."""
    nodes = [_node(0, None, 0, "", on_path=True, prior=1.0, value=None, visits=8, tokens=0)]
    nodes.append(_node(1, 0, 1, "Step 1: x = 2 + 3 = 5.", on_path=True, value=0.9, visits=5, tokens=12))
    nodes.append(_node(2, 0, 1, "Step 1: 2 + 3 = 5, so x = 5.", value=0.85, visits=0 if pruned else 2, tokens=14,
                       merged_into=1 if pruned else None, judge_prob=0.93 if pruned else None))
    nodes.append(_node(3, 0, 1, NASTY, value=0.4, visits=0 if pruned else 1, tokens=20,
                       merged_into=1 if pruned else None, judge_prob=0.81 if pruned else None))
    nodes.append(_node(4, 1, 2, "Step 2: so the answer is 5. # Answer 5", on_path=True, terminal=True, value=0.95, tokens=9))
    nodes.append(_node(5, 1, 2, "Step 2: double it: 10.", value=0.2, tokens=7, terminal=True))
    if not pruned:
        nodes.append(_node(6, 2, 2, "Step 2: the answer is 5.", value=0.9, tokens=8, terminal=True))
    return nodes


def write_run(root: Path, *, pruned: bool, trees: bool = True, summary: bool = True,
              ids: tuple[Any, ...] = ("test/algebra/1.json", "test/algebra/2.json", 7),
              tokens: tuple[int, ...] = (300, 120, 80), algo: str = "mcts") -> Path:
    """A finished (or, with ``summary=False``, unfinished) run directory."""
    root.mkdir(parents=True, exist_ok=True)
    pruner = "model" if pruned else None
    (root / "config.yaml").write_text(f"algo: {algo}\npruner: {pruner or 'null'}\nseed: 0\n")
    records = []
    for i, (pid, tok) in enumerate(zip(ids, tokens)):
        records.append(dict(
            id=pid, question=f"What is 2 + 3? ({pid})", answer="5", prediction="5" if i != 1 else "6",
            correct=i != 1, generated_tokens=tok // (2 if pruned else 1), prm_calls=4, judge_calls=3 if pruned else 0,
            expanded=2, pruned=2 if pruned else 0, seconds=0.1, path=["Step 1: x = 5.", "# Answer 5"], error=None,
            algo=algo, seed=0, pruner=pruner))
    with (root / "results.jsonl").open("w") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")
    if summary:
        n = len(records)
        (root / "summary.json").write_text(json.dumps(dict(
            accuracy=sum(r["correct"] for r in records) / n, mean_generated_tokens=sum(r["generated_tokens"] for r in records) / n,
            problems=n, errors=0, pruned_per_expansion=1.0 if pruned else 0.0, algo=algo, pruner=pruner,
            mean_prm_calls=4.0, mean_judge_calls=3.0 if pruned else 0.0, seconds=0.3)))
    if trees:
        (root / "trees").mkdir(exist_ok=True)
        for k, rec in enumerate(records):
            tree = {key: rec[key] for key in ("id", "question", "answer", "prediction", "correct", "algo")}
            tree["nodes"] = tree_nodes(pruned)
            (root / "trees" / f"{k}.json").write_text(json.dumps(tree))
    return root


def runner_runs(root: Path, algos: tuple[str, ...] = ("mcts",), *, trees: bool = True, n: int = 4) -> list[Path]:
    """Real run directories from the real ``search_cli.py eval`` (jsonargparse, data loading, the
    runner, config.yaml), driven by the search tests' scripted engines through its
    ``engine_factory`` seam (deterministic, no model): for each algorithm an unpruned baseline and
    a run whose judge merges restated steps. Returns [algo_base, algo_pruned, ...]."""
    from equiv.search.cli import eval_main
    from tests.helpers.scripted import scripted_factory

    root.mkdir(parents=True, exist_ok=True)
    data = root / "problems.jsonl"
    data.write_text("".join(json.dumps({"question": p.question, "answer": p.answer}) + "\n" for p in problems(n)))
    out = []
    for algo in algos:
        for pruned in (False, True):
            path = root / f"{algo}_{'pruned' if pruned else 'base'}"
            args = [
                "--algo", algo, "--out", str(path),
                "--data.dataset", "jsonl", "--data.path", str(data),
                "--data.question_field", "question", "--data.answer_field", "answer",
                "--policy.model", "scripted", "--reward.model", "scripted",
                "--pruner.strategy", "formula" if pruned else "none",
                "--search.width", "4", "--search.max_depth", "4", "--search.num_simulations", "4",
                "--search.beam_size", "2", "--search.num_sequence", "2",
                "--run.save_trees", "true" if trees else "false", "--run.progress", "false", "--run.concurrency", "2",
            ]
            assert eval_main(args, engine_factory=scripted_factory) == 0, f"eval failed for {path}"
            out.append(path)
    return out


# -- the real eval CLI on scripted engines ---------------------------------------------------------
def write_problems(path: Path, n: int, *, fail: tuple[int, ...] = ()) -> Path:
    """The scripted problems as a JSONL file (``fail``: problems whose policy call raises)."""
    with path.open("w") as f:
        for p in problems(n, fail=fail):
            f.write(json.dumps({"question": p.question, "answer": p.answer}) + "\n")
    return path


def base_args(tmp_path: Path, n: int = 4, **kw: Any) -> list[str]:
    """``eval`` arguments for an SBS run of ``n`` scripted problems into ``tmp_path/run`` (pass
    ``engine_factory=scripted_factory``)."""
    data = write_problems(tmp_path / "problems.jsonl", n, **kw)
    return [
        "--algo", "sbs", "--out", str(tmp_path / "run"),
        "--data.dataset", "jsonl", "--data.path", str(data),
        "--data.question_field", "question", "--data.answer_field", "answer",
        "--policy.model", "scripted", "--reward.model", "scripted",
        "--search.width", "4", "--run.progress", "false", "--run.concurrency", "2",
    ]


def sigint_at_default() -> None:
    """``preexec_fn`` for a command a test interrupts with SIGINT: the signal at its default, as a
    shell runs a command in the foreground. A suite started in the background by a
    non-interactive shell (``... &``, as some CI runners do) inherits SIGINT *ignored*; Python
    keeps it ignored, and the run would finish untouched."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def read_records(out: Path) -> list[dict]:
    """The records of a run directory's results.jsonl, in file order."""
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def refused(args: list[str], capsys: Any) -> str:
    """The one stderr line of an eval run (scripted engines) that must be refused with exit 2."""
    import pytest

    from equiv.search.cli import eval_main
    from tests.helpers.scripted import scripted_factory

    with pytest.raises(SystemExit) as exc:
        eval_main(args, engine_factory=scripted_factory)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]
