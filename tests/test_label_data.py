"""Judge data the MathEquiv way, without a server: window, split by problem, balanced sample, the
``siblings`` options, the labelling prompt, answer parsing, the run's input and resume checks,
agreement, and the ``label`` / ``agreement`` commands' one-line refusals. The labeller against a
real server is ``tests/test_label_vllm.py`` (-m vllm)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from equiv.data.pair_sampling import (balanced_sample, in_window, pair_problem, sample_splits, split_by_problem,
                                      split_sizes)
from equiv.data.records import read_pair_records
from equiv.errors import InputError
from equiv.labelling.agreement import cohen_kappa, compare, read_labels
from equiv.labelling.parse import MalformedAnswer, parse_answer
from equiv.labelling.prompt import INSTRUCTIONS, build_messages, read_fewshot
from equiv.labelling.run import load_done, pair_key, read_pairs
from tests.helpers.cli import search_cli
from tests.helpers.openai_backoff import short_backoff


def _pairs(problems: int, per: int, ratios=(0.76, 0.8, 0.85, 0.9, 0.95, 0.98)) -> list[dict]:
    return [{"id": f"p{p}-s0n0c{i}c{i + 1}", "problem": f"p{p}", "sentence1": f"a{p}.{i}", "sentence2": f"b{p}.{i}",
             "levenshtein_ratio": ratios[i % len(ratios)]} for p in range(problems) for i in range(per)]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# --- window, split, sample ---------------------------------------------------------------------

def test_label_window_keeps_both_ends_and_refuses_a_reversed_one():
    rows = [{"levenshtein_ratio": r} for r in (0.74, 0.75, 0.9, 0.99, 0.995)]
    assert [r["levenshtein_ratio"] for r in in_window(rows, 0.75, 0.99)] == [0.75, 0.9, 0.99]
    with pytest.raises(InputError, match="window"):
        in_window(rows, 0.9, 0.5)


def test_label_split_sizes_follow_the_weights_and_sum_to_n():
    assert split_sizes(10, (8, 1, 1)) == [8, 1, 1]
    assert split_sizes(100, (8, 1, 1)) == [80, 10, 10]
    assert sum(split_sizes(7, (8, 1, 1))) == 7
    assert split_sizes(3, (1, 1, 1)) == [1, 1, 1]
    with pytest.raises(InputError, match="split"):
        split_sizes(10, (0, 0, 0))


def test_label_split_by_problem_puts_each_problem_in_one_split_reproducibly():
    pairs = _pairs(20, 4)
    splits = split_by_problem(pairs, (8, 1, 1), seed=3)
    seen = {name: {pair_problem(p) for p in rows} for name, rows in splits.items()}
    assert [len(seen[n]) for n in ("train", "valid", "test")] == [16, 2, 2]
    assert not (seen["train"] & seen["valid"]) and not (seen["train"] & seen["test"]) and not (seen["valid"] & seen["test"])
    assert sum(len(rows) for rows in splits.values()) == len(pairs)
    assert split_by_problem(pairs, (8, 1, 1), seed=3) == splits
    assert split_by_problem(pairs, (8, 1, 1), seed=4) != splits


def test_label_problem_falls_back_to_the_id_and_refuses_neither():
    assert pair_problem({"id": "gsm8k-train-5-s0n1c2c3"}) == "gsm8k-train-5"
    with pytest.raises(InputError, match="problem"):
        pair_problem({"sentence1": "a"})


def test_label_balanced_sample_spreads_over_bins_and_caps_problems():
    # 30 pairs in the top bin of one problem, 3 in each other bin over 3 problems
    crowded = [{"id": f"big-{i}", "problem": "big", "levenshtein_ratio": 0.98} for i in range(30)]
    others = [{"id": f"q{p}-{b}", "problem": f"q{p}", "levenshtein_ratio": r}
              for p in range(3) for b, r in enumerate((0.76, 0.81, 0.86, 0.91))]
    sample = balanced_sample(crowded + others, 10, window=(0.75, 0.99), bins=5, seed=0)
    bins = Counter(min(4, int((p["levenshtein_ratio"] - 0.75) / 0.24 * 5)) for p in sample)
    assert len(sample) == 10 and set(bins) == {0, 1, 2, 3, 4} and max(bins.values()) - min(bins.values()) <= 1
    capped = balanced_sample(crowded + others, None, per_problem=2, window=(0.75, 0.99), seed=0)
    assert Counter(p["problem"] for p in capped)["big"] == 2 and len(capped) == 2 + 3 * 2
    assert balanced_sample(crowded + others, 10, seed=0) == sample  # seeded
    # a bin with fewer pairs than its share gives all it has, the others fill the rest
    assert len(balanced_sample(crowded + others, 25, window=(0.75, 0.99), seed=0)) == 25


def test_label_sample_splits_share_the_total_by_the_weights():
    splits = split_by_problem(_pairs(40, 6), (8, 1, 1), seed=0)
    sampled = sample_splits(splits, 50, (8, 1, 1), seed=0)
    assert [len(sampled[n]) for n in ("train", "valid", "test")] == [40, 5, 5]


# --- siblings: the paper's options ----------------------------------------------------------------

def _tree(run: Path, pid: str, texts: list[str]) -> None:
    trees = run / "trees"
    trees.mkdir(parents=True, exist_ok=True)
    nodes = [{"id": 0, "parent": None, "depth": 0, "text": ""}]
    nodes += [{"id": i + 1, "parent": 0, "depth": 1, "text": t} for i, t in enumerate(texts)]
    (trees / f"{pid}.json").write_text(json.dumps({"id": pid, "seed": 0, "question": f"Question {pid}?", "answer": "1",
                                                   "prediction": "1", "correct": True, "algo": "sbs", "nodes": nodes}))


def test_label_siblings_cli_writes_train_valid_test_split_by_problem(tmp_path):
    run = tmp_path / "run"
    for k in range(10):
        _tree(run, f"prob-{k}", [f"So x = {k} + 10 = {k + 10} apples.", f"So x = {k} + 10 = {k + 11} apples.",
                                 f"So y = {k} + 10 = {k + 10} apples.", "Something else entirely here."])
    out = tmp_path / "pairs"
    result = search_cli("siblings", run, "--out", out, "--split", 8, 1, 1, "--per_problem", 2, "--seed", 1)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    files = {n: [json.loads(line) for line in (out / f"{n}.jsonl").read_text().splitlines()]
             for n in ("train", "valid", "test")}
    assert {n: summary[n]["problems"] for n in files} == {"train": 8, "valid": 1, "test": 1}
    problems = {n: {r["problem"] for r in rows} for n, rows in files.items()}
    assert not (problems["train"] & (problems["valid"] | problems["test"]))
    every = [r for rows in files.values() for r in rows]
    assert all(0.75 <= r["levenshtein_ratio"] <= 0.99 for r in every) and max(Counter(r["problem"] for r in every).values()) == 2
    assert "outside the window" in result.stderr
    # --prefilter keeps today's meaning (every pair above it), --window and --prefilter exclude each other
    loose = search_cli("siblings", run, "--out", tmp_path / "loose.jsonl", "--prefilter", 0.1)
    assert loose.returncode == 0 and json.loads(loose.stdout.strip().splitlines()[-1])["pairs"] > len(every)
    both = search_cli("siblings", run, "--out", tmp_path / "x.jsonl", "--prefilter", 0.1, "--window", 0.5, 0.9)
    assert both.returncode == 2
    bad = search_cli("siblings", run, "--out", tmp_path / "x.jsonl", "--window", 0.9, 0.5)
    assert bad.returncode == 2 and "window" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


# --- prompt and parsing ---------------------------------------------------------------------------

def test_label_prompt_has_the_levels_criteria_and_examples_as_exchanges():
    examples = read_fewshot()
    assert {e.result for e in examples} >= {0, 4}
    pair = {"sentence1": "x = 2 + 3 = 5", "sentence2": "x = 3 + 2 = 5", "question": "What is x?", "prefix": ["Let x be."]}
    plain = build_messages(pair, examples)
    assert plain[0]["role"] == "system" and plain[0]["content"] == INSTRUCTIONS
    for level in ("4 = exactly equivalent", "3 = likely", "2 = cannot judge", "1 = unlikely", "0 = not equivalent"):
        assert level in INSTRUCTIONS
    assert '"reasoning_step"' in INSTRUCTIONS and "different method" in INSTRUCTIONS
    assert [m["role"] for m in plain[1:-1]] == ["user", "assistant"] * len(examples)
    assert json.loads(plain[2]["content"]) == {"reasoning_step": examples[0].reasoning, "result": examples[0].result}
    assert "What is x?" not in plain[-1]["content"] and "x = 3 + 2 = 5" in plain[-1]["content"]
    full = build_messages(pair, examples, with_question=True, with_prefix=True)
    assert "What is x?" in full[-1]["content"] and "Let x be." in full[-1]["content"]


def test_label_fewshot_file_errors_name_the_line_and_field(tmp_path):
    bad = _write(tmp_path / "shots.jsonl", [{"sentence1": "a", "sentence2": "b", "reasoning_step": "r", "result": 3},
                                            {"sentence1": "a", "sentence2": "b", "reasoning_step": "r", "result": 7}])
    with pytest.raises(InputError, match=r"shots.jsonl:2: field 'result'"):
        read_fewshot(bad)


@pytest.mark.parametrize("text, level, reasoning", [
    ('{"reasoning_step": "same", "result": 4}', 4, "same"),
    ('Let me think.\n```json\n{"reasoning_step": "differs", "result": "1"}\n```', 1, "differs"),
    ("Analysis... {'reasoning_step': 'py dict', 'result': 0}", 0, "py dict"),
    ('An example {"result": 4} then my answer {"reasoning_step": "x", "result": 2.0}', 2, "x"),
    # a dictionary quoted inside the answer's own reasoning is part of it, not the answer
    ('{"reasoning_step": "A prints {\'result\': 4} literally", "result": 0}', 0, "A prints {'result': 4} literally"),
])
def test_label_parse_reads_the_last_answer_dictionary(text, level, reasoning):
    answer = parse_answer(text)
    assert (answer.result, answer.reasoning) == (level, reasoning)


@pytest.mark.parametrize("text, why", [
    ("", "empty"), ("I think they are equivalent.", "no dictionary"), ('{"reasoning_step": "x", "result": 7}', "not a level"),
    ('{"reasoning_step": "x", "result": true}', "not a level"), ('{"reasoning_step": "x"', "no dictionary"),
])
def test_label_parse_refuses_malformed_answers_with_a_reason(text, why):
    with pytest.raises(MalformedAnswer, match=why):
        parse_answer(text)


def test_label_parse_reads_a_bare_level_only_when_asked():
    assert parse_answer(" 3 ", bare_level=True).result == 3
    with pytest.raises(MalformedAnswer):
        parse_answer("3")


# --- the run's input and resume state -------------------------------------------------------------

def test_label_read_pairs_refuses_bad_rows_naming_the_line(tmp_path):
    ok = {"id": "p-1", "sentence1": "a", "sentence2": "b"}
    with pytest.raises(InputError, match=r"pairs.jsonl:2: field 'sentence2'"):
        read_pairs(_write(tmp_path / "pairs.jsonl", [ok, {"id": "p-2", "sentence1": "a", "sentence2": " "}]))
    with pytest.raises(InputError, match=r"pairs.jsonl:2: field 'id': pair 'p-1' is also on line 1"):
        read_pairs(_write(tmp_path / "pairs.jsonl", [ok, ok]))
    # an earlier label is dropped, to be labelled afresh; no id: a hash of the texts is the key
    rows = read_pairs(_write(tmp_path / "pairs.jsonl", [{**ok, "result": 4, "label_model": "m"},
                                                        {"sentence1": "c", "sentence2": "d"}]))
    assert "result" not in rows[0] and "label_model" not in rows[0]
    assert pair_key(rows[1]).startswith("sha:") and pair_key(rows[1]) == pair_key(dict(rows[1]))


def test_label_load_done_cuts_a_torn_last_line_so_appends_stay_whole(tmp_path):
    out = tmp_path / "labels.jsonl"
    out.write_text(json.dumps({"id": "p-1", "sentence1": "a", "sentence2": "b", "result": 4}) + "\n"
                   + '{"id": "p-2", "sentence1": "a", "sen')
    assert load_done(out) == {"p-1"}
    assert out.read_text().endswith("}\n") and len(out.read_text().splitlines()) == 1
    _write(out, [{"id": "p-1", "sentence1": "a", "sentence2": "b"}])
    with pytest.raises(InputError, match="has no 'result'"):
        load_done(out)


# --- agreement ------------------------------------------------------------------------------------

def test_label_kappa_matches_the_textbook_and_is_undefined_for_one_label():
    # Cohen's 1960 style example: 20 items, observed 0.7, expected 0.5 -> 0.4
    a = [1] * 10 + [0] * 10
    b = [1] * 7 + [0] * 3 + [1] * 3 + [0] * 7
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa([1, 1], [1, 1]) is None
    assert cohen_kappa(a, a) == pytest.approx(1.0)


def test_label_agreement_reports_levels_binary_and_disagreements(tmp_path):
    base = [{"id": f"p-{i}", "sentence1": f"s{i}", "sentence2": f"t{i}"} for i in range(5)]
    a = _write(tmp_path / "a.jsonl", [{**r, "result": lvl} for r, lvl in zip(base, (4, 3, 0, 2, 1))])
    b = _write(tmp_path / "b.jsonl", [{**r, "result": lvl} for r, lvl in zip(base[:4], (4, 4, 1, 0))])
    result = compare(read_labels(a), read_labels(b))
    assert (result.common, result.only_a, result.only_b) == (4, 1, 0)
    assert result.level_agreement == pytest.approx(0.25)
    assert (result.binary_pairs, result.binary_dropped, result.binary_agreement) == (3, 1, 1.0)
    assert result.confusion[3][4] == 1 and result.confusion[2][0] == 1
    assert len(result.disagreements) == 3 and all(d["binary_disagree"] is not True for d in result.disagreements)
    cli = search_cli("agreement", a, b, "--disagreements", tmp_path / "dis.jsonl")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout.strip().splitlines()[-1])["disagreements"] == 3
    assert len((tmp_path / "dis.jsonl").read_text().splitlines()) == 3 and "kappa" in cli.stderr


def test_label_agreement_refuses_an_unlabelled_file_in_one_line(tmp_path):
    a = _write(tmp_path / "a.jsonl", [{"id": "p-1", "sentence1": "s", "sentence2": "t", "result": 4}])
    b = _write(tmp_path / "b.jsonl", [{"id": "p-1", "sentence1": "s", "sentence2": "t"}])
    cli = search_cli("agreement", a, b)
    assert cli.returncode == 2 and "b.jsonl:1: field 'result'" in cli.stderr and len(cli.stderr.strip().splitlines()) == 1


# --- the label command's refusals before any request ----------------------------------------------

@pytest.mark.parametrize("rows, extra, message", [
    ([{"id": "p-1", "sentence2": "b"}], [], "pairs.jsonl:1: field 'sentence1'"),
    ([{"id": "p-1", "sentence1": "a", "sentence2": "b"}], ["--tries", "0"], "field 'tries'"),
    ([{"id": "p-1", "sentence1": "a", "sentence2": "b"}], ["--fewshot", "missing.jsonl"], "missing.jsonl: field 'fewshot'"),
])
def test_label_cli_refuses_bad_input_in_one_line(tmp_path, rows, extra, message):
    pairs = _write(tmp_path / "pairs.jsonl", rows)
    result = search_cli("label", pairs, "--out", tmp_path / "labels.jsonl", "--model", "m",
                        "--base_url", "http://127.0.0.1:9/v1", *extra)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "labels.jsonl").exists()


def test_label_cli_names_an_unreachable_server_in_one_line(tmp_path, monkeypatch):
    short_backoff(monkeypatch)  # the client still tries three times, 0.01 s apart
    pairs = _write(tmp_path / "pairs.jsonl", [{"id": "p-1", "sentence1": "a", "sentence2": "b"}])
    result = search_cli("label", pairs, "--out", tmp_path / "labels.jsonl", "--model", "m",
                        "--base_url", "http://127.0.0.1:9/v1", "--timeout", "5")
    assert result.returncode == 2 and "http://127.0.0.1:9/v1: field 'base_url'" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_label_output_rows_are_training_data_as_they_are(tmp_path):
    """What the labeller writes (its fields around the pair) is what fit reads: read_pair_records takes it."""
    row = {"id": "p-1", "problem": "p", "sentence1": "a", "sentence2": "b", "reasoning_step": 2, "prefix": ["x"],
           "result": 3, "label_reasoning": "same", "label_model": "m", "label_raw": [{"text": "{}", "error": None}],
           "label_tries": 1, "label_usage": {"prompt_tokens": 1, "completion_tokens": 1},
           "label_prompt": {"fewshot": "abc", "structured": "json_schema"}}
    records, _ = read_pair_records(_write(tmp_path / "labels.jsonl", [row]))
    assert records[0].result == 3 and records[0].reasoning_step == 2


def test_label_a_request_the_server_refuses_is_a_failed_try_of_its_pair_not_the_end_of_the_run():
    """A 400 on one pair's prompt (say, a context too long) or a timeout is that pair's failed try;
    no server, a bad key or model and rate limits still stop the run."""
    import httpx
    import openai

    from equiv.labelling.run import pair_error

    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")

    def status(code: int) -> openai.APIStatusError:
        return openai.APIStatusError("refused", response=httpx.Response(code, request=request), body=None)

    assert "HTTP 400" in pair_error(status(400)) and pair_error(openai.APITimeoutError(request=request))
    for code in (401, 403, 404, 429, 500):
        assert pair_error(status(code)) is None
    assert pair_error(openai.APIConnectionError(request=request)) is None and pair_error(ValueError("x")) is None


def test_a_second_labelling_into_the_same_out_is_refused_in_one_line_before_any_request(tmp_path, monkeypatch):
    """Two labellings into one --out would both read it as it stands, label the same pairs twice
    and interleave their lines: the second is refused, naming the file and who holds it. The
    first labelling's hold is a small process taking the labeller's lock (``hold_lock``, which is
    re-entrant within one process); the second labelling runs in this process (tests/helpers/cli.py)."""
    import subprocess
    import sys

    from equiv.labelling.run import lock_path
    from tests.helpers.paths import REPO_ROOT

    short_backoff(monkeypatch)  # the rerun below tries the unreachable server three times, 0.01 s apart
    pairs = _write(tmp_path / "pairs.jsonl", [{"id": "p-1", "sentence1": "a", "sentence2": "b"}])
    out = tmp_path / "labels.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom equiv.rundir.lock import hold_lock\n"
                               "with hold_lock(sys.argv[1], sys.argv[2], 'busy {holder}'):\n"
                               "    print('held', flush=True)\n    time.sleep(60)\n", str(lock_path(out)), str(out)],
                              cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:  # the first labelling
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        result = search_cli("label", pairs, "--out", out, "--model", "m", "--base_url", "http://127.0.0.1:9/v1",
                            "--timeout", "5")
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "another labelling" in lines[0]
    assert f"pid {holder.pid}" in lines[0] and not out.exists()
    # once the first is done the lock is free: the same command goes on to the (unreachable) server
    again = search_cli("label", pairs, "--out", out, "--model", "m", "--base_url", "http://127.0.0.1:9/v1",
                       "--timeout", "5")
    assert again.returncode == 2 and "field 'base_url'" in again.stderr


# --- a stub chat server on loopback: answers 200 with what a test picks per pair --------------------

_COMPLETION = {"id": "c", "object": "chat.completion", "created": 0, "model": "stub",
               "usage": {"prompt_tokens": 3, "completion_tokens": 2}}


def _completion(content: str, **message: str) -> bytes:
    return json.dumps({**_COMPLETION, "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": content, **message}}]}).encode()


_BAD_BODIES = {  # sentence1 of a pair -> (body, content type) the stub answers it with, status 200
    "not-json": (b"<<not json at all>>", "application/json"),
    "html": (b"<html><body>Sign in to continue</body></html>", "text/html"),
    "empty-choices": (json.dumps({**_COMPLETION, "choices": []}).encode(), "application/json"),
    "not-utf8": (('{"id": "c", "model": "stub", "choices": [{"index": 0, "finish_reason": "stop", "message": '
                  '{"role": "assistant", "content": "caf\xe9"}}]}').encode("latin-1"), "application/json"),
}
_GOOD = _completion(json.dumps({"reasoning_step": "same", "result": 4}))


def _label_against_stub(tmp_path: Path, names: list[str], answers: dict[str, tuple[bytes, str]], *extra: str):
    """``search_cli.py label`` (in this process, tests/helpers/cli.py) on pairs whose ``sentence1``
    is ``<name>-step``, against a loopback server (http.server in a thread) answering each pair
    with ``answers[name]`` (``(body, content type)``, status 200; a good answer, level 4, for names
    not in it). The real process of ``label`` is tests/test_outputs.py's two labellers."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Stub(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            request = self.rfile.read(int(self.headers["Content-Length"])).decode()
            body, kind = next((answer for name, answer in answers.items() if f"{name}-step" in request),
                              (_GOOD, "application/json"))
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    # A short poll: ``shutdown()`` waits up to one poll interval (0.5 s by default).
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    pairs = _write(tmp_path / "pairs.jsonl", [{"id": n, "sentence1": f"{n}-step", "sentence2": "b"} for n in names])
    try:
        return search_cli("label", pairs, "--out", tmp_path / "labels.jsonl", "--model", "m", "--base_url",
                          f"http://127.0.0.1:{httpd.server_address[1]}/v1", "--timeout", "30", *extra)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_label_a_200_that_is_not_a_chat_completion_is_a_failed_try_not_a_traceback(tmp_path):
    """A body that is not JSON, a web page, an empty ``choices`` or bytes that are not UTF-8 (a
    proxy, a broken server) is that pair's failed try: retried, then recorded with its reason in
    ``<out>.failed.jsonl``; the run labels the other pairs and ends with one ``error:`` line."""
    result = _label_against_stub(tmp_path, [*_BAD_BODIES, "good"], _BAD_BODIES, "--tries", "2")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "4 pair(s) got no usable answer" in errors[0]
    assert [json.loads(line)["id"] for line in (tmp_path / "labels.jsonl").read_text().splitlines()] == ["good"]
    failed = {row["id"]: row["label_raw"] for row in map(json.loads, (tmp_path / "labels.failed.jsonl").read_text().splitlines())}
    assert set(failed) == set(_BAD_BODIES) and all(len(raw) == 2 for raw in failed.values())
    why = {name: raw[0]["error"] for name, raw in failed.items()}
    assert "not JSON" in why["not-json"] and "text" in why["html"] and "Sign in" in why["html"]
    assert "empty 'choices'" in why["empty-choices"] and "not UTF-8" in why["not-utf8"]


