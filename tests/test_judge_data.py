"""MathEquivDataModule and the demo data: labels, grouping, padding, truncation, EM hooks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.data.datamodule import MathEquivDataModule, length_grouped_order
from equiv.data.demo import DEMO_DIR, DEMO_SEEDS, DEMO_SIZES, generate_demo_pairs
from equiv.data.records import PairRecord, read_pair_records
from equiv.errors import InputError


def make_dm(tmp_path: Path, **kwargs) -> MathEquivDataModule:
    kwargs.setdefault("train", str(DEMO_DIR / "train.jsonl"))
    kwargs.setdefault("val", str(DEMO_DIR / "valid.jsonl"))
    return MathEquivDataModule(**kwargs)


def test_shipped_demo_data_is_what_the_generator_makes() -> None:
    for split, n in DEMO_SIZES.items():
        shipped, _ = read_pair_records(DEMO_DIR / f"{split}.jsonl")
        generated = generate_demo_pairs(n, DEMO_SEEDS[split])
        assert [r.to_json() for r in shipped] == [r.to_json() for r in generated]


def test_demo_data_has_all_levels_and_multi_sentence_pairs() -> None:
    records, _ = read_pair_records(DEMO_DIR / "train.jsonl")
    assert {r.result for r in records} == {0, 1, 2, 3, 4}
    multi = [r for r in records if r.extra["multi_sentence"]]
    assert len(multi) > 50
    # Not-equivalent multi-sentence pairs exist: the work EM refinement is for.
    assert any(r.result <= 1 for r in multi)
    positives = sum(r.result >= 3 for r in records)
    negatives = sum(r.result <= 1 for r in records)
    assert 0.35 < positives / (positives + negatives) < 0.65


def test_level_two_dropped_and_labels_follow_the_mapping(tmp_path: Path) -> None:
    dm = make_dm(tmp_path)
    dm.setup("fit")
    assert all(r.result != 2 for r in dm.original_train_records)
    assert dm.train_records == dm.original_train_records
    batch = next(iter(dm.train_dataloader()))
    for index, label in zip(batch["index"].tolist(), batch["labels"].tolist()):
        assert label == (1 if dm.train_records[index].result >= 3 else 0)
    strict = make_dm(tmp_path, label_equivalent=[4], label_not_equivalent=[0, 1, 2])
    strict.setup("fit")
    assert {r.result for r in strict.original_train_records} == {0, 1, 2, 4}


def test_length_grouped_order_is_a_permutation_that_groups_and_reshuffles() -> None:
    lengths = [(i * 37) % 101 for i in range(400)]
    order = length_grouped_order(lengths, 8, seed=3)
    assert sorted(order) == list(range(400))
    assert order == length_grouped_order(lengths, 8, seed=3)
    assert order != length_grouped_order(lengths, 8, seed=4)
    spread = sum(max(lengths[i] for i in order[s : s + 8]) - min(lengths[i] for i in order[s : s + 8]) for s in range(0, 400, 8))
    assert spread < 0.1 * 50 * 100  # random batches of 8 would spread ~80 each


def test_train_loader_changes_with_epoch_and_with_set_train_records(tmp_path: Path) -> None:
    dm = make_dm(tmp_path, batch_size=4)
    dm.setup("fit")
    first = [b["index"].tolist() for b in dm.train_dataloader()]
    again = [b["index"].tolist() for b in dm.train_dataloader()]
    assert first == again  # a pure function of state and epoch
    refined = [r.with_sentences(r.sentence1.split(". ")[0], r.sentence2) for r in dm.original_train_records[:10]]
    dm.set_train_records(refined)
    loader = dm.train_dataloader()
    assert len(loader.dataset) == 10
    assert {s["sentence1"] for s in loader.dataset} == {r.sentence1 for r in refined}
    assert len(dm.original_train_records) > 10


def test_longformer_batches_pad_to_the_attention_window_and_truncate(tmp_path: Path, tiny_longformer: Path) -> None:
    long_pair = {"sentence1": "one two three " * 60, "sentence2": "four " * 5, "result": 0}
    short_pair = {"sentence1": "1 + 1 = 2", "sentence2": "2 = 1 + 1", "result": 4}
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [long_pair, short_pair] * 4) + "\n")
    dm = MathEquivDataModule(train=str(path), val=str(path), model_name=str(tiny_longformer), max_length=40, batch_size=2)
    assert dm.pad_to_multiple_of == 8
    dm.setup("fit")
    lengths = set()
    for batch in dm.train_dataloader():
        width = batch["input_ids"].shape[1]
        assert width % 8 == 0 and width <= 40
        lengths.add(width)
        for row, mask in zip(batch["input_ids"], batch["attention_mask"]):
            tokens = row[mask.bool()].tolist()
            if len(tokens) == 40:  # truncated: the longer side lost tokens, the short side kept all 5
                sep = dm.tokenizer.sep_token_id
                first_sep = tokens.index(sep)
                assert len(tokens) - first_sep - 2 == 5
    assert len(lengths) == 2  # length grouping: short pairs are not padded to the long ones


def test_minilm_pads_without_rounding(tmp_path: Path) -> None:
    dm = make_dm(tmp_path)
    assert dm.pad_to_multiple_of is None


def test_eval_loader_sees_every_labelled_record_once(tmp_path: Path) -> None:
    dm = make_dm(tmp_path, eval_batch_size=7)
    dm.setup("validate")
    seen = [i for b in dm.val_dataloader() for i in b["index"].tolist()]
    assert sorted(seen) == list(range(len(dm.records["val"])))


def test_set_train_records_rejects_empty(tmp_path: Path) -> None:
    dm = make_dm(tmp_path)
    with pytest.raises(ValueError):
        dm.set_train_records([])


def test_skip_invalid_prints_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mixed.jsonl"
    good = {"sentence1": "a = 1", "sentence2": "1 = a", "result": 4}
    path.write_text("\n".join([json.dumps(good), "{oops", json.dumps(dict(good, result=9))]) + "\n")
    dm = MathEquivDataModule(train=str(path), val=str(path), skip_invalid=True)
    dm.setup("fit")
    err = capsys.readouterr().err
    assert "skipped 2 invalid record(s)" in err and "malformed JSON" in err and "field 'result'" in err
    assert len(dm.train_records) == 1 and isinstance(dm.train_records[0], PairRecord)


def _problem_rows(n_problems: int, per_problem: int, prefix: str = "") -> list[dict]:
    return [
        {"id": f"toy-{p}-{prefix}{k}", "sentence1": f"{p} + {k} = {p + k}", "sentence2": f"{k} + {p} = {p + k}", "result": 4 if k % 2 else 0}
        for p in range(n_problems)
        for k in range(per_problem)
    ]


def test_calibration_split_holds_out_whole_problems_from_train_and_train_more(tmp_path: Path) -> None:
    from equiv.data.datamodule import problem_key

    train = tmp_path / "train.jsonl"
    more = tmp_path / "more.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in _problem_rows(60, 2)))
    more.write_text("".join(json.dumps(r) + "\n" for r in _problem_rows(60, 2, prefix="m")))
    dm = make_dm(tmp_path, train=str(train), val=None, train_more=[str(more)], calibration_fraction=0.25)
    dm.setup("fit")
    fit_problems = {problem_key(r) for r in dm.records["train"]}
    cal_problems = {problem_key(r) for r in dm.records["val"]}
    assert fit_problems and cal_problems and not fit_problems & cal_problems
    assert len(dm.records["train"]) + len(dm.records["val"]) == 240
    # train.jsonl and train_more.jsonl pairs of one problem land on the same side.
    assert all(sum(problem_key(r) == key for r in dm.records["val"]) == 4 for key in cal_problems)
    # The split depends on the problems only, not on the seed.
    again = make_dm(tmp_path, train=str(train), val=None, train_more=[str(more)], calibration_fraction=0.25, seed=7)
    again.setup("validate")
    assert [r.source for r in again.records["val"]] == [r.source for r in dm.records["val"]]


def test_calibration_fraction_conflicts_with_a_val_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="calibration_fraction"):
        make_dm(tmp_path, calibration_fraction=0.2)
    with pytest.raises(InputError, match=r"\[0, 1\)"):
        make_dm(tmp_path, val=None, calibration_fraction=1.0)


def test_train_fraction_keeps_whole_problems_nested_and_leaves_calibration_alone(tmp_path: Path) -> None:
    """A learning curve's point: fewer training problems, the same calibration split, and the
    problems kept at a smaller fraction all kept at a larger one (so the points differ by data
    added, not by data swapped)."""
    from equiv.data.datamodule import keep_problems, problem_key

    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in _problem_rows(200, 2)))
    full = make_dm(tmp_path, train=str(train), val=None, calibration_fraction=0.2)
    full.setup("fit")
    kept: dict[float, set[str]] = {}
    for fraction in (0.25, 0.5, 0.75):
        dm = make_dm(tmp_path, train=str(train), val=None, calibration_fraction=0.2, train_fraction=fraction)
        dm.setup("fit")
        assert [r.source for r in dm.records["val"]] == [r.source for r in full.records["val"]]
        problems = {problem_key(r) for r in dm.records["train"]}
        assert all(sum(problem_key(r) == key for r in dm.records["train"]) == 2 for key in problems)
        n_full = len({problem_key(r) for r in full.records["train"]})
        assert abs(len(problems) - fraction * n_full) < 0.15 * n_full
        assert len(dm.train_dataloader().dataset) == len(dm.records["train"])
        kept[fraction] = problems
    assert kept[0.25] < kept[0.5] < kept[0.75]
    assert keep_problems(full.records["train"], 1.0) == full.records["train"]
    for bad in (0.0, 1.5):
        with pytest.raises(InputError, match="train_fraction"):
            make_dm(tmp_path, train=str(train), val=None, train_fraction=bad)
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps(_problem_rows(1, 2)[0]) + "\n")
    with pytest.raises(InputError, match="keeps none"):
        make_dm(tmp_path, train=str(one), val=str(one), train_fraction=1e-9).setup("fit")


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_pairs_holding_unicode_line_separators_read_back(tmp_path: Path, separator: str) -> None:
    """JSON allows these raw inside strings and the writer keeps them raw (ensure_ascii=False);
    str.splitlines() would cut the line there."""
    from equiv.data.records import write_pair_records

    records = [PairRecord(f"step one{separator}continues", "step two", 4), PairRecord("a", f"b{separator}", 0)]
    path = tmp_path / "pairs.jsonl"
    write_pair_records(records, path)
    assert separator in path.read_text(encoding="utf-8")
    back = read_pair_records(path)[0]
    assert [(r.sentence1, r.sentence2, r.result) for r in back] == [(r.sentence1, r.sentence2, r.result) for r in records]
