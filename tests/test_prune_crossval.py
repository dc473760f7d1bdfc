"""k-fold cross-validation by problem (``python -m equiv.prune.crossval``) and its table."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from equiv.data.records import PairRecord, problem_key
from equiv.errors import InputError
from equiv.judge.calibrate import calibration_summary
from equiv.judge.decide import verdict_from_json
from equiv.judge.members import score_judge_dir
from equiv.judge.tiny import build_tiny_longformer
from equiv.prune.crossval import assign_folds, fit_command, main
from equiv.prune.yardstick import (format_ranking, format_table, per_fold, policies, pooled_table, ranking_table,
                                   split_by_source, vetoed, yardstick_table)

REPO = Path(__file__).resolve().parents[1]


def _record(pid: int, k: int, result: int = 4) -> PairRecord:
    return PairRecord("a", "b", result, extra={"id": f"toy-{pid}-{k}"})


def test_folds_keep_problems_whole_and_do_not_depend_on_order():
    records = [_record(p, k) for p in range(40) for k in range(3)]
    folds = assign_folds(records, 4, seed=0)
    by_problem: dict[str, set[int]] = {}
    for r, f in zip(records, folds):
        by_problem.setdefault(problem_key(r), set()).add(f)
    assert all(len(fs) == 1 for fs in by_problem.values()) and set(folds) == {0, 1, 2, 3}
    shuffled = records[::-1]
    again = dict(zip((problem_key(r) for r in shuffled), assign_folds(shuffled, 4, seed=0)))
    assert all(again[problem_key(r)] == f for r, f in zip(records, folds))
    assert assign_folds(records, 4, seed=1) != folds  # the salt changes the deal
    with pytest.raises(InputError, match="fewer folds"):
        assign_folds(records[:3], 2)


def test_the_fit_command_is_the_recipe_on_the_folds_training_part(tmp_path):
    cmd = fit_command(Path("r.yaml"), [Path("o.yaml")], tmp_path / "train.jsonl", tmp_path / "fold0", ["--trainer.max_epochs=2"])
    assert cmd[1].endswith("trainer_cli.py") and cmd[2] == "fit"
    assert cmd[3:7] == ["--config", "r.yaml", "--config", "o.yaml"]
    assert f"--data.train={tmp_path / 'train.jsonl'}" in cmd and "--data.train_more=[]" in cmd
    assert cmd[-1] == "--trainer.max_epochs=2"


def _rows(fold: int, part: str, probs_labels: list[tuple[float, int]]) -> list[dict]:
    return [{"fold": fold, "part": part, "label": y, "prob": p, "threshold": 0.5, "raw_prob": p, "raw_threshold": 0.5,
             "sentence1": f"x is {i}", "sentence2": f"x makes {i}", "question": ""} for i, (p, y) in enumerate(probs_labels)]


def test_the_table_scores_each_fold_and_repicks_only_on_calibration_rows():
    rows = (_rows(0, "test", [(0.9, 1), (0.7, 0), (0.2, 0)]) + _rows(1, "test", [(0.95, 1), (0.6, 1), (0.1, 0)])
            + _rows(0, "calibration", [(0.9, 1), (0.8, 0), (0.85, 1)]) + _rows(1, "calibration", [(0.6, 1), (0.3, 0)]))
    judge = per_fold(rows, policies()["judge"])
    assert [f["fp"] for f in judge] == [1, 0] and [f["tp"] for f in judge] == [1, 2]
    assert judge[0]["false_merge_rate"] == 0.5
    # fold 0's calibration rows have their best F1 above 0.8: the 0.7 false merge goes
    repicked = per_fold(rows, policies()["judge@f1"])
    assert repicked[0]["fp"] == 0
    table = yardstick_table(rows)
    assert table["judge"]["folds"] == 2 and table["judge"]["fp"] == 1
    assert "judge+guard@f1" in table and "formula" in format_table(table)
    # without calibration rows the re-picked policies are left out, not silently scored
    assert "judge@f1" not in yardstick_table([r for r in rows if r["part"] == "test"])


def test_the_pooled_table_decides_each_fold_apart_and_spreads_by_problem():
    """Pooled over folds, each fold's threshold re-picked on its own calibration rows; the spread
    is a bootstrap over whole problems: nil when every problem scores alike, not when one problem
    holds all the false merges."""
    rows = (_rows(0, "test", [(0.9, 1), (0.7, 0), (0.2, 0)]) + _rows(1, "test", [(0.95, 1), (0.6, 1), (0.1, 0)])
            + _rows(0, "calibration", [(0.9, 1), (0.8, 0), (0.85, 1)]) + _rows(1, "calibration", [(0.6, 1), (0.3, 0)]))
    for r in rows:
        r["problem"] = f"p{r['fold']}" if r["part"] == "test" else "cal"
    table = pooled_table(rows)
    assert table["judge"]["problems"] == 2
    assert (table["judge"]["tp"], table["judge"]["fp"]) == (3, 1) and table["judge"]["precision"] == 0.75
    assert table["judge@f1"]["fp"] == 0  # fold 0's calibration rows lift its threshold over 0.8
    assert table["judge"]["precision_spread"] > 0  # the false merge is all in problem p0
    assert table["judge@f1"]["precision_spread"] == 0.0
    assert "problems" in format_table(table, count="problems")

def test_pooled_files_are_also_scored_one_distribution_at_a_time(tmp_path):
    """Solution pairs pooled with sibling pairs: each file's held-out rows form a group, the rest
    are the recipe's, and every group keeps all calibration rows (a threshold is picked on what
    the pooled fit calibrated on)."""
    siblings = tmp_path / "siblings.jsonl"
    siblings.touch()

    def row(source, part, fold):
        return {"source": f"{source}:1", "part": part, "fold": fold, "label": 1, "prob": 0.9}

    rows = [row("data/train.jsonl", "test", 0), row(tmp_path / "x" / ".." / "siblings.jsonl", "test", 0),
            row(siblings, "test", 1), row("data/train.jsonl", "calibration", 0), row(siblings, "calibration", 1)]
    groups = split_by_source(rows, [str(siblings)])
    assert set(groups) == {"recipe", str(siblings)}
    assert [r["part"] for r in groups["recipe"]] == ["test", "calibration", "calibration"]
    assert [(r["part"], r["fold"]) for r in groups[str(siblings)]] == [("test", 0), ("test", 1), ("calibration", 0),
                                                                        ("calibration", 1)]
    assert "recipe" not in split_by_source(rows[1:3], [str(siblings)])  # no held-out row of its own: no group


@pytest.mark.slow
def test_crossval_end_to_end_fits_each_fold_and_resumes(tmp_path, capsys):
    """The real command: a recipe with a calibration split, two folds fitted by trainer_cli.py in
    subprocesses, scored as `--strategy model` would, the table printed; a rerun refits nothing."""
    rng = random.Random(0)
    train = tmp_path / "train.jsonl"
    with train.open("w") as fh:
        for p in range(24):
            for k in range(2):
                n = rng.randint(2, 9)
                same = (p + k) % 2 == 0
                fh.write(json.dumps({"id": f"toy-{p}-{k}", "question": f"Ann has {n} apples.",
                                     "sentence1": f"Ann has {n} apples.",
                                     "sentence2": f"Ann has {n} apples." if same else f"Ann has {n + 1} pears.",
                                     "result": 4 if same else 0}) + "\n")
    recipe = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    recipe["data"].pop("val")
    recipe["data"].update(train=str(train), calibration_fraction=0.3)
    recipe["model"]["model_name"] = str(build_tiny_longformer(tmp_path / "tiny", attention_window=8))
    recipe["model"]["max_length"] = 64
    recipe.update(threshold_from_val=True, guard=True)
    config = tmp_path / "recipe.yaml"
    config.write_text(yaml.safe_dump(recipe))
    siblings = tmp_path / "siblings.jsonl"  # a pooled --data file: scored on its own as well
    with siblings.open("w") as fh:
        for p in range(4):
            fh.write(json.dumps({"id": f"sib-{p}-0", "question": "Bo has 3 cats.", "sentence1": "Bo has 3 cats.",
                                 "sentence2": "Bo has 3 cats." if p % 2 else "Bo has 4 cats.",
                                 "result": 4 if p % 2 else 1}) + "\n")
    out = tmp_path / "cv"
    args = ["--recipe", str(config), "--data", str(siblings), "--folds", "2", "--out", str(out), "--",
            "--trainer.max_epochs=1", "--trainer.limit_train_batches=2"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "judge+guard" in printed and "false_merge_rate" in printed and "average precision" in printed
    held_out = [line for line in printed.splitlines() if "held-out pairs" in line]
    assert held_out == ["recipe: 48 held-out pairs; mean ± spread over folds",
                        f"{siblings}: 4 held-out pairs; mean ± spread over folds"]
    pooled = [line for line in printed.splitlines() if "bootstrap over problems" in line]
    assert pooled == ["recipe: pooled over folds, ± bootstrap over problems",
                      f"{siblings}: pooled over folds, ± bootstrap over problems"]
    rows = [json.loads(line) for line in (out / "oof.jsonl").read_text().splitlines()]
    assert {r["fold"] for r in rows} == {0, 1} and {r["part"] for r in rows} == {"test", "calibration"}
    assert len([r for r in rows if r["part"] == "test"]) == 52
    # The recipe stores guard: true, yet the rows hold the judge's own scores: the pairs the
    # guard vetoes ("Ann has 5 apples." / "Ann has 6 pears.") keep them; the +guard rows veto them.
    guarded = [r for r in rows if vetoed(r)]
    assert guarded and any(r["probability"] > 0 for r in guarded) and any(r["raw_prob"] > 0 for r in guarded)
    # each row holds the judge's verdict in its one JSON form (issue 67)
    assert all("prob" not in r and verdict_from_json(r).probability == r["probability"] for r in rows)
    stamp = (out / "fold0" / "judge" / "config.json").stat().st_mtime
    assert main(args) == 0 and (out / "fold0" / "judge" / "config.json").stat().st_mtime == stamp
    # Pairs of problems no fold trained on, added to the finished run: each scored by its problem's
    # fold judge, nothing refitted, tabled on their own.
    unseen = tmp_path / "fresh.jsonl"
    fresh = [PairRecord("Cy has 2 dogs.", "Cy has 2 dogs." if p % 2 else "Cy has 5 dogs.", 4 if p % 2 else 0,
                        extra={"id": f"fresh-{p}-0", "question": "Cy has 2 dogs."}) for p in range(6)]
    unseen.write_text("".join(json.dumps({"sentence1": r.sentence1, "sentence2": r.sentence2, "result": r.result,
                                          **r.extra}) + "\n" for r in fresh))
    capsys.readouterr()
    assert main(args[:-3] + ["--unseen", str(unseen)] + args[-3:]) == 0
    assert (out / "fold0" / "judge" / "config.json").stat().st_mtime == stamp
    printed = capsys.readouterr().out
    assert f"{unseen}: 6 pairs no fold trained on" in printed
    scored = [json.loads(line) for line in (out / "unseen.jsonl").read_text().splitlines()]
    expected_fold = dict(zip([r.extra["id"] for r in fresh], assign_folds(fresh, 2)))
    assert sorted(r["id"] for r in scored) == sorted(expected_fold)
    assert all(r["fold"] == expected_fold[r["id"]] and r["part"] == "test" for r in scored)
    assert len(set(expected_fold.values())) == 2  # both folds' judges were used
    with pytest.raises(SystemExit):
        main(["--recipe", str(config), "--folds", "3", "--out", str(out)])  # another plan in the same --out
    # An ensemble of finished runs (here the run with itself): built and calibrated per fold, no fit.
    views = tmp_path / "views"
    assert main(["--recipe", str(config), "--data", str(siblings), "--folds", "2", "--out", str(views),
                 "--members", str(out), str(out)]) == 0
    printed = capsys.readouterr().out
    assert "ensemble of 2 judges calibrated on" in printed and "judge+guard" in printed
    settings = json.loads((views / "fold1" / "judge" / "config.json").read_text())["equiv"]
    assert settings["members"] == ["members/1"] and not (views / "fold1" / "fit.log").exists()
    ensemble_rows = [json.loads(line) for line in (views / "oof.jsonl").read_text().splitlines()]
    assert [(r["id"], r["part"]) for r in ensemble_rows] == [(r["id"], r["part"]) for r in rows]
    # its threshold chosen on the fold's calibration split as the recipe's fit chooses one (best F1)
    # (the classifier's own scores: the rows' raw_prob has the judge's prefilter applied)
    calibration = [r for r in ensemble_rows if r["fold"] == 1 and r["part"] == "calibration"]
    probs = score_judge_dir(views / "fold1" / "judge", [(r["sentence1"], r["sentence2"]) for r in calibration])
    chosen = calibration_summary(probs, [r["label"] for r in calibration])
    assert settings["policy"]["threshold"] == chosen["decision_threshold"]
    # a recipe that keeps its threshold (threshold_from_val: false): so does each fold's ensemble
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(yaml.safe_dump(dict(recipe, threshold_from_val=False,
                                         model=dict(recipe["model"], decision_threshold=0.42))))
    assert main(["--recipe", str(fixed), "--data", str(siblings), "--folds", "2", "--out", str(tmp_path / "kept"),
                 "--members", str(out), str(out)]) == 0
    kept = [json.loads(line) for line in (tmp_path / "kept" / "oof.jsonl").read_text().splitlines()]
    assert {r["raw_threshold"] for r in kept} == {0.42}


def test_score_apart_takes_only_a_file_the_cross_validation_pools(tmp_path, capsys):
    """A file to score on its own must be one the folds are dealt from (the recipe's or a --data
    file); any other would print no table, so it is refused before any fit, naming the file."""
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"id": "toy-0-0", "sentence1": "a", "sentence2": "b", "result": 4}) + "\n")
    config = tmp_path / "recipe.yaml"
    config.write_text(yaml.safe_dump({"data": {"train": str(train)}}))
    stray = tmp_path / "stray.jsonl"
    with pytest.raises(SystemExit) as exc:
        main(["--recipe", str(config), "--score_apart", str(stray), "--out", str(tmp_path / "cv")])
    assert exc.value.code != 0
    err = capsys.readouterr().err
    assert str(stray) in err and "score_apart" in err and "neither a file of the recipe" in err
    assert not (tmp_path / "cv").exists()


def test_unseen_takes_only_a_file_no_fold_trains_on(tmp_path, capsys):
    """--unseen scores pairs by judges that never saw their problems; a file the folds train on
    would be scored by judges that did, so it is refused before any fit, naming the file."""
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"id": "toy-0-0", "sentence1": "a", "sentence2": "b", "result": 4}) + "\n")
    config = tmp_path / "recipe.yaml"
    config.write_text(yaml.safe_dump({"data": {"train": str(train)}}))
    for bad, message in ((train, "trained on by the folds"), (tmp_path / "missing.jsonl", "no such file")):
        with pytest.raises(SystemExit) as exc:
            main(["--recipe", str(config), "--unseen", str(bad), "--out", str(tmp_path / "cv")])
        assert exc.value.code != 0
        err = capsys.readouterr().err
        assert str(bad) in err and "unseen" in err and message in err
    assert not (tmp_path / "cv").exists()


def test_an_ensemble_takes_only_runs_fitted_on_the_same_folds(tmp_path, capsys):
    """`--members` averages finished runs fold by fold; a run whose fold was fitted on other pairs
    (another recipe, --data or --fold_seed) would leak held-out pairs, so it is refused by name."""
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"id": f"toy-{p}-0", "sentence1": "a", "sentence2": "b", "result": 4}) + "\n"
                             for p in range(8)))
    config = tmp_path / "recipe.yaml"
    config.write_text(yaml.safe_dump({"data": {"train": str(train), "calibration_fraction": 0.25}}))
    member = tmp_path / "other"
    for k in range(2):
        (member / f"fold{k}" / "judge").mkdir(parents=True)
        (member / f"fold{k}" / "judge" / "config.json").write_text("{}")
        (member / f"fold{k}" / "train.jsonl").write_text("not these pairs\n")
    with pytest.raises(SystemExit) as exc:
        main(["--recipe", str(config), "--folds", "2", "--out", str(tmp_path / "cv"), "--members", str(member), str(member)])
    assert exc.value.code != 0
    err = capsys.readouterr().err
    assert str(member) in err and "members" in err and "fitted on other pairs" in err
    assert not (tmp_path / "cv" / "fold0" / "judge").exists()


def test_the_best_f1_policy_repicks_on_each_folds_calibration_rows():
    """`@f1`: on each fold's calibration rows, the best-F1 threshold (as fit --threshold_from_val)."""
    # calibration: best F1 (1.0) at a threshold of 0.35, F1 0.8 at 0.5, 0.5 at 0.75
    calibration = _rows(0, "calibration", [(0.9, 1), (0.6, 1), (0.4, 1), (0.3, 0), (0.1, 0)])
    test = _rows(0, "test", [(0.45, 0), (0.95, 1)])
    rows = test + calibration
    assert [f["fp"] for f in per_fold(rows, policies()["judge+guard@f1"])] == [1]
    moved = test + _rows(0, "calibration", [(0.9, 1), (0.6, 1), (0.5, 0), (0.1, 0)])  # best F1 now above 0.5
    assert [f["fp"] for f in per_fold(moved, policies()["judge+guard@f1"])] == [0]
    assert "judge+guard@f1" in yardstick_table(rows) and "raw+guard@f1" in yardstick_table(rows)


