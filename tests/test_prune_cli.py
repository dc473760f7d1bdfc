"""``search_cli.py pairs``: metrics, the final JSON line, sweeps, errors (the real entry point, in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.prune.cli import pairs_main
from tests.helpers.cli import Result, search_cli
from tests.helpers.judges import make_tiny_judge

A = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs a day."


def write_pairs(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def crafted(tmp_path) -> Path:
    # Levenshtein ratios: 1.0 (identical, eq), 0.98 (eq), 0.96 (not eq: other result), 0.14 (not eq),
    # 0.52 (eq: same computation, other words),
    # plus a level-2 pair that the default mapping drops.
    rows = [
        {"sentence1": A, "sentence2": A, "result": 4},
        {"sentence1": A, "sentence2": A.replace("day.", "day"), "result": 3},
        {"sentence1": A, "sentence2": A.replace("16-3-4=9>>9", "16-3-4=8>>8"), "result": 1},
        {"sentence1": A, "sentence2": "The robe takes 2 bolts.", "result": 0},
        {"sentence1": A, "sentence2": "After breakfast and muffins, 16 - 3 - 4 = <<16-3-4=9>>9 eggs remain to sell daily.", "result": 4},
        {"sentence1": A, "sentence2": "Maybe the same.", "result": 2},
    ]
    return write_pairs(tmp_path / "pairs.jsonl", rows)


def run_cli(*args: str) -> Result:
    return search_cli("pairs", *args)


def test_levenshtein_metrics_last_line_and_output_file(crafted, tmp_path):
    out_file = tmp_path / "m" / "metrics.json"
    proc = run_cli("--data", str(crafted), "--strategy", "levenshtein", "--output", str(out_file))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == f"metrics       {out_file} (JSON)"  # the summary is for people; the JSON is in the file
    as_json = run_cli("--data", str(crafted), "--strategy", "levenshtein", "--json")
    last = json.loads(as_json.stdout)  # --json: the metrics alone, one object
    # ratio > 0.95 merges the first three pairs: tp 2, fp 1 (same words, other result), fn 1
    assert {"accuracy", "precision", "recall", "f1", "n"} <= set(last)
    assert last["n"] == 5 and last["dropped_level2"] == 1
    assert (last["tp"], last["fp"], last["fn"], last["tn"]) == (2, 1, 1, 1)
    assert any(line.startswith("f1") for line in lines[:-1])
    assert json.loads(out_file.read_text())["f1"] == last["f1"]


def test_formula_on_crafted_pairs_is_exact(crafted, capsys):
    assert pairs_main(["--data", str(crafted), "--strategy", "formula", "--json"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # formulas: same, same, different result, none vs one, same -> all five right
    assert (last["tp"], last["fp"], last["fn"], last["tn"]) == (3, 0, 0, 2)
    assert last["accuracy"] == last["f1"] == 1.0


def test_sweep_picks_best_f1_on_data_or_on_sweep_data(tmp_path, capsys):
    base = "abcdefghijklmnopqrst"
    def variant(k):  # k substitutions -> ratio 1 - k/20
        return base[: 20 - k] + "X" * k
    rows = [{"sentence1": base, "sentence2": variant(k), "result": r}
            for k, r in [(1, 4), (2, 4), (3, 0), (4, 4), (5, 4), (8, 0), (10, 0)]]
    data = write_pairs(tmp_path / "sweep.jsonl", rows)
    assert pairs_main(["--data", str(data), "--strategy", "levenshtein", "--sweep", "--json"]) == 0
    best = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert best["recall"] == 1.0 and best["precision"] == 0.8  # threshold between 0.6 and 0.75
    assert 0.6 < best["threshold"] < 0.75 and "best F1" in best["threshold_source"]
    # the threshold chosen on another file is applied to --data
    other = write_pairs(tmp_path / "other.jsonl", [{"sentence1": base, "sentence2": variant(k), "result": r}
                                                   for k, r in [(1, 4), (2, 4), (3, 0), (4, 0)]])
    assert pairs_main(["--data", str(data), "--strategy", "levenshtein", "--sweep", "--sweep_data", str(other),
                       "--json"]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0.85 < again["threshold"] < 0.9 and str(other) in again["threshold_source"]
    assert again["precision"] == 1.0 and again["recall"] == 0.5  # on --data, at other's threshold


def test_model_strategy_reports_prefilter_rejections(crafted, tmp_path, capsys):
    judge = make_tiny_judge(tmp_path / "judge")
    first = tmp_path / "first.json"
    assert pairs_main(["--data", str(crafted), "--strategy", "model", "--model", str(judge), "--device", "cpu",
                       "--output", str(first)]) == 0
    out = capsys.readouterr().out
    last = json.loads(first.read_text())
    assert last["prefilter"] == 0.6  # from the export's settings
    # pairs 3 (unrelated) and 4 (equivalent, ratio < 0.6) are prefiltered; pair 4 is a true equivalent
    assert last["prefilter_rejected_equivalent"] == 1 and last["equivalent_pairs"] == 3
    assert last["judge_stats"]["exact"] == 2  # the identical pair and the one a final full stop sets apart
    assert "rejects 1 of 3 truly equivalent pairs" in out
    out_file = tmp_path / "metrics.json"
    assert pairs_main(["--data", str(crafted), "--strategy", "model", "--model", str(judge),
                       "--prefilter", "0.0", "--device", "cpu", "--sweep_prefilter", "--output", str(out_file)]) == 0
    out = capsys.readouterr().out
    last = json.loads(out_file.read_text())
    assert last["prefilter_rejected_equivalent"] == 0 and last["judge_stats"]["prefiltered"] == 0
    assert "prefilter sweep on" in out
    table = json.loads(out_file.read_text())["prefilter_sweep"]
    assert [r["prefilter"] for r in table][:2] == [0.0, 0.5] and table[-1]["resolved"] == 0.4  # ratios 0.14 and 0.52
    # with the floors of the recipe (a plan floor beside the statement floor) the sweep scores every pair alike
    assert pairs_main(["--data", str(crafted), "--strategy", "model", "--model", str(judge), "--prefilter", "0.0",
                       "--device", "cpu", "--floor", "0.7", "--plan_floor", "0.9", "--sweep_prefilter",
                       "--output", str(out_file)]) == 0
    floored = json.loads(out_file.read_text())
    assert floored["policy"]["plan_floor"] == 0.9 and floored["prefilter_sweep"] == table


@pytest.mark.parametrize(
    "args, message",
    [
        (["--strategy", "levenshtein", "--data", "/no/such.jsonl"], "file not found"),
        (["--strategy", "model", "--model", "/no/judge"], "judge not found"),
        (["--strategy", "model"], "needs a judge"),
        (["--strategy", "formula", "--threshold", "0.3"], "takes no threshold"),
        (["--strategy", "levenshtein", "--sweep_data", "x.jsonl"], "needs --sweep"),
        (["--strategy", "levenshtein", "--threshold", "2"], "must be in (0, 1]"),
    ],
)
def test_bad_input_exits_2_with_one_line(crafted, args, message):
    if "--data" not in args:
        args = ["--data", str(crafted), *args]
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: ")
    assert message in proc.stderr


def test_malformed_file_and_unknown_option(tmp_path, crafted):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"sentence1": "a", "sentence2": "b", "result": 3}) + "\n{not json\n")
    proc = run_cli("--data", str(bad), "--strategy", "formula")
    assert proc.returncode == 2 and f"{bad}:2" in proc.stderr
    proc = run_cli("--data", str(crafted), "--strategy", "formula", "--frobnicate")
    assert proc.returncode == 2 and "unrecognized arguments" in proc.stderr
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps({"sentence1": "a", "result": 3}) + "\n")
    proc = run_cli("--data", str(missing), "--strategy", "formula")
    assert proc.returncode == 2 and "field 'sentence2'" in proc.stderr


def test_baselines_on_real_gsm8k_equiv(shared_data, capsys):
    valid = str(shared_data / "gsm8k_equiv" / "valid.jsonl")
    assert pairs_main(["--data", valid, "--strategy", "formula", "--json"]) == 0
    formula = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert formula["n"] == 240 and formula["f1"] > 0.8
    assert pairs_main(["--data", valid, "--strategy", "levenshtein", "--json"]) == 0
    lev = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert lev["precision"] > 0.9 and lev["recall"] < 0.3  # ratio > 0.95 is precise but merges little


class _RunsAShellCommand:
    """Unpickling this runs ``touch MARKER`` -- what a crafted .ckpt does to a plain torch.load."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("command", ["pairs", "eval"])
