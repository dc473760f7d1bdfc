"""One command-line stack (issue #54 item 4): ``pairs`` and ``serve`` parse with jsonargparse like
``eval``, share its ``--pruner.*`` group (equiv.prune.options), read ``--config`` files, and
refuse a bad value in one line; the older spellings still parse (the real entry point, in process)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.cli import search_cli
from tests.test_prune_cli import crafted  # noqa: F401 (fixture)


def _last_json(stdout: str) -> dict:
    """The metrics line without the seconds the judge took."""
    out = json.loads(stdout.strip().splitlines()[-1])
    out["judge_stats"].pop("seconds")
    return out


def test_pairs_reads_a_config_file_and_flags_override_it(crafted, tmp_path: Path):  # noqa: F811
    """Before: pairs was argparse and refused --config as an unrecognized argument."""
    recipe = tmp_path / "pairs.yaml"
    recipe.write_text(f"data:\n  path: {crafted}\npruner:\n  strategy: levenshtein\n  threshold: 0.5\n")
    from_file = search_cli("pairs", "--config", recipe, "--json")
    assert from_file.returncode == 0, from_file.stderr
    flags = search_cli("pairs", "--data", crafted, "--strategy", "levenshtein", "--threshold", "0.5", "--json")
    assert _last_json(from_file.stdout) == _last_json(flags.stdout)
    overridden = search_cli("pairs", "--config", recipe, "--pruner.threshold", "0.97", "--json")
    assert overridden.returncode == 0 and _last_json(overridden.stdout)["threshold"] == 0.97


def test_pairs_comma_separated_guard_rules_still_parse(crafted):  # noqa: F811
    done = search_cli("pairs", "--data", crafted, "--strategy", "levenshtein", "--guard",
                      "different_numbers,different_units", "--json")
    assert done.returncode == 0, done.stderr
    assert _last_json(done.stdout)["guard"] == ["different_numbers", "different_units"]


@pytest.mark.parametrize("argv, names", [
    (["--pruner.threshold", "high"], "pruner.threshold"),
    (["--strategy", "levenshtein", "--batch-size", "many"], "pruner.batch_size"),
    (["--strategy", "none"], "pruner.strategy"),
    (["--strategy", "nonesuch"], "strategy"),
    (["--strategy", "formula", "--frobnicate"], "unrecognized arguments"),
])
def test_pairs_bad_values_are_one_line(crafted, argv, names):  # noqa: F811
    done = search_cli("pairs", "--data", crafted, *argv)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and names in lines[0], lines


def test_pairs_without_data_is_one_line(tmp_path: Path):
    done = search_cli("pairs", "--strategy", "formula")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: --data.path FILE is required (the labelled pairs)"], done.stderr


def _pruner_help(command: str) -> dict[str, str]:
    """Each ``--pruner.*`` option's help paragraph in ``COMMAND --help``, by option name."""
    done = search_cli(command, "--help")
    assert done.returncode == 0, done.stderr
    out: dict[str, str] = {}
    current = None
    for line in done.stdout.splitlines():
        if line.startswith("  --pruner."):
            current = line.split()[0]
            options_and_help = re.split(r"\s{2,}", line.strip(), maxsplit=1)  # help may start on this line
            out[current] = options_and_help[1] + " " if len(options_and_help) > 1 else ""
        elif line.startswith("  -"):
            current = None
        elif current:
            out[current] += " ".join(line.split()) + " "
    return {name: " ".join(text.split()) for name, text in out.items()}


def test_the_pruner_group_reads_the_same_in_eval_pairs_and_serve():
    """One group from PrunerConfig: the help of a setting is the same words in every command."""
    evaluate, pairs, serve = (_pruner_help(c) for c in ("eval", "pairs", "serve"))
    assert {"--pruner.strategy", "--pruner.guard", "--pruner.restate"} <= set(pairs) <= set(evaluate)
    assert {"--pruner.model", "--pruner.device", "--pruner.batch_size"} <= set(serve) <= set(evaluate)
    for name in ("--pruner.threshold", "--pruner.guard", "--pruner.batch_size"):
        if name in pairs:
            assert pairs[name] == evaluate[name]
    assert serve["--pruner.model"] == evaluate["--pruner.model"]


