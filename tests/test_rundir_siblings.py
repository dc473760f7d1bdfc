"""``search_cli.py siblings``: sibling step pairs of saved trees, as pairs to label."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.data.records import problem_key, read_pair_records
from equiv.errors import InputError
from equiv.rundir.siblings import sibling_pairs, tree_sibling_pairs
from equiv.rundir.trees import read_tree
from tests.helpers.cli import search_cli
from tests.helpers.runs import runner_runs


def _tree(path: Path, nodes: list[tuple[int, int | None, int, str]], *, pid: str = "gsm8k-train-5",
          question: str = "Ann has 3 apples and buys 4 more. How many now?") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "id": pid, "seed": 0, "question": question, "answer": "7", "prediction": "7", "correct": True, "algo": "mcts",
        "nodes": [{"id": i, "parent": p, "depth": d, "text": t} for i, p, d, t in nodes],
    }))
    return path


def test_pairs_are_siblings_in_generation_order_with_their_prefix(tmp_path):
    tree = read_tree(_tree(tmp_path / "run" / "trees" / "t.json", [
        (0, None, 0, ""),
        (1, 0, 1, "Ann has 3 + 4 = 7 apples."),
        (2, 0, 1, "Ann has 3 + 5 = 8 apples."),          # a one-number edit: kept (ratio > 0.5)
        (3, 0, 1, "Ann  has 3 + 4 = 7 apples."),         # whitespace duplicate of 1: no new pair
        (4, 0, 1, "The answer is seven."),                # unlike the others: below the prefilter
        (5, 1, 2, "So she has 7 apples."),
        (6, 1, 2, "So she has 7 apples now."),
        (7, 2, 2, "So she has 7 apples."),                # a cousin of 5, not a sibling: never paired
    ]))
    pairs = tree_sibling_pairs(tree, prefilter=0.5)
    got = {(p["sentence1"], p["sentence2"]) for p in pairs}
    assert got == {("Ann has 3 + 4 = 7 apples.", "Ann has 3 + 5 = 8 apples."),
                   ("So she has 7 apples.", "So she has 7 apples now.")}
    deeper = next(p for p in pairs if p["sentence1"] == "So she has 7 apples.")
    assert deeper["prefix"] == ["Ann has 3 + 4 = 7 apples."]
    assert deeper["reasoning_step"] == 2 and deeper["problem"] == "gsm8k-train-5"
    assert all("result" not in p for p in pairs)


def test_the_same_two_texts_count_once_per_problem(tmp_path):
    tree = read_tree(_tree(tmp_path / "t.json", [
        (0, None, 0, ""), (1, 0, 1, "x = 2 + 3 = 5"), (2, 0, 1, "x = 2 + 3 = 6"),
        (3, 1, 2, "x = 2 + 3 = 5"), (4, 1, 2, "x = 2 + 3 = 6"),
    ]))
    assert len(tree_sibling_pairs(tree)) == 1


def test_cli_writes_a_pair_file_the_project_reads_once_labelled(tmp_path):
    base, pruned = runner_runs(tmp_path / "runs", n=3)
    out = tmp_path / "siblings.jsonl"
    result = search_cli("siblings", base, pruned, "--out", out, "--prefilter", "0.3")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary["pairs"] == len(rows) > 0
    assert "trees" in result.stderr and "pairs written" in result.stderr
    # two runs of the same problems: every id is unique, tagged with its run's directory name
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["id"].split(":", 1)[0] for r in rows} == {Path(base).name, Path(pruned).name}
    assert all(r["id"].split(":", 1)[1].startswith(r["problem"]) for r in rows)
    alone = search_cli("siblings", base, "--out", tmp_path / "alone.jsonl", "--prefilter", "0.3")
    assert alone.returncode == 0 and ":" not in json.loads((tmp_path / "alone.jsonl").read_text().splitlines()[0])["id"]
    # ids group by problem, as cross-validation by problem needs
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps({**r, "result": 0}) + "\n" for r in rows))
    records, _ = read_pair_records(labelled)
    assert {problem_key(r) for r in records} == {r["problem"] for r in rows}


def test_a_held_out_question_is_refused_naming_the_problem(tmp_path):
    _tree(tmp_path / "run" / "trees" / "t.json", [(0, None, 0, ""), (1, 0, 1, "a b c"), (2, 0, 1, "a b d")])
    holdout = tmp_path / "test.jsonl"
    holdout.write_text(json.dumps({"question": "Other?"}) + "\n"
                       + json.dumps({"question": "Ann has 3 apples and  buys 4 more. How many now?"}) + "\n")
    result = search_cli("siblings", tmp_path / "run", "--out", tmp_path / "o.jsonl", "--holdout", holdout)
    assert result.returncode == 2
    assert "gsm8k-train-5" in result.stderr and "test.jsonl:2" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.jsonl").exists()


def test_bad_inputs_get_one_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for argv, needle in [
        ((run, "--out", tmp_path / "o.jsonl"), "--run.save_trees"),
        ((tmp_path / "nope", "--out", tmp_path / "o.jsonl"), "no such directory"),
        ((run, "--out", tmp_path / "o.jsonl", "--holdout", tmp_path / "missing.jsonl"), "no such file"),
    ]:
        result = search_cli("siblings", *argv)
        assert result.returncode == 2 and needle in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert sibling_pairs  # imported API stays public


def _bounded_cli(*argv: object, seconds: int = 120) -> subprocess.CompletedProcess[str]:
    """``python search_cli.py ARGV`` in a real process, with its memory capped (2 GiB of address
    space) and its time bounded, so a reader that walks a loop for ever fails the test instead of
    filling the machine (issue #53, item 6: 5.7 GB in 150 s)."""
    import resource

    from tests.helpers.paths import REPO_ROOT

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    try:
        return subprocess.run([sys.executable, str(REPO_ROOT / "search_cli.py"), *map(str, argv)], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=seconds, preexec_fn=cap)
    except subprocess.TimeoutExpired:
        pytest.fail(f"search_cli.py {argv[0]} did not end in {seconds} s (walking a loop of links?)")


def _break_links(tree_file: Path, how: str) -> str:
    """Rewrite a saved tree so its links loop; returns the field the refusal must name."""
    data = json.loads(tree_file.read_text())
    nodes = data["nodes"]
    if how == "cycle":  # the case: the root hangs under the last node
        nodes[0]["parent"] = nodes[-1]["id"]
    elif how == "own_parent":
        nodes[-1]["parent"] = nodes[-1]["id"]
    elif how == "unknown_parent":
        nodes[-1]["parent"] = 10_000
    elif how == "merged_loop":  # a child merged into a sibling that is merged back into it
        kids = [n for n in nodes if n["parent"] == nodes[0]["id"]]
        kids[0]["merged_into"], kids[1]["merged_into"] = kids[1]["id"], kids[0]["id"]
    tree_file.write_text(json.dumps(data))
    return "merged_into" if how == "merged_loop" else "parent"


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory) -> Path:
    """A real run directory with saved trees (the eval CLI on scripted engines), copied by each test."""
    return runner_runs(tmp_path_factory.mktemp("runs"), n=1)[0]