def test_the_floor_policy_holds_back_only_statement_pairs_below_the_floor():
    """`+floorS`: after the best-F1 pick, two steps that both compute nothing merge only at S."""
    calibration = _rows(0, "calibration", [(0.9, 1), (0.6, 1), (0.1, 0)])
    test = _rows(0, "test", [(0.7, 0), (0.95, 1), (0.7, 1)])
    test[2]["sentence1"] = test[2]["sentence2"] = "x is 3 + 4 = 7"  # this pair computes: no floor for it
    rows = test + calibration
    plain = per_fold(rows, policies((0.9,))["raw+guard@f1"])
    floored = per_fold(rows, policies((0.9,))["raw+guard+floor0.9@f1"])
    assert (plain[0]["tp"], plain[0]["fp"]) == (2, 1)
    assert (floored[0]["tp"], floored[0]["fp"]) == (2, 0)
    assert "raw+guard+floor0.7+plan0.9@f1" in yardstick_table(rows)  # the recipe's floors


def test_the_fixed_threshold_policy_ignores_the_calibration_rows_and_the_stored_threshold():
    """`@tT`: one threshold for every fold (fit without threshold_from_val), then guard and floor."""
    rows = (_rows(0, "test", [(0.55, 1), (0.45, 0), (0.7, 0), (0.65, 1)])
            + _rows(0, "calibration", [(0.9, 1), (0.6, 0)]))  # a pick here would go above 0.6
    for row in rows:
        row["raw_threshold"] = 0.8  # what a fit that picked would have stored
    rows[0]["sentence1"] = rows[0]["sentence2"] = "x is 3 + 4 = 7"  # computes: no statement floor
    rows[2]["sentence1"], rows[2]["sentence2"] = "x is 3", "x is 4"  # the guard vetoes this one
    # rows[3] is two statements: the floor holds it back below the floor, not above
    floored = per_fold(rows, policies((0.9,), (0.5,))["raw+guard+floor0.9@t0.5"])
    assert (floored[0]["tp"], floored[0]["fp"], floored[0]["fn"]) == (1, 0, 1)
    low_floor = per_fold(rows, policies((0.6,), (0.5,), None)["raw+guard+floor0.6@t0.5"])
    assert (low_floor[0]["tp"], low_floor[0]["fp"], low_floor[0]["fn"]) == (2, 0, 0)
    assert per_fold(rows, policies((0.6,), (0.6,), None)["raw+guard+floor0.6@t0.6"])[0]["tp"] == 1
    # numbered plans held to their own floor: rows[3] as two plans is held back at 0.65 < 0.9
    rows[3]["sentence1"], rows[3]["sentence2"] = "1. Find x.\n2. Add y.", "1. Find the x.\n2. Then add y."
    planned = per_fold(rows, policies((0.6,), (0.5,))["raw+guard+floor0.6+plan0.9@t0.5"])
    assert (planned[0]["tp"], planned[0]["fp"], planned[0]["fn"]) == (1, 0, 1)
    assert "raw+guard+floor0.7+plan0.9@t0.5" in yardstick_table(rows)