def test_label_stores_at_most_64k_characters_of_each_raw_answer_and_says_so(tmp_path):
    """A runaway model's answers were stored whole (60 MB for 3 pairs): each raw answer, the
    explanation and the thinking are cut at 65,536 characters, flagged; the level is still read."""
    STORED_CHARS = 65_536  # equiv.labelling.run.STORED_CHARS, the documented cap

    huge = "x" * 300_000
    answers = {"long": (_completion(json.dumps({"reasoning_step": huge, "result": 3}), reasoning_content=huge),
                        "application/json"),
               "runaway": (_completion(huge), "application/json")}  # prose, no answer dictionary: every try fails
    result = _label_against_stub(tmp_path, ["long", "runaway", "short"], answers, "--tries", "2")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    rows = {row["id"]: row for row in map(json.loads, (tmp_path / "labels.jsonl").read_text().splitlines())}
    long, short = rows["long"], rows["short"]
    assert long["result"] == 3 and long["label_raw"][0]["truncated"] is True
    assert len(long["label_raw"][0]["text"]) == len(long["label_reasoning"]) == len(long["label_thinking"]) == STORED_CHARS
    assert long["label_truncated"] == ["label_reasoning", "label_thinking"]
    assert short["label_raw"][0]["truncated"] is False and "label_truncated" not in short
    failed = json.loads((tmp_path / "labels.failed.jsonl").read_text())
    assert [(len(t["text"]), t["truncated"]) for t in failed["label_raw"]] == [(STORED_CHARS, True)] * 2
    # what is on disk is bounded by the cap, not by the answers (2 x 300k + 3 x 300k characters were sent)
    assert (tmp_path / "labels.jsonl").stat().st_size + (tmp_path / "labels.failed.jsonl").stat().st_size < 6 * STORED_CHARS