@pytest.mark.parametrize(("how", "real"), [
    ("cycle", "siblings"), ("own_parent", None), ("unknown_parent", None), ("merged_loop", "report"),
])
def test_every_reader_of_a_tree_file_refuses_looping_links_in_one_line(tmp_path, saved_run, how, real):
    """A tree file whose links loop or dangle is refused by its one loader (read_tree), so every
    reader -- siblings, report -- ends at once with one line naming the file and the field. For one
    broken link of each field (``parent``, ``merged_into``) both readers run: one in a real,
    memory-capped process (``siblings`` for the parent loop, ``report`` for the merge loop, so each
    reader meets a loop in a real process), the other in this process (the same main); every kind
    of break is checked on the loader they share."""
    import shutil

    run = Path(shutil.copytree(saved_run, tmp_path / "run"))
    tree_file = sorted((run / "trees").glob("*.json"))[0]
    field = _break_links(tree_file, how)
    with pytest.raises(InputError, match=f"field '{field}'"):
        read_tree(tree_file)
    if not real:
        return
    argvs = {"siblings": ("siblings", run, "--out", tmp_path / "pairs.jsonl", "--prefilter", "0.3"),
             "report": ("report", run, "--out", tmp_path / "report")}
    for name, argv in argvs.items():
        result = _bounded_cli(*argv) if name == real else search_cli(*argv)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, (name, result.stderr[-2000:])
        assert str(tree_file) in lines[0] and f"field '{field}'" in lines[0], lines[0]
    assert not (tmp_path / "pairs.jsonl").exists() and not (tmp_path / "report" / "index.html").exists()


