"""``equiv adapt``: a judge's threshold and statement floor set for a policy's labelled siblings.

The command is run as a user runs it, ``equiv adapt``, on small labelled files with a tiny judge:
through the dispatcher's own ``main`` in this process by default (the code ``python -m equiv``
reaches; a fresh interpreter pays the torch imports, seconds here), in a real ``python -m equiv
adapt`` process for the refusal of a bad file, and for the whole run in the slow suite. The choice itself (most recall at the named precision, the floor a
candidate like the threshold, cross-validation by problem) is also checked on synthetic
probabilities, where the right answer is known.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.commands import main as equiv_main
from equiv.judge.policy import DecisionPolicy
from equiv.prune.adapt import ADAPTED_KEY, Candidates, Pairs, adapt_main, cross_validate
from tests.helpers.cli import invoke
from tests.helpers.judges import SETTINGS, make_tiny_judge
from tests.helpers.paths import REPO_ROOT

STATEMENTS = ("We need to find how many apples she has left.", "Let's work out the apples she has left.")
"""Two steps that compute nothing (plans): what the statement floor reads."""


REAL_PROCESS = pytest.param("python -m equiv", marks=pytest.mark.slow)


def equiv_adapt(how: str, *argv: object):
    """``equiv adapt ARGV``: in this process (the dispatcher's ``main``), or as a real process."""
    if how == "in_process":
        return invoke(equiv_main, ["adapt", *argv])
    return run_adapt(*argv)


def run_adapt(*argv: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m equiv adapt ARGV`` in a real process."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "equiv", "adapt", *map(str, argv)], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=timeout, env=env)


def pair(problem: str, a: str, b: str, result: int) -> dict[str, object]:
    return {"problem": problem, "question": "", "sentence1": a, "sentence2": b, "result": result}


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def identical_rows(wrong_every: int = 0, identical: int = 4) -> list[dict[str, object]]:
    """Six problems; in each, ``identical`` pairs that differ only in formatting (merged free,
    ``identical``) and pairs that differ. Every ``wrong_every``-th identical pair is labelled not
    equivalent."""
    rows, k = [], 0
    for p in range(6):
        for i in range(identical):
            k += 1
            wrong = bool(wrong_every) and k % wrong_every == 0
            rows.append(pair(f"p{p}", f"She has {p + i} apples.", f"she has {p + i} apples", 0 if wrong else 4))
        rows.append(pair(f"p{p}", f"He pays {p} * 3 = {3 * p} dollars.", f"He earns {p} + 4 dollars.", 0))
        rows.append(pair(f"p{p}", f"The total is {p} + 2.", f"Add 2 to {p} to get the total.", 3))
    return rows


@pytest.fixture(scope="module")
def only_rules_judge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny judge whose prefilter (ratio <= 1) keeps every pair from the model: only the
    same-step shortcut merges, so what it merges is known without the random model."""
    return make_tiny_judge(tmp_path_factory.mktemp("judge") / "rules", settings={**SETTINGS, "prefilter_threshold": 1.0})


@pytest.fixture(scope="module")
def tiny_judge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_judge(tmp_path_factory.mktemp("judge") / "tiny")


@pytest.mark.parametrize("how", ["in_process", REAL_PROCESS])
def test_adapt_writes_a_new_export_with_the_chosen_policy_and_its_provenance(only_rules_judge: Path,
                                                                               tmp_path: Path, how: str) -> None:
    """In this process by default; the real ``python -m equiv adapt`` process runs it in the slow
    suite (the default suite's real process is the missing-field refusal below)."""
    data = write(tmp_path / "siblings.jsonl", identical_rows())
    before = (only_rules_judge / "config.json").read_text()
    out = tmp_path / "adapted"
    done = equiv_adapt(how, "--model", only_rules_judge, "--data", data, "--precision", 0.9, "--out", out)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "cross-valid." in done.stdout and "written" in done.stdout
    cv = result["cross_validation"]
    assert cv["precision"] >= 0.9 and cv["n"] == 36 and cv["problems"] == 6
    assert cv["tp"] == 24 and cv["fp"] == 0 and cv["precision_lower"] == pytest.approx(24 / 25)  # Wilson, z 1
    assert "lower bound" in done.stdout
    assert {"precision_spread", "recall_spread", "false_merge_rate_spread", "recall_fold_spread"} <= set(cv)
    assert (only_rules_judge / "config.json").read_text() == before  # the judge itself is never changed

    from equiv.prune.model_judge import ModelJudge

    judge = ModelJudge(out)  # the new export loads like any judge
    assert judge.policy == DecisionPolicy.from_dict(result["policy"])
    settings = json.loads((out / "config.json").read_text())["equiv"]
    provenance = settings[ADAPTED_KEY]
    assert provenance["data"] == str(data.resolve()) and len(provenance["data_sha256"]) == 64
    assert provenance["pairs"] == 36 and provenance["problems"] == 6 and provenance["precision_asked"] == 0.9
    assert provenance["cross_validation"]["precision"] == cv["precision"]
    assert provenance["cross_validation"]["precision_lower"] == cv["precision_lower"]
    assert provenance["command"].startswith("equiv adapt --model") and provenance["equiv_version"]
    assert provenance["date"].startswith("20") and provenance["source_policy"]["prefilter"] == 1.0
    # the policy it stores decides the pairs as the command said: pairs with the adapted judge
    from equiv.prune.cli import pairs_main

    scored = invoke(pairs_main, ["--data", data, "--strategy", "model", "--model", out, "--json"])
    assert scored.returncode == 0, scored.stderr[-2000:]
    figures = json.loads(scored.stdout.strip().splitlines()[-1])
    assert figures["precision"] == result["on_all_pairs"]["precision"]
    assert figures["recall"] == result["on_all_pairs"]["recall"]

    again = equiv_adapt(how, "--model", only_rules_judge, "--data", data, "--precision", 0.9, "--out", out)
    lines = again.stderr.strip().splitlines()
    assert again.returncode == 2 and len(lines) == 1 and "exists and is not empty" in lines[0], again.stderr


def test_adapt_refuses_a_precision_the_data_cannot_reach_and_writes_nothing(only_rules_judge: Path,
                                                                            tmp_path: Path) -> None:
    data = write(tmp_path / "siblings.jsonl", identical_rows(wrong_every=3))  # the free merges: precision 2/3
    out = tmp_path / "adapted"
    done = equiv_adapt("in_process", "--model", only_rules_judge, "--data", data, "--precision", 0.9, "--out", out)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("error: no threshold and floor reaches precision 0.9") and "nothing written" in lines[0]
    assert not out.exists()


def test_a_scoring_judge_meets_the_precision_on_its_cross_validation_or_refuses(tiny_judge: Path,
                                                                              tmp_path: Path) -> None:
    """With a model that scores pairs (a random tiny one), whatever it chooses: either the
    cross-validated precision it reports reaches the one asked and the export is written, or it
    refuses and nothing is."""
    rows = identical_rows() + [pair(f"p{p}", STATEMENTS[0], STATEMENTS[1], 3 if p % 2 else 0) for p in range(6)]
    data = write(tmp_path / "siblings.jsonl", rows)
    out = tmp_path / "adapted"
    done = equiv_adapt("in_process", "--model", tiny_judge, "--data", data, "--precision", 0.9, "--out", out, "--json")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if done.returncode == 0:
        assert result["cross_validation"]["precision_lower"] >= 0.9 and (out / "config.json").is_file()
    else:  # a refusal is honest: no setting qualified at all, or its cross-validated bound fell short
        assert done.returncode == 1 and not out.exists() and "nothing written" in done.stderr
        cross_validated = result.get("cross_validation")
        assert cross_validated is None or cross_validated["precision_lower"] < 0.9, result


def test_a_perfect_cross_validation_from_a_handful_of_merges_is_refused(only_rules_judge: Path,
                                                                       tmp_path: Path) -> None:
    """Two free right merges a problem (of three equivalent pairs): on all 12 the bound (12/13 at
    z 1) reaches 0.9, but folds whose training part holds too few merges choose nothing, and the
    held-out merges -- every one right, a point precision of 1.0 -- are too few for their bound to
    reach 0.9 (gemma's 8 of 8: 0.889). Refused as the choice would be; with ``--z 0`` (the point
    estimates) the same data is written."""
    data = write(tmp_path / "siblings.jsonl", identical_rows(identical=2))
    out = tmp_path / "adapted"
    done = equiv_adapt("in_process", "--model", only_rules_judge, "--data", data, "--precision", 0.9, "--out", out,
                       "--json")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr[-3000:]
    cv = json.loads(done.stdout.strip().splitlines()[-1])["cross_validation"]
    assert cv["precision"] == 1.0 and cv["fp"] == 0 and 0 < cv["tp"] < 12 and cv["precision_lower"] < 0.9, cv
    assert f"{cv['tp']} of {cv['tp']} held-out merges are right" in lines[0]
    assert f"lower bound at z 1 is {cv['precision_lower']:.3f}" in lines[0] and "from 18 equivalent pairs" in lines[0]
    assert "nothing written: label more pairs, in particular more equivalent ones" in lines[0]
    assert not out.exists()

    point = equiv_adapt("in_process", "--model", only_rules_judge, "--data", data, "--precision", 0.9, "--out", out,
                        "--z", 0, "--json")
    assert point.returncode == 0, point.stderr[-3000:]
    cv = json.loads(point.stdout.strip().splitlines()[-1])["cross_validation"]
    assert cv["precision"] == cv["precision_lower"] == 1.0 and (out / "config.json").is_file()


@pytest.mark.parametrize("row, field", [
    ({"sentence1": "a", "sentence2": "b", "result": 4}, "problem"),
    ({"problem": "p1", "sentence1": "a", "sentence2": "b"}, "result"),
    ({"problem": "p1", "sentence1": "a", "sentence2": "b", "result": 2}, "result"),
    ({"problem": "p1", "sentence1": "a", "sentence2": "b", "result": 7}, "result"),
])
def test_a_bad_line_is_one_line_naming_file_line_and_field(only_rules_judge: Path, tmp_path: Path,
                                                           row: dict[str, object], field: str) -> None:
    data = write(tmp_path / "siblings.jsonl", [*identical_rows()[:3], row])
    done = invoke(adapt_main, ["--model", only_rules_judge, "--data", data, "--precision", 0.9,
                               "--out", tmp_path / "out"])
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {data}:4: field '{field}'"), lines[0]
    assert not (tmp_path / "out").exists()


def test_the_real_cli_names_the_missing_problem_field(only_rules_judge: Path, tmp_path: Path) -> None:
    """The default suite's real ``python -m equiv adapt`` process: a user's bad file is refused there."""
    data = write(tmp_path / "siblings.jsonl", [{"sentence1": "a", "sentence2": "b", "result": 4}])
    done = run_adapt("--model", only_rules_judge, "--data", data, "--precision", 0.9, "--out", tmp_path / "o")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (f"error: {data}:1: field 'problem': missing or empty: adapt deals whole problems "
                                   "into its cross-validation folds and takes each pair's problem from this field "
                                   "only (siblings writes it)")


def test_level_2_pairs_are_dropped_only_when_asked(only_rules_judge: Path, tmp_path: Path) -> None:
    data = write(tmp_path / "siblings.jsonl", [*identical_rows(), pair("p0", "x is 1", "y is 2", 2)])
    done = invoke(adapt_main, ["--model", only_rules_judge, "--data", data, "--precision", 0.9,
                               "--out", tmp_path / "out", "--drop_unmapped", "--json"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["dropped_unmapped"] == 1


@pytest.mark.parametrize("where", ["judge", "inside", "file", "data"])
def test_out_is_refused_where_it_would_overwrite_something(only_rules_judge: Path, tmp_path: Path,
                                                           where: str) -> None:
    data = write(tmp_path / "siblings.jsonl", identical_rows())
    out = {"judge": only_rules_judge, "inside": only_rules_judge / "adapted", "file": data, "data": data}[where]
    if where == "file":
        out = tmp_path / "note.txt"
        out.write_text("mine")
    done = invoke(adapt_main, ["--model", only_rules_judge, "--data", data, "--precision", 0.9, "--out", out])
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "out" in lines[0], done.stderr
    assert not (only_rules_judge / "adapted").exists()


def test_an_empty_out_folder_is_used(only_rules_judge: Path, tmp_path: Path) -> None:
    data = write(tmp_path / "siblings.jsonl", identical_rows())
    out = tmp_path / "made"
    out.mkdir()
    done = invoke(adapt_main, ["--model", only_rules_judge, "--data", data, "--precision", 0.9, "--out", out])
    assert done.returncode == 0, done.stderr
    assert (out / "config.json").is_file() and not [p for p in tmp_path.iterdir() if p.name.startswith(".made.")]


def synthetic(statement_equivalent: bool) -> tuple[list[tuple[str, str]], list[float], Pairs]:
    """Eight problems of scored pairs: computations the model ranks right (0.7 equivalent, 0.3
    not), and plans (statements) it scores 0.8 whatever they are: only a floor can keep those
    apart without losing the computations."""
    pairs, probs, labels, problems = [], [], [], []
    for p in range(8):
        for i in range(3):
            pairs.append((f"Then {p} + {i} = {p + i} apples.", f"So {p} plus {i} makes {p + i} apples in all."))
            probs.append(0.7)
            labels.append(1)
            pairs.append((f"Then {p} * {i} = {p * i} apples.", f"So {p} minus {i} leaves {p - i} pears."))
            probs.append(0.3)
            labels.append(0)
        pairs.append((f"First we find how many apples box {p} holds.", f"We start with the pears of crate {p}."))
        probs.append(0.8)
        labels.append(1 if statement_equivalent else 0)
    problems = [f"p{k // 7}" for k in range(len(pairs))]
    return pairs, probs, Pairs(pairs, labels, [""] * len(pairs), problems, 0)


def test_the_floor_is_chosen_when_the_plans_differ_and_left_off_when_they_agree() -> None:
    policy = DecisionPolicy(threshold=0.5, prefilter=None, same_step="off")
    floors = (0.0, 0.85)
    pairs, probs, data = synthetic(statement_equivalent=False)
    chosen = Candidates(policy, pairs, probs, data.questions, floors).choose(range(len(pairs)), data.labels, 0.95)
    assert chosen is not None and chosen.floor == 0.85 and chosen.recall == 1.0 and chosen.threshold <= 0.7
    pairs, probs, data = synthetic(statement_equivalent=True)
    chosen = Candidates(policy, pairs, probs, data.questions, floors).choose(range(len(pairs)), data.labels, 0.95)
    assert chosen is not None and chosen.floor == 0.0 and chosen.recall == 1.0


def test_the_precision_is_asked_of_its_lower_bound() -> None:
    """19 right merges of 19 reach 0.95 as a point estimate but not as a bound one standard error
    below it (19/20); 24 of 24 do (24/25)."""
    from equiv.prune.adapt import wilson_lower

    assert wilson_lower(19, 19, 0.0) == 1.0 and wilson_lower(19, 19, 1.0) == pytest.approx(0.95)
    assert wilson_lower(24, 24, 1.0) == pytest.approx(0.96) and wilson_lower(0, 0, 1.0) == 0.0
    policy = DecisionPolicy(threshold=0.5, prefilter=None, same_step="off")
    pairs, probs, data = synthetic(statement_equivalent=False)
    few = [i for i, p in enumerate(data.problems) if p in ("p0", "p1", "p2")]  # 9 right merges at best
    candidates = Candidates(policy, pairs, probs, data.questions, (0.0, 0.85))
    assert candidates.choose(few, data.labels, 0.95, z=1.0) is None
    assert candidates.choose(few, data.labels, 0.95, z=0.0) is not None


def test_cross_validation_holds_whole_problems_out() -> None:
    policy = DecisionPolicy(threshold=0.5, prefilter=None, same_step="off")
    pairs, probs, data = synthetic(statement_equivalent=False)
    cv = cross_validate(Candidates(policy, pairs, probs, data.questions, (0.0, 0.85)), data, 0.9, folds=4, seed=0)
    assert cv["n"] == len(pairs) and cv["problems"] == 8 and cv["precision"] == 1.0
    assert sum(f["pairs"] for f in cv["per_fold"]) == len(pairs)
    for fold in cv["per_fold"]:  # a problem's pairs are all in one fold
        assert fold["problems"] * 7 == fold["pairs"]