def test_serve_reads_a_config_file_and_refuses_a_bad_port_in_one_line(tmp_path: Path):
    recipe = tmp_path / "serve.yaml"
    recipe.write_text(f"pruner:\n  model: {tmp_path / 'judge'}\nport: 70000\n")
    done = search_cli("serve", "--config", recipe)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "--port" in lines[0] and "70000" in lines[0], lines
    typed = search_cli("serve", "--model", tmp_path / "judge", "--max_pairs", "lots")
    lines = typed.stderr.strip().splitlines()
    assert typed.returncode == 2 and len(lines) == 1 and "max_pairs" in lines[0], lines


# -- siblings, label, agreement, compare, report: the same stack (before: plain argparse, no --config) --

def _one_error_line(done, *names: str) -> None:
    """Exit 2 and one ``error: ...`` line on stderr naming each of ``names``."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (done.returncode, lines)
    assert all(name in lines[0] for name in names), lines


def _sibling_run(tmp_path: Path) -> Path:
    from tests.test_label_data import _tree

    run = tmp_path / "run"
    for k in range(4):
        _tree(run, f"prob-{k}", [f"So x = {k} + 10 = {k + 10} apples.", f"So x = {k} + 10 = {k + 11} apples.",
                                 "Something else entirely here."])
    return run


def test_siblings_reads_a_config_file_and_flags_override_it(tmp_path: Path):
    run = _sibling_run(tmp_path)
    holdout = tmp_path / "holdout.jsonl"
    holdout.write_text(json.dumps({"question": "Not one of these?", "answer": "1"}) + "\n")
    recipe = tmp_path / "siblings.yaml"  # one holdout file as a scalar, as a person writes it
    recipe.write_text(f"run_dirs: [{run}]\nout: {tmp_path / 'a.jsonl'}\nwindow: [0.1, 0.99]\nholdout: {holdout}\n")
    from_file = search_cli("siblings", "--config", recipe)
    flags = search_cli("siblings", run, "--out", tmp_path / "b.jsonl", "--window", 0.1, 0.99, "--holdout", holdout)
    assert from_file.returncode == 0 and flags.returncode == 0, from_file.stderr + flags.stderr
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text() != ""
    narrow = search_cli("siblings", "--config", recipe, "--out", tmp_path / "c.jsonl", "--window", 0.9, 0.99)
    assert narrow.returncode == 0 and not (tmp_path / "a.jsonl").read_text() == (tmp_path / "c.jsonl").read_text()
    assert json.loads(narrow.stdout.strip().splitlines()[-1])["out"] == str(tmp_path / "c.jsonl")
    short = tmp_path / "short.yaml"
    short.write_text(f"run_dirs: [{run}]\nout: {tmp_path / 'd.jsonl'}\nwindow: [0.5]\n")
    _one_error_line(search_cli("siblings", "--config", short), "window", "2 values")


@pytest.mark.parametrize("argv, names", [
    (["--bins", "many"], ["bins"]),
    (["--window", "0.1", "high"], ["--window"]),
    (["--window", "0.1", "0.9", "--prefilter", "0.5"], ["--prefilter", "--window"]),
    (["--frobnicate"], ["unrecognized arguments", "--frobnicate"]),
])
def test_siblings_bad_values_are_one_line(tmp_path: Path, argv, names):
    _one_error_line(search_cli("siblings", _sibling_run(tmp_path), "--out", tmp_path / "x.jsonl", *argv), *names)


def _label_argv(tmp_path: Path) -> list[object]:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "p-1", "sentence1": "a", "sentence2": "b"}) + "\n")
    return [pairs, "--out", tmp_path / "labels.jsonl"]


def test_label_reads_a_config_file_and_flags_override_it(tmp_path: Path):
    """The config's tries: 0 is refused; a later --tries 2 overrides it, and the run goes on to
    the (unreachable) server the config names."""
    recipe = tmp_path / "labeller.yaml"
    recipe.write_text("model: m\nbase_url: http://127.0.0.1:9/v1\ntries: 0\ntimeout: 5\n")
    _one_error_line(search_cli("label", *_label_argv(tmp_path), "--config", recipe), "field 'tries'")
    _one_error_line(search_cli("label", *_label_argv(tmp_path), "--config", recipe, "--tries", 2),
                    "http://127.0.0.1:9/v1: field 'base_url'")


@pytest.mark.parametrize("argv, names", [
    (["--temperature", "hot"], ["temperature", "hot"]),
    (["--structured", "bogus"], ["--structured", "bogus"]),
    (["--frobnicate"], ["unrecognized arguments", "--frobnicate"]),
])
def test_label_bad_values_are_one_line(tmp_path: Path, argv, names):
    done = search_cli("label", *_label_argv(tmp_path), "--model", "m", "--base_url", "http://127.0.0.1:9/v1", *argv)
    _one_error_line(done, *names)
    assert not (tmp_path / "labels.jsonl").exists()


def _labelled(tmp_path: Path) -> tuple[Path, Path]:
    base = [{"id": f"p-{i}", "sentence1": f"s{i}", "sentence2": f"t{i}"} for i in range(4)]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({**r, "result": lvl}) + "\n" for r, lvl in zip(base, (4, 3, 0, 1))))
    b.write_text("".join(json.dumps({**r, "result": lvl}) + "\n" for r, lvl in zip(base, (4, 4, 1, 0))))
    return a, b


def test_agreement_reads_a_config_file_and_flags_override_it(tmp_path: Path):
    a, b = _labelled(tmp_path)
    recipe = tmp_path / "agreement.yaml"
    recipe.write_text(f"a: {a}\nb: {b}\nequivalent: [4]\nnot_equivalent: [0, 1, 3]\n")
    from_file = search_cli("agreement", "--config", recipe)
    flags = search_cli("agreement", a, b, "--equivalent", 4, "--not_equivalent", 0, 1, 3)
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout == flags.stdout
    overridden = search_cli("agreement", "--config", recipe, "--equivalent", 3, 4, "--not_equivalent", 0, 1)
    assert overridden.stdout == search_cli("agreement", a, b).stdout != from_file.stdout


def test_agreement_bad_values_are_one_line(tmp_path: Path):
    a, b = _labelled(tmp_path)
    _one_error_line(search_cli("agreement", a, b, "--equivalent", "three"), "equivalent", "three")
    _one_error_line(search_cli("agreement", a, b, "--frobnicate"), "unrecognized arguments")


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    from tests.helpers.runs import write_run

    return write_run(tmp_path / "base", pruned=False), write_run(tmp_path / "pruned", pruned=True)


def test_compare_reads_a_config_file_and_flags_override_it(tmp_path: Path, two_runs):
    base, pruned = two_runs
    recipe = tmp_path / "compare.yaml"
    recipe.write_text(f"runs: [{base}, {pruned}]\njson: true\n")
    from_file = search_cli("compare", "--config", recipe)
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout == search_cli("compare", base, pruned, "--json").stdout
    assert len(json.loads(from_file.stdout)["rows"]) == 2
    one = search_cli("compare", "--config", recipe, base)  # the positional runs override the file's
    assert one.returncode == 0 and len(json.loads(one.stdout)["rows"]) == 1


def test_compare_bad_values_are_one_line(tmp_path: Path, two_runs):
    recipe = tmp_path / "compare.yaml"
    recipe.write_text(f"runs: [{two_runs[0]}]\njson: maybe\n")
    _one_error_line(search_cli("compare", "--config", recipe), "field 'json'", "maybe")
    _one_error_line(search_cli("compare", *two_runs, "--json=maybe"), "--json")
    _one_error_line(search_cli("compare", *two_runs, "--frobnicate"), "unrecognized arguments")


def test_report_reads_a_config_file_and_flags_override_it(tmp_path: Path, two_runs):
    recipe = tmp_path / "report.yaml"
    recipe.write_text(f"runs: [{two_runs[0]}, {two_runs[1]}]\nout: {tmp_path / 'page'}\ntitle: From the file\n"
                      "max_trees: 1\n")
    done = search_cli("report", "--config", recipe)
    assert done.returncode == 0, done.stderr
    assert "<title>From the file</title>" in (tmp_path / "page" / "index.html").read_text()
    assert "embedded trees for 1 of" in done.stdout
    flagged = search_cli("report", "--config", recipe, "--title", "From a flag", "--max_trees", 2)
    assert flagged.returncode == 0 and "embedded trees for 2 of" in flagged.stdout
    assert "<title>From a flag</title>" in (tmp_path / "page" / "index.html").read_text()


@pytest.mark.parametrize("argv, names", [
    (["--max_trees", "lots"], ["max_trees", "lots"]),
    (["--max_mb", "big"], ["max_mb", "big"]),
])
def test_report_bad_values_are_one_line(tmp_path: Path, two_runs, argv, names):
    _one_error_line(search_cli("report", *two_runs, "--out", tmp_path / "page", *argv), *names)
    assert not (tmp_path / "page").exists()


# -- the module commands: python -m equiv.judge.ensemble / .untuned, equiv.prune.crossval, --
# -- equiv.data.solution_pairs (before: plain argparse, a usage block above each error)    --



def _module_main(module: str):
    import importlib

    return importlib.import_module(module).main


@pytest.mark.parametrize("module", ["equiv.judge.ensemble", "equiv.judge.untuned", "equiv.prune.crossval",
                                    "equiv.data.solution_pairs"])
def test_module_commands_show_the_shared_help_layout(module: str):
    from tests.helpers.cli import invoke

    done = invoke(_module_main(module), ["--help"])
    assert done.returncode == 0, done.stderr
    assert f"usage: python -m {module}" in done.stdout
    assert "Show this help message and exit." in done.stdout and "(required)" in done.stdout  # jsonargparse's layout


@pytest.mark.parametrize("module, argv, names", [
    ("equiv.judge.ensemble", ["--recipe", "configs/gsm8k_equiv.yaml", "--members", "a", "b", "--out", "o",
                              "--threshold_from_val=maybe"], ["--threshold_from_val", "maybe"]),
    ("equiv.judge.ensemble", ["--members", "a", "b", "--out", "o"], ["required", "recipe"]),
    ("equiv.judge.ensemble", ["--recipe", "configs/gsm8k_equiv.yaml", "--members", "a", "b", "--out", "o",
                              "--hybrid"], ["unrecognized arguments", "--hybrid"]),
    ("equiv.judge.untuned", ["--out", "o", "--seed", "one"], ["seed", "one"]),
    ("equiv.judge.untuned", ["--out", "o", "--max_length", "long"], ["max_length", "long"]),
    ("equiv.prune.crossval", ["--recipe", "configs/gsm8k_equiv.yaml", "--out", "o", "--folds", "many"],
     ["folds", "many"]),
    ("equiv.prune.crossval", ["--recipe", "configs/gsm8k_equiv.yaml", "--out", "o", "--only", "0", "x"],
     ["only", "x"]),
    ("equiv.prune.crossval", ["--recipe", "configs/gsm8k_equiv.yaml", "--out", "o", "--frobnicate"],
     ["unrecognized arguments", "--frobnicate"]),
    ("equiv.data.solution_pairs", ["s.jsonl", "--out", "o.jsonl", "--per_problem", "four"], ["per_problem", "four"]),
    ("equiv.data.solution_pairs", ["s.jsonl", "--out", "o.jsonl", "--low", "low"], ["low"]),
])
def test_module_commands_refuse_a_bad_value_in_one_line(tmp_path: Path, monkeypatch, module, argv, names):
    """Before: argparse's usage block and then the error, several lines; now one, exit 2, before any work."""
    from tests.helpers.cli import invoke

    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # configs/gsm8k_equiv.yaml as the docs name it
    _one_error_line(invoke(_module_main(module), argv), *names)


