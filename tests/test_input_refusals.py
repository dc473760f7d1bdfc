"""One clear line instead of a silent wrong answer or a traceback (issue #44, items 4, 7 and 8):
an incomplete judge export, unreadable weights, a crafted ``--ckpt_path``, a missing local model,
JSON nested too deep, ``--output`` naming a folder, duplicate keys, invisible text, a missing
tree file, an empty run in ``compare``, and where fit's logs go. Real tiny judges, the real CLIs
in this process (tests/helpers/cli.py explains why, and gives them a shell's UTF-8 streams); a
real ``trainer_cli.py fit`` process in the slow stage (the logger test), and a real
``search_cli.py pairs`` process with a judge in tests/test_front.py."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from equiv.errors import InputError
from equiv.judge.export import load_judge
from tests.helpers.cli import Result, invoke
from tests.helpers.cli import search_cli as _search
from tests.helpers.cli import trainer_cli as _train
from tests.helpers.judges import make_tiny_judge, tiny_fit_argv

REPO = Path(__file__).resolve().parents[1]
DEMO_PAIRS = REPO / "equiv" / "data" / "demo_data" / "valid.jsonl"


def _one_error_line(result: Result) -> str:
    assert result.returncode == 2, (result.stdout[-500:], result.stderr[-800:])
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ") or "Traceback" in line]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-1500:]
    return lines[0]


def _pairs(*args: object) -> Result:
    from equiv.prune.cli import pairs_main

    return invoke(pairs_main, list(args))


@pytest.fixture()
def judge(tmp_path: Path) -> Path:
    """A tiny judge of the test's own, for the tests that damage it."""
    return make_tiny_judge(tmp_path / "judge")


