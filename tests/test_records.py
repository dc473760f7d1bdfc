"""MathEquiv record reading: JSON lists, JSONL, dataset folders, the hub path, and every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from equiv.data.records import LabelMapping, PairRecord, load_pair_records, problem_key, read_pair_records
from equiv.errors import InputError

GOOD = {"sentence1": "2 + 3 = 5", "sentence2": "3 + 2 = 5", "result": 4, "reasoning_step": 1, "source_id": "x"}


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_json_list_and_jsonl_read_the_same_with_extra_fields_kept(tmp_path: Path) -> None:
    rows = [GOOD, dict(GOOD, result=0, sentence2="2 * 3 = 6")]
    (tmp_path / "a.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    write_jsonl(tmp_path / "a.jsonl", rows)
    from_list, _ = load_pair_records(tmp_path / "a.json")
    from_lines, _ = load_pair_records(tmp_path / "a.jsonl")
    assert [r.to_json() for r in from_list] == [r.to_json() for r in from_lines]
    assert from_list[0].extra == {"source_id": "x"}
    assert from_list[1].result == 0 and from_list[1].source.endswith("a.json:2")


def test_folder_with_split_files(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "train.jsonl", [GOOD])
    write_jsonl(tmp_path / "valid.jsonl", [GOOD, GOOD])
    assert len(load_pair_records(tmp_path, split="valid")[0]) == 2
    assert len(load_pair_records(tmp_path, split="train")[0]) == 1


def test_dataset_folder_goes_through_load_dataset_and_validates_rows(tmp_path: Path) -> None:
    """A folder without <split>.jsonl is handed to datasets.load_dataset (the hub code path)."""
    folder = tmp_path / "ds"
    folder.mkdir()
    write_jsonl(folder / "pairs.jsonl", [GOOD, GOOD, dict(GOOD, result=7)])
    with pytest.raises(InputError) as err:
        load_pair_records(folder, split="train")
    assert "[train]:3" in str(err.value) and "field 'result'" in str(err.value)
    records, report = load_pair_records(folder, split="train", skip_invalid=True)
    assert len(records) == 2 and report.total == 1


def test_unreachable_hub_dataset_is_a_clear_error() -> None:
    with pytest.raises(InputError) as err:
        load_pair_records("no-such-owner-xyz/no-such-dataset", split="valid", name="{split}")
    assert "could not load dataset" in str(err.value) and "'valid'" in str(err.value)


def test_missing_local_file() -> None:
    with pytest.raises(InputError, match="file not found"):
        load_pair_records("data/missing.jsonl")


@pytest.mark.parametrize(
    ("line", "field", "message"),
    [
        ("{not json", None, "malformed JSON"),
        (json.dumps({"sentence1": "a", "result": 3}), "sentence2", "is missing"),
        (json.dumps(dict(GOOD, result=5)), "result", "must be in 0-4"),
        (json.dumps(dict(GOOD, result=-1)), "result", "must be in 0-4"),
        (json.dumps(dict(GOOD, result="high")), "result", "must be an integer"),
        (json.dumps(dict(GOOD, sentence1="   ")), "sentence1", "is empty"),
        (json.dumps(dict(GOOD, sentence2=3)), "sentence2", "must be a string"),
    ],
)
def test_each_bad_record_names_file_line_and_field(tmp_path: Path, line: str, field: str | None, message: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [GOOD, line])
    with pytest.raises(InputError) as err:
        read_pair_records(path)
    text = str(err.value)
    assert text.startswith(f"{path}:2: ")
    assert message in text
    if field:
        assert f"field '{field}'" in text
    records, report = read_pair_records(path, skip_invalid=True)
    assert len(records) == 1 and report.total == 1
    assert "skipped 1 invalid record" in report.summary(path)


def test_label_mapping_defaults_and_errors() -> None:
    mapping = LabelMapping()
    assert [mapping.label(level) for level in range(5)] == [0, 0, None, 1, 1]
    assert LabelMapping.from_dict(mapping.to_dict()) == mapping
    with pytest.raises(InputError):
        LabelMapping((2, 3), (3, 0))
    with pytest.raises(InputError):
        LabelMapping((5,), (0,))


def test_label_mapping_binary_pairs_keeps_order_and_drops_unmapped_levels() -> None:
    records = [PairRecord("a", "b", 4), PairRecord("c", "d", 2), PairRecord("e", "f", 1), PairRecord("g", "h", 3)]
    assert LabelMapping().binary_pairs(records) == ([("a", "b"), ("e", "f"), ("g", "h")], [1, 0, 1])
    assert LabelMapping((4,), (0, 1, 2, 3)).binary_pairs(records) == ([("a", "b"), ("c", "d"), ("e", "f"), ("g", "h")], [1, 0, 0, 0])


def test_the_problem_key_is_the_problem_field_else_the_id_less_its_pair_part(tmp_path):
    """Sibling pairs of two runs carry the run's tag in the id and the problem in ``problem``: the
    same problem's pairs of both runs must share a key (one fold in cross-validation by problem)."""
    rows = [{"id": "mcts_base:gsm8k-7-s0n1c2c3", "problem": "gsm8k-7", "sentence1": "a", "sentence2": "b", "result": 4},
            {"id": "mcts_pruned:gsm8k-7-s0n1c2c3", "problem": "gsm8k-7", "sentence1": "a", "sentence2": "c", "result": 0},
            {"id": "gsm8k-test-12-m40", "sentence1": "a", "sentence2": "d", "result": 0},
            {"question": "How many?", "sentence1": "a", "sentence2": "e", "result": 0}]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    records, _ = read_pair_records(path)
    assert [problem_key(r) for r in records] == ["gsm8k-7", "gsm8k-7", "gsm8k-test-12", "How many?"]