def test_the_ranking_table_scores_held_out_rows_per_fold_with_and_without_the_guard():
    rows = (_rows(0, "test", [(0.9, 1), (0.7, 0), (0.2, 0)]) + _rows(1, "test", [(0.95, 0), (0.6, 1), (0.1, 0)])
            + _rows(0, "calibration", [(0.1, 1), (0.9, 0)]))  # calibration rows do not count
    # fold 1's top pair is a claim the guard vetoes: its score goes to 0 under +guard
    rows[3].update(sentence1="Ann has 5 apples.", sentence2="Ann has 6 pears.")
    assert vetoed(rows[3]) and not any(vetoed(r) for r in rows[:3] + rows[4:6])
    table = ranking_table(rows)
    assert table["raw"]["folds"] == 2 and table["raw"]["ap"] == pytest.approx((1.0 + 0.5) / 2)
    assert table["raw+guard"]["ap"] == pytest.approx(1.0) and table["raw+guard"]["ap_spread"] == 0.0
    assert "raw+guard" in format_ranking(table) and "1.000 ± 0.000" in format_ranking(table)
    # a fold without an equivalent held-out pair has no AP: left out, not counted as 0
    no_positive = rows + _rows(2, "test", [(0.9, 0), (0.1, 0)])
    assert ranking_table(no_positive)["raw"] == table["raw"]


