"""Common random numbers: a request's seed depends on the prefix it asks for, not on the order a
search asks in, so a pruned and an unpruned search that reach the same steps get the same
candidates (docs/search.md, "Seeds"). The real CLI, the real transformers backend, the tiny
random-init policy; the two arms' tree files say what each prefix was given."""

from __future__ import annotations

import json
from pathlib import Path


from equiv.search.cli import eval_main
from equiv.search.expansion import SeedStream


def arm_args(out: Path, data: Path, policy: str, prm: str, *extra: str) -> list[str]:
    return ["--algo", "mcts", "--out", str(out), "--data.dataset", "gsm8k", "--data.path", str(data),
            "--policy.backend", "transformers", "--policy.model", policy, "--reward.model", prm,
            "--policy.max_new_tokens", "24", "--search.width", "4", "--search.max_depth", "3",
            "--search.num_simulations", "4", "--run.progress", "false", "--run.save_trees", "true", *extra]


def expansions(tree_file: Path) -> dict[tuple[str, ...], list[str]]:
    """Each expanded prefix (the steps so far) -> the candidates it was given, in order."""
    nodes = {n["id"]: n for n in json.loads(tree_file.read_text())["nodes"]}

    def steps(node_id: int) -> tuple[str, ...]:
        out: list[str] = []
        while nodes[node_id]["parent"] is not None:
            out.append(nodes[node_id]["text"])
            node_id = nodes[node_id]["parent"]
        return tuple(reversed(out))

    children: dict[tuple[str, ...], list[str]] = {}
    for node in sorted(nodes.values(), key=lambda n: n["id"]):
        if node["parent"] is not None:
            children.setdefault(steps(node["parent"]), []).append(node["text"])
    return children


def test_a_pruned_and_an_unpruned_arm_draw_the_same_candidates_for_the_same_prefix(tmp_path, tiny_models,
                                                                                  two_gsm8k_problems):
    policy, prm = tiny_models
    assert eval_main(arm_args(tmp_path / "base", two_gsm8k_problems, policy, prm, "--pruner.strategy", "none",
                              "--search.dedupe_exact", "false")) == 0
    assert eval_main(arm_args(tmp_path / "pruned", two_gsm8k_problems, policy, prm, "--pruner.strategy", "levenshtein",
                              "--pruner.threshold", "0.1")) == 0
    pruned_records = [json.loads(x) for x in (tmp_path / "pruned" / "results.jsonl").read_text().splitlines()]
    assert sum(r["pruned"] for r in pruned_records) > 0  # the arms' trees really differ
    later = 0
    for tree in sorted((tmp_path / "base" / "trees").glob("*.json")):
        base, pruned = expansions(tree), expansions(tmp_path / "pruned" / "trees" / tree.name)
        shared = set(base) & set(pruned)
        assert () in shared  # the root expansion
        for prefix in shared:
            assert base[prefix] == pruned[prefix], prefix
        later += len(shared) - 1
    assert later > 0  # prefixes past the root that both arms asked for, after their paths parted


def test_a_seed_depends_on_the_prefix_and_its_occurrence_not_on_order():
    first, second = SeedStream(0, "p"), SeedStream(0, "p")
    a, b = ("x",), ("y",)
    seeds_first = [first.next(a), first.next(b), first.next(a)]
    seeds_second = [second.next(b), second.next(a), second.next(a)]
    assert seeds_first[0] == seeds_second[1] and seeds_first[1] == seeds_second[0] and seeds_first[2] == seeds_second[2]
    assert len(set(seeds_first)) == 3  # a repeat of a prefix (a retry) is a fresh sample
    assert SeedStream(1, "p").next(a) != seeds_first[0] and SeedStream(0, "q").next(a) != seeds_first[0]
    assert SeedStream(0, "p").next(("x", "")) != SeedStream(0, "p").next(("x",))  # step boundaries count
    assert SeedStream(0, "p").next(a, purpose="rollout") != seeds_first[0]
