"""How long a command takes before it does anything: the start-up cost of ``streamkm``.

Each measurement is the wall time of a fresh interpreter running one of:

* ``import numpy`` (the floor every numeric command pays),
* ``import streamkm`` (bare import: no estimator used),
* ``python -m streamkm --version`` (the console script's fastest path),
* ``import streamkm; streamkm.MiniBatchKernelKMeans`` (first use of an estimator:
  scikit-learn, scipy and numba are loaded),
* the first ``MiniBatchKernelKMeans(3).fit(X)`` of the process on 5,000 x 5 standard
  normal rows (defaults: ``kernel="rbf"``, ``gamma="auto"``, so the automatic kernel choice
  runs; numba's cache is warm after the uncounted first round): this case reports the time
  of the ``fit`` call alone, measured inside the process, and ``first-fit-cpu`` (a process
  of its own) the CPU time the process spent in that call (all its threads): the work,
  which queueing behind other processes on a loaded machine does not stretch,
* ``later-fit-cpu``: the same fit run six times in one process, the least CPU time of the
  last five (numba loaded, the libraries' first-call costs paid): the fit's own work,

interleaved (every case once per repeat, in turn), so load from elsewhere hits all cases
alike. With ``--tree DIR`` (repeatable) each source tree (a checkout holding the ``streamkm``
package, e.g. a ``git worktree`` of another commit) is measured in the same interleaved
loop, by putting it first on ``PYTHONPATH``. ``--case`` (repeatable) measures only the
named cases. ``--busy N`` starts N processes that spin on a CPU for the whole measurement
(warm-up round included) and stops them after: busy cores on a quiet machine, stated in the
output next to the load average.

Usage::

    python benchmarks/bench_startup.py --repeats 7
    python benchmarks/bench_startup.py --tree . --tree ../other-checkout --repeats 7
    python benchmarks/bench_startup.py --case first-fit --busy 2 --repeats 7
    python benchmarks/bench_startup.py --tree . --tree ../other-checkout --repeats 7 \
        --case help --case check --case show

Prints one markdown table: median (min-max) seconds per case and tree, and the goal each
case is held against (``--version`` <= 0.2 s, ``import streamkm`` <= 0.4 s on an idle
machine; the first fit < 1.5 s on 2 busy cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Prints the wall and CPU seconds of the process's first fit (the last line of its output).
FIRST_FIT = ("import time, numpy as np, streamkm\n"
             "X = np.random.default_rng(0).normal(size=(5000, 5))\n"
             "model = streamkm.MiniBatchKernelKMeans(3, random_state=0)\n"
             "t0, c0 = time.perf_counter(), time.process_time(); model.fit(X)\n"
             "print(time.perf_counter() - t0, time.process_time() - c0)\n")

#: name for ``--case``: (label, interpreter arguments, goal in seconds or None, which of the
#: figures the process prints on its last output line is the case's (0 the first), or None:
#: the process is timed whole)
#: Prints the least CPU seconds of the process's second to sixth fit.
LATER_FITS = ("import time, numpy as np, streamkm\n"
              "X = np.random.default_rng(0).normal(size=(5000, 5))\n"
              "cpu = []\n"
              "for _ in range(6):\n"
              "    model = streamkm.MiniBatchKernelKMeans(3, random_state=0)\n"
              "    c0 = time.process_time(); model.fit(X); cpu.append(time.process_time() - c0)\n"
              "print(min(cpu[1:]))\n")

#: The configuration ``config check`` / ``config show`` read (``{folder}``: where it is).
CONFIG = """[source]
paths = ["{folder}/in.jsonl"]
[decoding]
dim = 2
[model]
n_clusters = 4
[checkpoint]
dir = "{folder}/checkpoints"
[sinks]
assignments = "{folder}/out/assignments.jsonl"
events = "{folder}/out/events.jsonl"
dead_letter = "{folder}/out/dead_letter.jsonl"
[metrics]
enabled = false
"""

ALL_CASES: dict[str, tuple[str, list[str], float | None, int | None]] = {
    "numpy": ("import numpy", ["-c", "import numpy"], None, None),
    "import": ("import streamkm", ["-c", "import streamkm"], 0.4, None),
    "version": ("streamkm --version", ["-m", "streamkm", "--version"], 0.2, None),
    "help": ("streamkm --help", ["-m", "streamkm", "--help"], None, None),
    "check": ("streamkm config check -c FILE",
              ["-m", "streamkm", "config", "check", "-c", "{config}"], None, None),
    "show": ("streamkm config show -c FILE",
             ["-m", "streamkm", "config", "show", "-c", "{config}"], None, None),
    "estimator": ("first estimator use",
                  ["-c", "import streamkm; streamkm.MiniBatchKernelKMeans"], None, None),
    "first-fit": ("first fit (5,000 x 5, in-process)", ["-c", FIRST_FIT], 1.5, 0),
    "first-fit-cpu": ("first fit, CPU seconds of the process", ["-c", FIRST_FIT], None, 1),
    "later-fit-cpu": ("a later fit, CPU seconds (least of five)", ["-c", LATER_FITS], None, 0),
}
CASES = list(ALL_CASES.values())

#: what each ``--busy`` process runs: one CPU at 100 %
SPIN = "while True:\n    pass\n"


def wall_seconds(args: list[str], tree: Path, reports: int | None = None) -> float:
    """Wall time of ``python ARGS`` with ``tree`` first on the import path (``reports``:
    instead, that figure of the ones the process prints on its last line)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, cwd=tree, check=True,
                          stdout=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if reports is None:
        return wall
    return float(done.stdout.strip().splitlines()[-1].split()[reports])