def test_the_yardstick_and_the_live_judge_decide_every_pair_of_a_labelled_file_alike(tmp_path):
    """The shipped policy as the yardstick scores it (from a fold's rows) and the judge search
    builds from the same export decide every pair of a shipped labelled file the same way."""
    from statistics import median

    from equiv.data.records import LabelMapping, read_pair_records
    from equiv.judge.export import update_policy
    from equiv.prune import ModelJudge
    from equiv.prune.crossval import score_fold
    from equiv.prune.yardstick import shipped_policy
    from tests.helpers.judges import SETTINGS, make_tiny_judge

    siblings = REPO / "benchmarks" / "data" / "gsm8k_train_siblings_gemma270m.jsonl"
    records, _ = read_pair_records(siblings)
    judge_dir = make_tiny_judge(tmp_path / "judge", settings=dict(SETTINGS, prefilter_threshold=0.75, claim_guard=True,
                                                                   statement_threshold=0.9))
    probe = ModelJudge(judge_dir, device="cpu", guard=False, floor=0.0)
    pairs = [(r.sentence1, r.sentence2) for r in records]
    questions = [r.extra.get("question", "") for r in records]
    scored = [v.probability for v in probe.pair_verdicts(pairs, questions) if v.reason == "below_threshold"
              or v.reason == "threshold"]
    # a threshold inside the tiny judge's scores, so both sides of it (and of the floor) occur
    update_policy(judge_dir, threshold=round(median(scored), 6), floor=round(sorted(scored)[3 * len(scored) // 4], 6))
    live = ModelJudge(judge_dir, device="cpu")
    mapping = LabelMapping()
    kept = [r for r in records if mapping.label(r.result) is not None]
    verdicts = live.pair_verdicts([(r.sentence1, r.sentence2) for r in kept], [r.extra.get("question", "") for r in kept])
    rows = score_fold(judge_dir, records, mapping, 0)
    assert [(r["sentence1"], r["sentence2"]) for r in rows] == [(r.sentence1, r.sentence2) for r in kept]
    yardstick = shipped_policy()
    policy = yardstick.fold_policy(rows, [])
    assert policy == live.policy and policy.guard and policy.floor
    by_yardstick = yardstick.decide(rows, policy)
    assert [v.merged for v in by_yardstick] == [v.merged for v in verdicts]
    assert [v.reason for v in by_yardstick] == [v.reason for v in verdicts]
    reasons = {v.reason.split(":")[0] for v in verdicts}
    assert {"identical", "prefiltered", "guard", "below_threshold", "floor", "threshold"} <= reasons, reasons