@pytest.fixture(scope="module")
def whole_judge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny judge built once for the tests that only read it (a fit writes its export elsewhere)."""
    return make_tiny_judge(tmp_path_factory.mktemp("whole") / "judge")


# -- item 4: a judge export must be whole ----------------------------------------------------------
def test_a_judge_without_its_tokenizer_is_refused_by_the_cli(judge: Path):
    """Before: AutoTokenizer fell back to a 5-word vocabulary, every word [UNK], 72 false merges
    of 75 demo pairs, exit 0. (The command in this process; a real ``search_cli.py pairs`` process
    with a judge runs in tests/test_front.py.)"""
    for path in judge.iterdir():
        if path.name.startswith(("tokenizer", "vocab", "special_tokens")):
            path.unlink()
    done = _pairs("--strategy", "model", "--model", str(judge), "--data", str(DEMO_PAIRS))
    line = _one_error_line(done)
    assert f"{judge}: field 'model': incomplete judge export, missing: tokenizer_config.json" in line
    assert "vocabulary" in line and done.stdout == ""


@pytest.mark.parametrize(("remove", "named"), [
    (("model.safetensors",), "weights (one of model.safetensors"),
    (("vocab.txt", "tokenizer.json"), "the tokenizer's vocabulary"),
    ((), "'equiv' settings block"),
])
def test_each_missing_part_of_an_export_is_named(tmp_path: Path, remove, named):
    judge = make_tiny_judge(tmp_path / "judge", settings=None if not remove else
                            {"max_length": 96, "decision_threshold": 0.5})
    for name in remove:
        (judge / name).unlink(missing_ok=True)  # a tokenizer saves one vocabulary file or another
    with pytest.raises(InputError, match="incomplete judge export") as err:
        load_judge(judge)
    assert named in str(err.value) and "\n" not in str(err.value)


def test_settings_without_a_policy_are_incomplete(tmp_path: Path):
    judge = make_tiny_judge(tmp_path / "judge", settings={"max_length": 96})
    with pytest.raises(InputError, match="missing: equiv.policy in config.json"):
        load_judge(judge)


# -- item 7: tracebacks that become one line -------------------------------------------------------
@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_truncated_or_empty_safetensors_is_one_line(judge: Path, damage: str):
    weights = judge / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")
    line = _one_error_line(_pairs("--strategy", "model", "--model", judge, "--data", DEMO_PAIRS))
    assert str(judge) in line
    assert ("SafetensorError" in line) if damage == "truncated" else ("model.safetensors is empty" in line)


class _Runs:  # what a crafted pickle names: refused, never called
    def __reduce__(self):
        return (print, ("crafted code ran",))


def test_a_pickled_pytorch_model_bin_is_one_line_and_runs_nothing(judge: Path):
    (judge / "model.safetensors").unlink()
    (judge / "pytorch_model.bin").write_bytes(pickle.dumps({"weight": _Runs()}))
    result = _pairs("--strategy", "model", "--model", judge, "--data", DEMO_PAIRS)
    line = _one_error_line(result)
    assert "cannot load the judge's weights" in line and "crafted code ran" not in result.stdout + result.stderr


def test_fit_with_a_crafted_ckpt_path_is_one_line(tmp_path: Path, whole_judge: Path):
    from equiv.judge.cli import main

    crafted = tmp_path / "crafted.ckpt"
    crafted.write_bytes(pickle.dumps({"state_dict": _Runs()}, protocol=2))  # GLOBAL builtins.print
    train = tmp_path / "train.jsonl"
    shutil.copy(REPO / "equiv" / "data" / "demo_data" / "train.jsonl", train)
    result = invoke(main, tiny_fit_argv(whole_judge, train, tmp_path / "run", f"--ckpt_path={crafted}"))
    line = _one_error_line(result)
    assert f"{crafted}: field 'ckpt_path': refused: the checkpoint names" in line
    assert "crafted code ran" not in result.stdout + result.stderr and not (tmp_path / "run" / "judge").exists()


def test_a_missing_local_policy_model_is_one_line(tmp_path: Path, capsys):
    from equiv.search.cli import eval_main
    from tests.helpers.runs import base_args
    from tests.helpers.scripted import scripted_factory

    with pytest.raises(SystemExit) as exc:
        eval_main(base_args(tmp_path) + ["--policy.model", "/nonexistent"], engine_factory=scripted_factory)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["error: /nonexistent: field 'policy.model': no such file or directory (a local model path)"]
    assert not (tmp_path / "run").exists()  # refused before the run directory is made


def _deep(depth: int = 100_000) -> str:
    return '{"sentence1": ' + "[" * depth + "]" * depth + ', "sentence2": "b", "result": 4}'


def test_json_nested_too_deep_is_one_line_in_pairs_and_in_fit(tmp_path: Path, whole_judge: Path):
    data = tmp_path / "deep.jsonl"
    data.write_text(DEMO_PAIRS.read_text().splitlines()[0] + "\n" + _deep() + "\n")
    line = _one_error_line(_pairs("--strategy", "formula", "--data", data))
    assert f"{data}:2: nested too deeply to read" in line

    from equiv.judge.cli import main

    line = _one_error_line(invoke(main, tiny_fit_argv(whole_judge, data, tmp_path / "run")))
    assert f"{data}:2: nested too deeply to read" in line


def test_pairs_output_naming_a_folder_is_refused_before_the_scoring(tmp_path: Path):
    folder = tmp_path / "out"
    folder.mkdir()
    result = _pairs("--strategy", "formula", "--data", DEMO_PAIRS, "--output", folder)
    line = _one_error_line(result)
    assert f"{folder}: --output names a directory, not a file" in line
    assert result.stdout == ""  # nothing was scored or printed first


# -- item 8: small silent ones ---------------------------------------------------------------------
def test_a_data_line_with_a_duplicate_key_is_refused(tmp_path: Path):
    data = tmp_path / "dup.jsonl"
    data.write_text(DEMO_PAIRS.read_text().splitlines()[0] + "\n"
                    + '{"sentence1": "a", "sentence2": "b", "result": 4, "result": 0}\n')
    line = _one_error_line(_pairs("--strategy", "formula", "--data", data))
    assert f"{data}:2: key 'result' occurs twice in one object" in line


def test_a_sentence_of_zero_width_spaces_is_refused(tmp_path: Path):
    data = tmp_path / "zw.jsonl"
    data.write_text(json.dumps({"sentence1": "\u200b\u200b\u2060", "sentence2": "b", "result": 4}) + "\n")
    line = _one_error_line(_pairs("--strategy", "formula", "--data", data))
    assert f"{data}:1: field 'sentence1': holds no visible character" in line


def test_report_names_a_missing_tree_file(tmp_path: Path, capsys):
    import search_cli
    from equiv.search.cli import eval_main
    from tests.helpers.runs import base_args
    from tests.helpers.scripted import scripted_factory

    assert eval_main(base_args(tmp_path, n=2) + ["--run.save_trees", "true"], engine_factory=scripted_factory) == 0
    run = tmp_path / "run"
    named = json.loads((run / "results.jsonl").read_text().splitlines()[0])["tree"]
    (run / named).unlink()
    capsys.readouterr()
    assert search_cli.main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    captured = capsys.readouterr()
    assert "embedded trees for 1 of 1 problem(s)" in captured.out  # before: the same line, alone
    assert f"missing tree files: 1 named in results.jsonl do not exist (e.g. {run / named})" in captured.err


def test_compare_names_a_run_without_records(tmp_path: Path, capsys):
    from equiv.report.compare import compare_main
    from equiv.search.cli import eval_main
    from tests.helpers.runs import base_args
    from tests.helpers.scripted import scripted_factory

    assert eval_main(base_args(tmp_path, n=2), engine_factory=scripted_factory) == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "results.jsonl").write_text("")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        compare_main([str(tmp_path / "run"), str(empty)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {empty}: holds no records yet (results.jsonl is empty: the run finished no problem); nothing to compare"


@pytest.mark.parametrize("kind", ["policy", "prm"])
def test_a_damaged_policy_or_prm_directory_is_one_line(tmp_path: Path, kind: str):
    """A truncated model.safetensors in a local policy or PRM: SafetensorError, as one line
    naming the setting (not a traceback from inside transformers)."""
    from equiv.search.tiny import resolve_tiny

    model = Path(resolve_tiny(f"tiny:{tmp_path / kind}", kind))
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    if kind == "policy":
        from equiv.search.policies import PolicyConfig, build_policy

        with pytest.raises(InputError) as err:
            build_policy(PolicyConfig(model=str(model), backend="transformers", device="cpu"))
        field = "policy.model"
    else:
        from equiv.search.rewards import RewardConfig, build_reward_model

        with pytest.raises(InputError) as err:
            build_reward_model(RewardConfig(model=str(model), device="cpu"))
        field = "reward.model"
    message = str(err.value)
    assert message.startswith(f"{model}: field '{field}': cannot load the ") and "SafetensorError" in message
    assert "\n" not in message


@pytest.mark.parametrize(("option", "real_process"), [
    (None, False),  # no save_dir: the logs follow --trainer.default_root_dir
    ("--trainer.logger.save_dir", False),
    ("--trainer.logger.init_args.save_dir", False),
    # a real trainer_cli.py fit process (about 9 s of CPU): the slow stage's, beside
    # test_judge_cli.py's fast_dev_run process; the default suite runs the same argv in process
    pytest.param("--trainer.logger.save_dir", True, marks=pytest.mark.slow),
])
def test_a_logger_save_dir_given_in_either_spelling_takes_effect(tmp_path: Path, whole_judge: Path, demo_val_small: Path,
                                                                  option: str | None, real_process: bool, monkeypatch):
    """Before (issue #53, item 10): the short spelling was overridden without a word by a parser
    link from --trainer.default_root_dir (the logs went under the root), and the long one was
    refused. Now both put the logs (and Lightning's checkpoints) where they say, in a real fit.
    Without either, the logs follow --trainer.default_root_dir: configs/demo.yaml fixed the
    logger's save_dir to outputs/demo, so the root dir moved the checkpoints and not the logs (a
    probe wrote 270 MB into the checkout); the fit runs in an empty folder to show nothing lands there."""
    demo = REPO / "equiv" / "data" / "demo_data"
    root, logs = tmp_path / "root", tmp_path / "logs"
    argv = ["fit", "--config", str(REPO / "configs" / "demo.yaml"), f"--trainer.default_root_dir={root}",
            *([f"{option}={logs}"] if option else []),
            f"--model.model_name={whole_judge}", "--trainer.max_epochs=1", "--trainer.limit_train_batches=2",
            "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false",
            f"--data.train={demo / 'train.jsonl'}", f"--data.val={demo_val_small}"]
    if option is None:
        (tmp_path / "cwd").mkdir()
        monkeypatch.chdir(tmp_path / "cwd")  # a logger that ignored the root dir would write here
    else:
        monkeypatch.chdir(REPO)
    if real_process:
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        ran = subprocess.run([sys.executable, "trainer_cli.py", *argv], env=env, capture_output=True, text=True,
                             timeout=600)
        done = Result(ran.returncode, ran.stdout, ran.stderr)
    else:
        done = _train(*argv)
    assert done.returncode == 0, done.stderr[-1500:]
    assert (root / "judge" / "config.json").is_file()  # the export stays at the root
    if option is None:
        assert list((root / "logs").glob("version_*/metrics.csv"))
        assert list((tmp_path / "cwd").iterdir()) == []
        return
    assert list(logs.glob("logs/version_*/metrics.csv")), sorted(str(p) for p in tmp_path.rglob("*"))[:20]
    assert not (root / "logs").exists()


# -- issue #53, item 3: text that cannot be encoded -------------------------------------------------
@pytest.mark.parametrize("strategy", ["model", "embedding"])
def test_a_lone_surrogate_in_a_pairs_file_is_one_line(tmp_path: Path, whole_judge: Path, strategy):
    """Before: the tokenizer's TypeError as a traceback. The reader refuses it for every command."""
    rows = [json.loads(line) for line in DEMO_PAIRS.read_text().splitlines()[:3]]
    bad = tmp_path / "bad.jsonl"
    lines = [json.dumps(r) for r in rows]
    lines[1] = lines[1].replace('"sentence2": "', '"sentence2": "\\ud800', 1)  # escaped in the file, as JSON allows
    assert "\\ud800" in lines[1]
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    model = ["--model", str(whole_judge)] if strategy == "model" else []
    line = _one_error_line(_search("pairs", "--strategy", strategy, *model, "--data", bad))
    assert f"{bad}:2: field 'sentence2': holds U+D800 at character 0, a lone surrogate" in line


# -- issue #53 item 9: an integer longer than Python converts ---------------------------------------
def _long_int_line(digits: int = 5000) -> str:
    return '{"sentence1": "a", "sentence2": "b", "result": 4, "reasoning_step": ' + "7" * digits + "}"


def test_a_5000_digit_integer_is_one_line_in_pairs_and_in_fit(tmp_path: Path, whole_judge: Path, monkeypatch):
    """``json.loads`` raises a bare ValueError ("Exceeds the limit (4300 digits) for integer string
    conversion") from inside the decoder: it was a traceback in ``pairs`` and in ``fit``."""
    monkeypatch.chdir(REPO)  # tiny_fit_argv names configs/demo.yaml as the shell in the checkout does
    data = tmp_path / "long.jsonl"
    data.write_text("".join(DEMO_PAIRS.read_text().splitlines(keepends=True)[:12]) + _long_int_line() + "\n")
    for done in (_search("pairs", "--strategy", "formula", "--data", data),
                 _train(*tiny_fit_argv(whole_judge, data, tmp_path / "run"))):
        assert f"{data}:13: holds an integer with more than 4300 digits" in _one_error_line(done)


def test_every_jsonl_reader_names_the_line_of_a_5000_digit_integer(tmp_path: Path):
    from equiv.data.humaneval import read_humaneval
    from equiv.data.problems import read_jsonl_objects
    from equiv.rundir.io import read_json_file, read_json_lines

    data = tmp_path / "long.jsonl"
    data.write_text("\n" + _long_int_line() + "\n")  # line 1 blank: each reader skips it
    for read in (read_json_lines, lambda p: list(read_jsonl_objects(p)), read_humaneval):
        with pytest.raises(InputError, match=r"long.jsonl:2: holds an integer with more than 4300 digits"):
            read(data)
    whole = tmp_path / "long.json"
    whole.write_text(_long_int_line())
    with pytest.raises(InputError, match=r"long.json: holds an integer with more than 4300 digits"):
        read_json_file(whole)


# -- issue #53 item 9: a YAML alias bomb in a config ------------------------------------------------
BOMB = "".join(f"{name}: &{name} [{', '.join([prev] * 9)}]\n" for name, prev in
               zip("abcdefghi", ['"lol"', "*a", "*b", "*c", "*d", "*e", "*f", "*g", "*h"]))  # 9**9 strings


@pytest.mark.parametrize("argv", [
    ["trainer_cli.py", "fit", "--config", "configs/demo.yaml", "--config", "{bomb}"],
    ["trainer_cli.py", "fit", "--config", "configs/demo.yaml", "--data={bomb}"],  # a group's config file
    ["search_cli.py", "eval", "--config", "{bomb}", "--out", "{tmp}/run"],
])
def test_a_yaml_alias_bomb_is_refused_in_one_line_naming_the_file(tmp_path: Path, argv: list[str], monkeypatch):
    """Before: ``fit`` hung and took 4 GB copying the aliases out (a few hundred bytes of YAML)."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    monkeypatch.chdir(REPO)  # configs/demo.yaml, as the shell in the checkout names it
    script, *rest = (a.format(bomb=bomb, tmp=tmp_path) for a in argv)
    line = _one_error_line(_train(*rest) if script == "trainer_cli.py" else _search(*rest))
    assert f"{bomb}: expands to more than 100,000 YAML values" in line


def test_config_size_counts_aliases_once_per_use_and_refuses_a_cycle(tmp_path: Path):
    from equiv.errors import check_config_files

    shared = tmp_path / "shared.yaml"
    shared.write_text("base: &base {lr: 1.0e-4, layers: [1, 2, 3]}\nfit: *base\nval: *base\n")
    check_config_files(["--config", str(shared)])  # an ordinary use of anchors passes
    cycle = tmp_path / "cycle.yaml"
    cycle.write_text("a: &a [1, *a]\n")
    with pytest.raises(InputError, match=r"cycle.yaml: expands to more than 100,000 YAML values"):
        check_config_files(["--config", str(cycle)])
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 10_000 + "]" * 10_000 + "\n")  # well past the recursion limit
    with pytest.raises(InputError, match=r"deep.yaml: is nested too deeply"):
        check_config_files(["--config", str(deep)])


# -- issue #53 item 9: a multi-GB data file --------------------------------------------------------
def _padded_jsonl(path: Path, lines: int, width: int, bad: int) -> Path:
    """``lines`` valid pair records, each padded with spaces to ``width`` bytes (JSON allows them;
    the parsed rows stay small), and line ``bad`` malformed."""
    with path.open("w") as handle:
        for number in range(1, lines + 1):
            line = "{not json" if number == bad else json.dumps({"sentence1": f"a{number}", "sentence2": "b", "result": 4})
            handle.write(line.ljust(width) + "\n")
    return path


def test_the_jsonl_readers_stream_a_big_file_and_still_name_a_bad_line_near_its_end(tmp_path: Path):
    """Before: each reader read the whole file into memory (bytes, then text, then a list of
    lines): a 2 GB file peaked at 4.2 GB. Now the file is read a line at a time; here a 16 MB file
    is read with a few MB at most (tracemalloc counts every allocation), the bad line still named."""
    import tracemalloc

    from equiv.data.problems import read_jsonl_objects
    from equiv.data.records import read_pair_records
    from equiv.rundir.io import read_json_lines

    data = _padded_jsonl(tmp_path / "big.jsonl", lines=2000, width=8192, bad=1999)
    size = data.stat().st_size
    for read in (read_pair_records, read_json_lines, lambda p: list(read_jsonl_objects(p))):
        tracemalloc.start()
        try:
            with pytest.raises(InputError, match=r"big.jsonl:1999: malformed JSON"):
                read(data)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < size / 4, (read, peak, size)


def test_a_json_document_past_the_stated_size_is_refused_in_one_line_naming_the_limit(tmp_path: Path, monkeypatch):
    """A JSON list (the MathEquiv release format) cannot be streamed: past $EQUIV_MAX_JSON_BYTES
    (default 1 GiB) it is refused; so is a JSONL line longer than it. JSON Lines of any size pass."""
    monkeypatch.setenv("EQUIV_MAX_JSON_BYTES", "20000")  # read at each file, as a fresh process reads it
    rows = [json.loads(line) for line in DEMO_PAIRS.read_text().splitlines()]
    listed = tmp_path / "pairs.json"
    listed.write_text(json.dumps(rows))
    assert listed.stat().st_size > 20000
    long_line = tmp_path / "long_line.jsonl"
    long_line.write_text(DEMO_PAIRS.read_text().splitlines()[0] + "\n" + json.dumps({**rows[0], "pad": "x" * 30000}) + "\n")

    def pairs(path: Path) -> Result:
        return _search("pairs", "--strategy", "formula", "--data", path)

    line = _one_error_line(pairs(listed))
    assert f"{listed}: is one JSON document of {listed.stat().st_size:,} bytes, over the 20,000 bytes" in line
    assert "$EQUIV_MAX_JSON_BYTES" in line
    line = _one_error_line(pairs(long_line))
    assert f"{long_line}:2: this line is longer than the 20,000 bytes" in line
    assert DEMO_PAIRS.stat().st_size > 20000  # a JSONL file bigger than the limit, short lines: read as ever
    assert pairs(DEMO_PAIRS).returncode == 0


def test_the_given_save_dir_is_the_parsers_own_value_in_the_command_lines_order(tmp_path: Path, monkeypatch):
    """The logger's ``save_dir`` is parsed as any option is (issue 67: no second reading of argv):
    the last of a ``--config`` file's and either spelling on the command line wins, and one not
    given is the root directory (configs/demo.yaml's ``outputs/demo``, or the one given)."""
    from equiv.judge.cli import JudgeCLI

    monkeypatch.chdir(REPO)
    config = tmp_path / "logger.yaml"
    config.write_text("trainer:\n  logger:\n    class_path: lightning.pytorch.loggers.CSVLogger\n"
                      "    init_args:\n      save_dir: from_config\n")

    class Parsed(JudgeCLI):
        """JudgeCLI up to its parsed config (its links and checks applied): the value read here is
        the parser's; building the model and trainer (a bundled encoder loaded each time) is the
        logger test's, above."""

        def instantiate_classes(self) -> None:
            pass

    def parsed(*argv: str) -> object:
        cli = Parsed(args=["--config", "configs/demo.yaml", *argv], run=False)
        return cli.config["trainer"]["logger"]["init_args"]["save_dir"]

    assert parsed() == "outputs/demo"
    assert parsed("--trainer.default_root_dir", str(tmp_path / "root")) == str(tmp_path / "root")
    assert parsed("--config", str(config)) == "from_config"
    assert parsed("--config", str(config), "--trainer.logger.save_dir", "short") == "short"
    assert parsed("--trainer.logger.init_args.save_dir=long", f"--config={config}") == "from_config"
    assert parsed(f"--config={config}", "--trainer.logger.init_args.save_dir=long") == "long"