def test_a_malicious_checkpoint_runs_nothing_and_is_refused_in_one_line(crafted, tmp_path, command):
    import torch

    marker = tmp_path / "ran"
    evil = tmp_path / "judge.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": _RunsAShellCommand(marker), "equiv_hf_config": {}}, evil)
    if command == "pairs":
        proc = run_cli("--data", str(crafted), "--strategy", "model", "--model", str(evil), "--device", "cpu")
    else:
        from tests.helpers.runs import base_args

        proc = search_cli("eval", *base_args(tmp_path, n=1), "--pruner.strategy", "model", "--pruner.model", str(evil))
    assert not marker.exists(), "loading the checkpoint ran its code"
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()
    assert len(last) == 1 and last[0].startswith(f"error: {evil}: ")
    assert "refused: the checkpoint names posix.system" in last[0]


def test_eval_style_flags_and_the_old_spellings_are_one_command(crafted, capsys):
    """``pairs`` takes ``eval``'s spellings (``--data.path``, ``--pruner.*``); the old ones stay aliases."""
    assert pairs_main(["--data.path", str(crafted), "--pruner.strategy", "levenshtein", "--pruner.threshold", "0.9",
                       "--pruner.batch_size", "4", "--json"]) == 0
    new = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert pairs_main(["--data", str(crafted), "--strategy", "levenshtein", "--threshold", "0.9", "--batch-size", "4",
                      "--json"]) == 0
    old = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    new.pop("judge_stats"), old.pop("judge_stats")  # holds wall seconds
    assert new == old and new["threshold"] == 0.9


