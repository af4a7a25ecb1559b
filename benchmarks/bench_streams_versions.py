"""streamkm's prequential records/s on streams of ``bench_streams.py``: two checkouts side
by side, with River's fastest clusterers in the same run, interleaved window by window.

Each checkout runs in its own worker process (its own interpreter, or the same interpreter
with the checkout's source first on ``PYTHONPATH``); a third worker runs River's DBSTREAM
and STREAMKMeans with their documented defaults (the fastest River clusterers of the
comparison). The parent sends every window of a stream to each worker in turn (the first
of each window rotating), so all see the same machine load; a worker times its learner's
calls alone (``time.process_time``), as ``bench_streams.py`` does: ``model.step`` for
streamkm (its assignment is the prediction), ``predict_one`` on every row then
``learn_one`` on every row for River (rows turned into dicts outside the timed calls).
Each repeat starts fresh models on the whole stream, after an untimed pass over its first
two windows (numba's compilation). streamkm's cluster ids of the two checkouts are
compared window by window.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/bench_streams_versions.py --baseline-src ../base \\
        --streams penbased-shuffled optdigits-shuffled satimage-shuffled drifting --repeats 5

Prints one markdown table: per stream, records/s of each checkout and of River's two
clusterers (median (min-max) over the repeats), the per-repeat ratio candidate / baseline
and candidate / fastest River, and whether the cluster ids are identical.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _streams_data import Stream, all_streams  # noqa: E402

STREAMKM_WORKER = r'''
import hashlib, json, sys, time
import numpy as np
import streamkm
from streamkm import MiniBatchKernelKMeans
x = np.load(sys.argv[1])
params = json.loads(sys.argv[2])
model = None
print(json.dumps({"file": streamkm.__file__}), flush=True)
with streamkm.num_threads(1):
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "start":
            model = MiniBatchKernelKMeans(cmd["k"], random_state=0, **params)
            print("{}", flush=True)
            continue
        batch = x[cmd["lo"]:cmd["hi"]]
        cpu = time.process_time()
        report = model.step(batch)
        cpu = time.process_time() - cpu
        ids = hashlib.sha256(np.ascontiguousarray(report.cluster_ids).tobytes()).hexdigest()
        print(json.dumps({"cpu": cpu, "ids": ids}), flush=True)
'''

RIVER_WORKER = r'''
import json, sys, time
import numpy as np
from river import cluster
x = np.load(sys.argv[1])
makers = {"River DBSTREAM": lambda: cluster.DBSTREAM(),
          "River STREAMKMeans": lambda: cluster.STREAMKMeans(seed=0)}
models = {}
started = False
print(json.dumps({"file": cluster.__file__}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["cmd"] == "start":
        models = {name: make() for name, make in makers.items()}
        started = False
        print("{}", flush=True)
        continue
    rows = [dict(enumerate(r)) for r in x[cmd["lo"]:cmd["hi"]].tolist()]
    out = {}
    for name, model in models.items():
        cpu = time.process_time()
        if started:
            predict = model.predict_one
            for r in rows:
                predict(r)
        learn = model.learn_one
        for r in rows:
            learn(r)
        out[name] = time.process_time() - cpu
    started = True
    print(json.dumps({"cpu": out}), flush=True)
'''

ENV_THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "NUMBA_NUM_THREADS": "1", "STREAMKM_NUM_THREADS": "1"}


class Worker:
    """One process answering one JSON line per command."""

    def __init__(self, python: str, code: str, args: list[str], src: str | None) -> None:
        env = dict(os.environ, **ENV_THREADS)
        if src:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen([python, "-c", code, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd="/")
        self.origin = self.read()["file"]

    def read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.proc.args[:1]} died")
        return json.loads(line)

    def ask(self, **cmd: object) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def windows(n: int, window: int) -> list[tuple[int, int]]:
    return [(lo, min(n, lo + window)) for lo in range(0, n, window)]


def one_pass(workers: list[Worker], k: int, spans: list[tuple[int, int]]
             ) -> list[list[dict]]:
    """Every worker starts fresh and learns ``spans`` in turn; their answers per window."""
    for w in workers:
        w.ask(cmd="start", k=k)
    answers: list[list[dict]] = [[] for _ in workers]
    for i, (lo, hi) in enumerate(spans):
        for turn in range(len(workers)):
            j = (i + turn) % len(workers)
            answers[j].append(workers[j].ask(cmd="step", lo=lo, hi=hi))
    return answers


def fmt(values: list[float]) -> str:
    return f"{np.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def ratio(values: list[float]) -> str:
    return f"{np.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def run_stream(stream: Stream, window: int, args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "x.npy")
        np.save(path, stream.X)
        params = json.dumps(args.params)
        workers = [Worker(args.baseline, STREAMKM_WORKER, [path, params], args.baseline_src),
                   Worker(args.candidate, STREAMKM_WORKER, [path, params], args.candidate_src),
                   Worker(args.candidate, RIVER_WORKER, [path], None)]
        try:
            if args.verbose:
                print(f"{stream.name}: " + ", ".join(w.origin for w in workers),
                      file=sys.stderr)
            spans = windows(stream.X.shape[0], window)
            k = stream.n_classes if not stream.events else int(
                np.unique(stream.y[:window]).size)
            one_pass(workers, k, spans[:2])  # numba's compilation, untimed
            rates: dict[str, list[float]] = {}
            same = True
            for _ in range(args.repeats):
                base, cand, river = one_pass(workers, k, spans)
                n = stream.X.shape[0]
                rates.setdefault("baseline", []).append(n / sum(a["cpu"] for a in base))
                rates.setdefault("candidate", []).append(n / sum(a["cpu"] for a in cand))
                for name in river[0]["cpu"]:
                    rates.setdefault(name, []).append(n / sum(a["cpu"][name] for a in river))
                same &= all(a["ids"] == b["ids"] for a, b in zip(base, cand))
        finally:
            for w in workers:
                w.close()
    river_names = [name for name in rates if name.startswith("River")]
    fastest = [max(rates[name][i] for name in river_names) for i in range(args.repeats)]
    speedup = [c / b for c, b in zip(rates["candidate"], rates["baseline"])]
    floor = [c / f for c, f in zip(rates["candidate"], fastest)]
    return (f"| {stream.name} | {stream.X.shape[1]} | {window} | {fmt(rates['baseline'])} | "
            f"{fmt(rates['candidate'])} | {ratio(speedup)} | "
            + " | ".join(fmt(rates[name]) for name in river_names)
            + f" | {ratio(floor)} | {'yes' if same else 'no'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=sys.executable, help="python of the baseline")
    parser.add_argument("--baseline-src", default=None,
                        help="a checkout whose streamkm the baseline imports (PYTHONPATH)")
    parser.add_argument("--candidate", default=sys.executable, help="python of the candidate")
    parser.add_argument("--candidate-src", default=None,
                        help="a checkout whose streamkm the candidate imports (PYTHONPATH)")
    parser.add_argument("--streams", nargs="+", default=["penbased-shuffled"])
    parser.add_argument("--rows", type=int, default=None,
                        help="records per stream (default: whole sets, 40,000 generated)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--params", type=json.loads, default={},
                        help='MiniBatchKernelKMeans parameters as JSON, e.g. \'{"drift": true}\'')
    parser.add_argument("--verbose", action="store_true",
                        help="name the streamkm each worker imports (on stderr)")
    args = parser.parse_args()
    streams = [s for s in all_streams(rows=args.rows) if s.name in args.streams]
    if not streams:
        parser.error(f"no stream named {args.streams}")
    print(f"\nstreamkm MiniBatchKernelKMeans(k, random_state=0"
          + "".join(f", {k}={v!r}" for k, v in args.params.items())
          + f"), {args.repeats} repeats, load average {os.getloadavg()[0]:.1f} at the start\n")
    print("| stream | d | W | baseline records/s | candidate records/s | candidate / baseline "
          "| River DBSTREAM records/s | River STREAMKMeans records/s "
          "| candidate / fastest River | same cluster ids |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for stream in streams:
        window = 1000 if (stream.events or stream.name == "demo") else 500
        print(run_stream(stream, window, args), flush=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
