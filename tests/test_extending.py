"""docs/contributing.md, "Extending equiv": the worked examples run as written.

Each example is one module and one registration. This test executes the example's code from the
guide (so the guide cannot drift from what works), drives the registered entry through the real
entry points -- ``search_cli.py eval`` with scripted engines through its ``engine_factory`` seam,
``search_cli.py pairs``, ``build_policy`` -- and unregisters it again. It also keeps the
registries and the docs' tables of them equal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pytest

from equiv.errors import InputError
from equiv.prune import STRATEGIES, build_judge
from equiv.registry import Registry
from equiv.search.algorithms import ALGORITHMS
from equiv.search.cli import eval_main
from equiv.search.policies import BACKENDS, PolicyConfig, build_policy
from equiv.search.rewards import REWARDS
from equiv.search.runner import Engines
from equiv.search.types import StepRequest
from tests.helpers.cli import search_cli
from tests.helpers.paths import REPO_ROOT
from tests.helpers.runs import base_args
from tests.helpers.scripted import KeyedReward, SeededPolicy

GUIDE = REPO_ROOT / "docs" / "contributing.md"


def guide_examples() -> dict[str, str]:
    """The ``py`` blocks of the guide's "Extending equiv" section, by the module they name."""
    text = GUIDE.read_text()
    section = text[text.index("## Extending equiv"):]
    section = section[: section.index("\n## ", 1)]
    names = re.findall(r"in `(\w+)\.py`:\n\n```py\n(.*?)```", section, flags=re.S)
    return {name: code for name, code in names}


@pytest.fixture
def example(request) -> Iterator[dict]:
    """Run one guide example (its registrations included); unregister what it added."""
    name, registry = request.param
    before = set(registry.names())
    namespace: dict = {"__name__": name}
    exec(compile(guide_examples()[name], f"{GUIDE}:{name}.py", "exec"), namespace)
    added = set(registry.names()) - before
    assert len(added) == 1, f"the {name}.py example registers one entry, got {sorted(added)}"
    try:
        yield namespace
    finally:
        for entry in added:
            registry.remove(entry)
        assert set(registry.names()) == before


def test_the_guide_has_one_example_per_extension_point():
    assert set(guide_examples()) == {"greedy", "first_word", "canned"}


def scripted_with_real_judge(init) -> Engines:
    """Scripted policy and PRM, the judge the config names built by the real build_judge."""
    return Engines(SeededPolicy(), KeyedReward(), build_judge(init.pruner), init.pruner)


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("example", [("greedy", ALGORITHMS)], indirect=True)
def test_a_new_algorithm_runs_through_the_eval_cli(example, tmp_path):
    args = base_args(tmp_path, n=3)
    args[args.index("--algo") + 1] = "greedy"
    assert "--algo" in args and "greedy" in args
    assert eval_main([*args, "--pruner.strategy", "formula", "--run.save_trees", "true"],
                     engine_factory=scripted_with_real_judge) == 0
    recs = records(tmp_path / "run")
    assert [r["algo"] for r in recs] == ["greedy"] * 3
    assert all(r["error"] is None and r["path"] and r["generated_tokens"] > 0 for r in recs)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algo"] == "greedy" and summary["complete"] and summary["problems"] == 3


def test_an_unregistered_algorithm_is_one_line_naming_the_registered_ones(tmp_path):
    args = base_args(tmp_path, n=1)
    args[args.index("--algo") + 1] = "greedy"
    res = search_cli("eval", *args)
    assert res.returncode == 2
    assert "unknown algorithm 'greedy'; choose from " + ", ".join(ALGORITHMS.names()) in res.stderr


@pytest.mark.parametrize("example", [("first_word", STRATEGIES)], indirect=True)
def test_a_new_strategy_prunes_in_search_and_scores_pairs(example, tmp_path):
    assert eval_main([*base_args(tmp_path, n=3), "--pruner.strategy", "first_word"],
                     engine_factory=scripted_with_real_judge) == 0
    recs = records(tmp_path / "run")
    assert all(r["pruner"] == "first_word" and r["error"] is None for r in recs)
    assert sum(r["pruned"] for r in recs) > 0  # "add 1" and "add 3" start alike
    assert all(r["judge_calls"] == 0 for r in recs)  # a rule: no model forward

    res = search_cli("pairs", "--data", REPO_ROOT / "equiv/data/demo_data/valid.jsonl", "--strategy", "first_word",
                     "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["strategy"] == "first_word"
    refused = search_cli("pairs", "--data", REPO_ROOT / "equiv/data/demo_data/valid.jsonl",
                         "--strategy", "first_word", "--threshold", "0.5")
    assert refused.returncode == 2 and "0/1 rule and takes no threshold" in refused.stderr


@pytest.mark.parametrize("example", [("canned", BACKENDS)], indirect=True)
def test_a_new_backend_is_built_by_build_policy(example):
    policy = build_policy(PolicyConfig(backend="canned", model="none", prompt_format="plain"))
    (cands,) = policy.generate([StepRequest("What is 2 + 3?", (), n=2, seed=1)])
    assert [c.text for c in cands] == ["The answer is 5."] * 2
    assert all(c.finished and not c.truncated and c.num_tokens == 6 for c in cands)


def test_an_entry_is_registered_once():
    entry = ALGORITHMS.get("mcts")
    ALGORITHMS.add(entry)  # the same entry again is a no-op (a module imported twice)
    with pytest.raises(ValueError, match="already registered"):
        ALGORITHMS.add(type(entry)("mcts", entry.search, "another"))
    with pytest.raises(InputError, match="unknown strategy 'fuzzy'; choose from none, levenshtein"):
        STRATEGIES.get("fuzzy")


# -- the docs' table of registered entries -------------------------------------------------------
REGISTRIES: dict[str, Registry] = {
    "algorithm": ALGORITHMS, "strategy": STRATEGIES, "backend": BACKENDS, "reward model": REWARDS,
}


def registry_table() -> str:
    """The table docs/ARCHITECTURE.md shows under "Extension points", from the registries."""
    rows = ["| extension point | name | what it is |", "|---|---|---|"]
    for kind, registry in REGISTRIES.items():
        rows += [f"| {kind} | `{e.name}` | {e.summary} |" for e in registry]
    return "\n".join(rows)


def test_the_architecture_page_lists_every_registered_entry():
    page = (REPO_ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert registry_table() in page, "docs/ARCHITECTURE.md, Extension points: paste\n" + registry_table()


@pytest.mark.parametrize("doc, heading, registry", [
    ("pruning.md", "## Strategies and their thresholds", STRATEGIES),
    ("search.md", "### Policy backends", BACKENDS),
])
def test_the_guides_tables_name_every_registered_entry(doc, heading, registry):
    text = (REPO_ROOT / "docs" / doc).read_text()
    section = text[text.index(heading):]
    rows = re.findall(r"^\| `(\w+)`", section[: section.index("\n#", 1)], flags=re.M)
    assert set(rows) == {e.name for e in registry if e.name != "none"}


@pytest.mark.parametrize("name", ["levenshtein", "formula"])
def test_a_strategy_entry_declares_what_its_judge_is(name):
    from equiv.prune import PrunerConfig

    entry = STRATEGIES.get(name)
    judge = build_judge(PrunerConfig(strategy=name))
    assert judge.name == name and judge.learned == entry.learned