def test_solution_pairs_refuses_a_bad_value_in_one_line_from_python_m(tmp_path: Path):
    """The real ``python -m`` entry point (argv from sys.argv) refuses the same way."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "equiv.data.solution_pairs", str(tmp_path / "s.jsonl"), "--out",
                           str(tmp_path / "o.jsonl"), "--high", "top"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    _one_error_line(done, "high", "top")
    assert not (tmp_path / "o.jsonl").exists()


def test_ensemble_and_crossval_take_the_recipe_as_recipe():
    """``--recipe`` names the trainer recipe (docs/training.md, docs/pruning.md); ``--config`` is a
    file of the command's own options (tests/test_recipe_option.py); crossval's fit arguments after
    ``--`` pass through untouched."""
    from equiv.judge.ensemble import build_parser as ensemble_parser
    from equiv.prune.crossval import parse

    args = ensemble_parser().parse_args(["--recipe", "configs/gsm8k_equiv.yaml", "--members", "DIR/s42/judge",
                                         "DIR/s1/judge", "--out", "DIR/ensemble", "--no-threshold_from_val"])
    assert args.recipe == "configs/gsm8k_equiv.yaml" and args.members == ["DIR/s42/judge", "DIR/s1/judge"]
    assert args.threshold_from_val is False and args.config is None
    args = parse(["--recipe", "configs/gsm8k_equiv.yaml", "--score_apart", "sib.jsonl", "--unseen", "held.jsonl",
                  "--folds", "5", "--out", "/work/cv/recipe_s1", "--", "--trainer.logger=false",
                  "--seed_everything=1", "--data.seed=1"])
    assert args.recipe == Path("configs/gsm8k_equiv.yaml") and args.out == Path("/work/cv/recipe_s1")
    assert (args.score_apart, args.unseen, args.folds) == (["sib.jsonl"], ["held.jsonl"], 5)
    assert [a for a in args.fit_args if a != "--"] == ["--trainer.logger=false", "--seed_everything=1", "--data.seed=1"]
    args = parse(["--recipe", "configs/gsm8k_equiv.yaml", "--score-apart", "sib.jsonl", "--folds", "5", "--out", "cv",
                  "--members", "cv_s42", "cv_s1", "--only", "0", "2"])
    assert args.members == [Path("cv_s42"), Path("cv_s1")] and args.only == [0, 2] and args.fit_args == []
    assert args.score_apart == ["sib.jsonl"] and args.overlay == [] and args.data == []


def test_untuned_and_solution_pairs_read_a_config_file(tmp_path: Path):
    from equiv.cliargs import parse_or_refuse
    from equiv.data.solution_pairs import main as solution_pairs_main
    from equiv.judge.untuned import build_parser as untuned_parser
    from tests.helpers.cli import invoke
    from tests.test_solution_pairs import OTHER, QUESTION, REFERENCE, THIRD

    recipe = tmp_path / "untuned.yaml"
    recipe.write_text("model: allenai/longformer-base-4096\nout: runs/judge/untuned\nseed: 3\n")
    args = parse_or_refuse(untuned_parser(), ["--config", str(recipe), "--seed", "4"])
    assert (args.model, args.out, args.seed, args.max_length) == ("allenai/longformer-base-4096",
                                                                   "runs/judge/untuned", 4, 512)
    solutions = tmp_path / "solutions.jsonl"
    solutions.write_text(json.dumps({"problem": "gsm8k-train-0", "question": QUESTION,
                                     "solutions": [REFERENCE, OTHER, THIRD]}) + "\n")
    holdout = tmp_path / "test.jsonl"
    holdout.write_text(json.dumps({"question": "Another question?", "answer": "#### 1"}) + "\n")
    config = tmp_path / "pairs.yaml"  # one solutions file and one holdout as scalars, as a person writes them
    config.write_text(f"solutions: {solutions}\nout: {tmp_path / 'a.jsonl'}\nholdout: {holdout}\nper_problem: 2\n")
    done = invoke(solution_pairs_main, ["--config", config])
    assert done.returncode == 0, done.stderr
    flags = invoke(solution_pairs_main, [solutions, "--out", tmp_path / "b.jsonl", "--per_problem", 2,
                                         "--holdout", holdout])
    assert flags.returncode == 0 and (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text() != ""
    more = invoke(solution_pairs_main, ["--config", config, "--out", tmp_path / "c.jsonl", "--per_problem", 3])
    assert more.returncode == 0 and len((tmp_path / "c.jsonl").read_text().splitlines()) == 3