def measure(trees: list[Path], repeats: int,
            cases: list[tuple[str, list[str], float | None, int | None]] | None = None,
            ) -> dict[tuple[str, Path], list[float]]:
    """Seconds per (case, tree), interleaved; one warm-up round is not counted (it fills
    the file cache and writes the byte-code and numba caches). ``{config}`` in a case's
    arguments is a configuration file written from :data:`CONFIG` for the run."""
    cases = CASES if cases is None else cases
    times: dict[tuple[str, Path], list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "streamkm.toml"
        config.write_text(CONFIG.format(folder=folder))

        def run(args: list[str], tree: Path, reports: int | None) -> float:
            return wall_seconds([a.replace("{config}", str(config)) for a in args], tree,
                                reports)

        for label, args, _, reports in cases:
            for tree in trees:
                run(args, tree, reports)
        for _ in range(repeats):
            for label, args, _, reports in cases:
                for tree in trees:
                    times.setdefault((label, tree), []).append(run(args, tree, reports))
    return times


@contextmanager
def busy_cores(n: int) -> Iterator[None]:
    """``n`` processes spinning on a CPU each while the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def table(times: dict[tuple[str, Path], list[float]], trees: list[Path],
          cases: list[tuple[str, list[str], float | None, int | None]] | None = None) -> str:
    """The markdown table of ``times``."""
    head = "| command | " + " | ".join(f"`{t}` s" for t in trees) + " | goal |"
    rule = "|---|" + "---|" * len(trees) + "---|"
    rows = [head, rule]
    for label, _, goal, _ in CASES if cases is None else cases:
        cells = " | ".join(_fmt(times[(label, tree)]) for tree in trees)
        rows.append(f"| `{label}` | {cells} | {'<= %.1f s' % goal if goal else '-'} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", type=Path,
                        help="source tree holding the streamkm package (repeatable; "
                             "default: this checkout)")
    parser.add_argument("--repeats", type=int, default=7, help="rounds (>= 5)")
    parser.add_argument("--case", action="append", choices=sorted(ALL_CASES),
                        help="measure only this case (repeatable; default: all)")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="processes spinning on a CPU during the measurement (default 0)")
    args = parser.parse_args(argv)
    if args.repeats < 5:
        parser.error(f"--repeats must be >= 5, got {args.repeats}")
    if args.busy < 0:
        parser.error(f"--busy must be >= 0, got {args.busy}")
    cases = [ALL_CASES[name] for name in args.case] if args.case else CASES
    trees = [t.resolve() for t in (args.tree or [Path(__file__).resolve().parent.parent])]
    for tree in trees:
        if not (tree / "streamkm" / "__init__.py").is_file():
            parser.error(f"--tree {str(tree)!r} holds no streamkm package")
    load = os.getloadavg()
    with busy_cores(args.busy):
        times = measure(trees, args.repeats, cases)
        after = os.getloadavg()
    spinning = f"; {args.busy} CPU-spinning processes started by this run" if args.busy else ""
    print(f"{args.repeats} repeats, interleaved; load average {load[0]:.1f} at the start, "
          f"{after[0]:.1f} at the end / {os.cpu_count()} CPUs{spinning}; "
          f"{sys.version.split()[0]}\n")
    print(table(times, trees, cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
