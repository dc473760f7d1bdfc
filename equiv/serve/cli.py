"""``search_cli.py serve``: one exported judge over HTTP (LitServe), bound to 127.0.0.1 by default.

The judge is loaded once here to check the directory and read its policy and fingerprint (shown
at ``/info``), then once per LitServe worker. Put it behind a reverse proxy with authentication
before binding it to anything but loopback (docs/serving.md).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any, Literal, Sequence

from equiv.errors import EXIT_BAD_INPUT, InputError, exit_on_input_error
from equiv.cliargs import command_parser, parse_or_refuse
from equiv.prune.options import add_pruner_group, pruner_config
from equiv.prune.strategies import PrunerConfig, build_judge
from equiv.serve.bind import check_port_free, servable_host
from equiv.serve.lifetime import Stopped, arm_forked_children, stop_on_sigterm
from equiv.serve.protocol import OUTPUT_TYPES, Limits
from equiv.serve.verdicts import REASONS


@dataclass(frozen=True)
class LoadJudge:
    """Builds the served judge in a worker on the device LitServe gives it (picklable: workers spawn)."""

    config: PrunerConfig

    def __call__(self, device: str) -> Any:
        # LitServe names devices "cpu", "cuda:0", "mps"; the judge takes the same names
        judge = build_judge(replace(self.config, device=device if self.config.device == "auto" else self.config.device))
        if judge is None:
            raise InputError("nothing to serve", field="model")
        return judge


def describe_served(config: PrunerConfig) -> dict[str, Any]:
    """What ``/info`` shows: the model path, the judge's whole policy and its fingerprint."""
    from equiv.serve.fingerprint import judge_fingerprint

    judge = LoadJudge(replace(config, device="cpu"))("cpu")
    policy = judge.describe()
    return {"model": str(config.model), "judge_fingerprint": judge_fingerprint(str(config.model), policy),
            "policy": policy, "reasons": list(REASONS)}


SERVE_SKIP = ("strategy", "threshold", "prefilter", "grouping", "representative", "guard", "floor", "plan_floor", "restate",
              "plan_items",
              "url",
              "judge_fingerprint")
"""Pruner settings ``serve`` does not take: it serves the ``model`` strategy with the export's own
policy (a client changes nothing of it; docs/serving.md)."""


def build_parser() -> Any:
    """``serve``'s jsonargparse parser: the judge as the shared ``--pruner.*`` group
    (equiv.prune.options; its short names ``--model``, ``--device``, ``--batch_size``, as in every
    command), the server's own options, and ``--config`` for a YAML file of them."""
    p = command_parser("search_cli.py serve", "Serve an exported judge over HTTP (LitServe).")
    add_pruner_group(p, skip=SERVE_SKIP)
    p.add_argument("--host", type=str, default="127.0.0.1",
                   help="address to bind (default loopback only; 0.0.0.0 is every interface, with a warning)")
    p.add_argument("--port", type=int, default=8000, help="TCP port to listen on, 1-65535 (default 8000)")
    p.add_argument("--devices", type=str, default="auto", help="how many devices LitServe spreads workers over (auto: all)")
    p.add_argument("--workers_per_device", type=int, default=1)
    p.add_argument("--max_batch_size", type=int, default=64, help="requests LitServe batches into one judge call")
    p.add_argument("--batch_timeout", type=float, default=0.005, help="seconds LitServe waits to fill a batch")
    p.add_argument("--max_pairs", type=int, default=Limits.max_pairs,
                   help="pairs one request may have judged (a /group of n steps: n(n-1)/2)")
    p.add_argument("--max_chars", type=int, default=Limits.max_chars, help="characters one step may hold")
    p.add_argument("--max_request_chars", type=int, default=Limits.max_request_chars,
                   help="characters the judge may read for one request, over every pair it may judge (also caps "
                        "the body)")
    p.add_argument("--output_type", type=Literal[tuple(OUTPUT_TYPES)], default="binary",
                   help="/merge_model_inference's default answer (the reference worker's --output-type)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a request may wait before a 504")
    return p


def serve_main(argv: Sequence[str]) -> int:
    args = parse_or_refuse(build_parser(), argv)  # a bad option or value: one line, exit 2
    with exit_on_input_error():
        if not args.pruner.model:
            raise InputError("--pruner.model DIR is required (an exported judge: trainer_cli.py fit --export_dir)")
        if not 1 <= args.port <= 65535:  # uvicorn would fail inside LitServe's start with a traceback
            raise InputError(f"--port must be a TCP port, 1 to 65535, got {args.port}")
        for name in ("workers_per_device", "max_batch_size", "max_pairs", "max_chars", "max_request_chars"):
            if getattr(args, name) < 1:
                raise InputError(f"must be a positive integer, got {getattr(args, name)}", field=name)
        host = servable_host(args.host)
        config = pruner_config(args.pruner, strategy="model")
        config.validate()  # batch_size, named as pruner's
        check_port_free(host, args.port)  # before the judge loads: not "serving ... at", then a traceback
        metadata = describe_served(config)
    if config.device not in ("auto", "cpu") and not config.device.startswith(("cuda", "mps")):
        print(f"error: field 'device': unknown device {config.device!r}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from equiv.serve.api import WILDCARD_HOSTS, build_server

    accelerator = "auto" if config.device == "auto" else config.device.split(":")[0]
    devices: int | str = int(args.devices) if str(args.devices).isdigit() else args.devices
    address = f"http://[{host}]:{args.port}" if ":" in host else f"http://{host}:{args.port}"
    server = build_server(LoadJudge(config), address=address, metadata=metadata, accelerator=accelerator,
                          devices=devices, workers_per_device=args.workers_per_device,
                          max_batch_size=args.max_batch_size, batch_timeout=args.batch_timeout,
                          limits=Limits(max_pairs=args.max_pairs, max_chars=args.max_chars,
                                        max_request_chars=args.max_request_chars),
                          default_output=args.output_type, timeout=args.timeout)
    if host in WILDCARD_HOSTS:
        print(f"warning: --host {host} listens on every network interface: anyone who can reach this "
              "machine can use the judge (there is no authentication); serve on 127.0.0.1 behind an authenticating "
              "proxy instead (docs/serving.md)", file=sys.stderr, flush=True)
    print(f"serving {config.model} ({metadata['judge_fingerprint'][:19]}...) at {address}", file=sys.stderr, flush=True)
    # every process LitServe starts ends with this one, whatever stops it (equiv.serve.lifetime)
    arm_forked_children()
    stop_on_sigterm()
    try:
        server.run(host=host, port=args.port, generate_client_file=False, log_level="warning")
    except Stopped as stopped:  # stopped before LitServe's loop could take it: nothing started yet
        return 128 + stopped.signum
    return 0