def test_the_report_explains_what_it_leaves_out_and_shows_no_spread_of_one_problem(crafted, tmp_path, capsys):
    """The crafted pairs, all of one problem (one question): a spread over problems means nothing;
    the level-2 pair is left out with its reason."""
    rows = [dict(json.loads(line), question="How many eggs?") for line in crafted.read_text().splitlines()]
    one = write_pairs(tmp_path / "one_problem.jsonl", rows)
    assert pairs_main(["--data.path", str(one), "--pruner.strategy", "levenshtein"]) == 0
    report = capsys.readouterr().out.strip().splitlines()
    assert "pairs         5 evaluated, 1 left out (label level 2: neither equivalent nor not under the judge's label mapping)" in report
    assert "pairs from    1 problem (no spread: it is taken over problems)" in report
    assert not [line for line in report if "±" in line]


def test_a_prefilter_of_zero_reads_as_off(crafted, tmp_path, capsys):
    judge = make_tiny_judge(tmp_path / "judge")
    assert pairs_main(["--data.path", str(crafted), "--pruner.strategy", "model", "--pruner.model", str(judge),
                       "--pruner.prefilter", "0"]) == 0
    report = capsys.readouterr().out
    assert "prefilter     off: every pair goes to the model" in report and "resolves 0.0%" not in report


def test_the_summary_is_plain_words_and_the_json_is_asked_for(crafted, capsys):
    """Issue 68: the summary named switched-off rules in the code's words ("claim guard vetoed 0
    (off)") and ended in a raw JSON blob. Now only what is on is named, and the JSON is ``--json``'s."""
    assert pairs_main(["--data", str(crafted), "--strategy", "levenshtein"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert not [line for line in lines if line.lstrip().startswith("{")]
    text = "\n".join(lines)
    assert "(off)" not in text and "vetoed" not in text and "claim guard" not in text
    work = next(line for line in lines if line.startswith("judge work    "))
    assert "pairs scored by the levenshtein strategy" in work
    assert any(line.startswith("decided by    ") for line in lines)
    assert pairs_main(["--data", str(crafted), "--strategy", "levenshtein", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 5  # the whole output is the one object
