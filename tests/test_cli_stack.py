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
    from_file = search_cli("pairs", "--config", recipe)
    assert from_file.returncode == 0, from_file.stderr
    flags = search_cli("pairs", "--data", crafted, "--strategy", "levenshtein", "--threshold", "0.5")
    assert _last_json(from_file.stdout) == _last_json(flags.stdout)
    overridden = search_cli("pairs", "--config", recipe, "--pruner.threshold", "0.97")
    assert overridden.returncode == 0 and _last_json(overridden.stdout)["threshold"] == 0.97


def test_pairs_comma_separated_guard_rules_still_parse(crafted):  # noqa: F811
    done = search_cli("pairs", "--data", crafted, "--strategy", "levenshtein", "--guard",
                      "different_numbers,different_units")
    assert done.returncode == 0, done.stderr
    assert _last_json(done.stdout)["guard"] == ["different_numbers", "different_units"]


@pytest.mark.parametrize("argv, names", [
    (["--pruner.threshold", "high"], "pruner.threshold"),
    (["--strategy", "levenshtein", "--batch-size", "many"], "pruner.batch_size"),
    (["--strategy", "none"], "pruner.strategy"),
    (["--strategy", "nonesuch"], "strategy"),
    (["--strategy", "exact", "--frobnicate"], "unrecognized arguments"),
])
def test_pairs_bad_values_are_one_line(crafted, argv, names):  # noqa: F811
    done = search_cli("pairs", "--data", crafted, *argv)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and names in lines[0], lines


def test_pairs_without_data_is_one_line(tmp_path: Path):
    done = search_cli("pairs", "--strategy", "exact")
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