def test_a_loop_check_is_linear_in_the_tree_size(tmp_path):
    """A long chain (a deep DFS) is read without recursion and in one pass; a loop at its far end
    is still found. (Four times the interpreter's recursion limit: deep enough that a recursive
    walk fails, 20 000 nodes proved no more and cost half a second.)"""
    depth = 4 * sys.getrecursionlimit()
    nodes = [(0, None, 0, "")] + [(i, i - 1, i, f"step {i}") for i in range(1, depth)]
    assert len(read_tree(_tree(tmp_path / "chain.json", nodes)).nodes) == depth
    looped = [(0, depth - 1, 0, "")] + nodes[1:]
    with pytest.raises(InputError, match="cycle of parent links"):
        read_tree(_tree(tmp_path / "looped.json", looped))


@pytest.mark.parametrize("name", ["gsm8k_train_siblings_gemma270m.jsonl", "gsm8k_train_siblings_gemma270m_heldout.jsonl"])
def test_the_shipped_labelled_siblings_are_train_problems_and_read_as_pairs(name):
    """benchmarks/data: the sibling sets, labelled against RUBRIC.md; each must read as pairs with
    its reader and hold no GSM8K test problem."""
    from tests.helpers.paths import SHARED_DATA

    shipped = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / name
    records, _ = read_pair_records(shipped)
    assert records and all(r.extra["problem"].startswith("gsm8k-train-") for r in records)
    assert all(r.extra.get("reader") for r in records)
    test_file = SHARED_DATA / "gsm8k" / "test.jsonl"
    if not test_file.is_file():
        pytest.skip(f"needs {test_file} (the shared data)")
    held = {" ".join(json.loads(line)["question"].split()) for line in test_file.read_text().splitlines() if line}
    assert not {" ".join(r.extra["question"].split()) for r in records} & held


def test_the_held_out_siblings_share_no_problem_with_the_recipes():
    """The recipe trains on the first sibling set, never on the held-out one: no problem in both,
    and the recipe does not list the held-out file."""
    data = Path(__file__).resolve().parents[1] / "benchmarks" / "data"
    trained, _ = read_pair_records(data / "gsm8k_train_siblings_gemma270m.jsonl")
    held_out, _ = read_pair_records(data / "gsm8k_train_siblings_gemma270m_heldout.jsonl")
    assert not {r.extra["problem"] for r in trained} & {r.extra["problem"] for r in held_out}
    import yaml

    recipe = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / "gsm8k_equiv.yaml").read_text())
    files = [recipe["data"]["train"], *recipe["data"]["train_more"]]
    assert "benchmarks/data/gsm8k_train_siblings_gemma270m.jsonl" in files
    assert not any("heldout" in f for f in files)


def test_the_recipe_trains_on_no_sealed_problem():
    """Issue 65: the sealed files are scored once per adopted change and never trained on: the recipe
    lists none of them, and no problem of a sealed file appears in any file it trains on."""
    import yaml

    root = Path(__file__).resolve().parents[1]
    recipe = yaml.safe_load((root / "configs" / "gsm8k_equiv.yaml").read_text())
    files = [recipe["data"]["train"], *recipe["data"]["train_more"]]
    assert not any("sealed" in f for f in files)
    sealed = {r.extra["problem"] for path in sorted((root / "benchmarks" / "data" / "sealed").glob("*.jsonl"))
              for r in read_pair_records(path)[0] if "problem" in r.extra}
    assert sealed, "the sealed files carry their problems"
    for f in files:
        if f.startswith("benchmarks/"):
            trained = {r.extra.get("problem") for r in read_pair_records(root / f)[0]}
            assert not trained & sealed, f
