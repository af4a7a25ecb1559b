"""The ``streamkm`` command line.

``streamkm run -c FILE [--reset-model [--from-start]] [--on-existing-output=MODE] [--[no-]status]``
    Run the service with a TOML configuration (a live status line on a terminal). Exit 2,
    with one line naming the key, the value and the fix, on a configuration error, an
    environment the configuration cannot work in (``streamkm.config.preflight``), a
    model-defining setting changed since the checkpoint (``streamkm.config.diff``),
    or output files left without a checkpoint.
``streamkm config show -c FILE`` / ``streamkm config check -c FILE``
    Print the effective configuration (file plus ``STREAMKM_*`` variables) as TOML with
    secrets masked; ``check`` also makes the refusals of ``run`` (paths, ports, brokers, a
    model-defining setting changed since the checkpoint) and names ignored ``STREAMKM_*``
    variables (exit 0, or 2).
``streamkm demo``
    Generate a drifting non-linear stream into a file under ``./.streamkm/demo`` and
    cluster it live, with metrics and a one-line status.
``streamkm checkpoint inspect DIR [--json]``
    What a restart would resume from (model, counts, input positions, output lengths),
    then every checkpoint file with its validity.
``streamkm checkpoint export DIR -o model.npz``
    The current model in the estimator's own format (``MiniBatchKernelKMeans.load``).
``streamkm completion bash``
    A bash completion script (``source <(streamkm completion bash)``).

SIGTERM / SIGINT make the service finish its batch, checkpoint and exit 0.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from streamkm._version import __version__
from streamkm.exceptions import (
    CheckpointError,
    ConfigError,
    OutputTransactionError,
    StateError,
)

__all__ = ["main", "build_parser"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2


def _error(message: str) -> None:
    sys.stderr.write(f"streamkm: error: {message}\n")
    sys.stderr.flush()


EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command quit by Ctrl-C

_STOPPING = "streamkm: stopping (Ctrl-C again to quit now)\n"
_QUIT_NOW = (b"\nstreamkm: quit without a final checkpoint; the next start resumes from "
             b"the last one\n")


def _install_stop_handlers(stop: Callable[[], None]) -> None:
    """First SIGTERM/SIGINT: graceful stop (a SIGINT says so on stderr). A second SIGINT:
    exit 130 at once, without a traceback. SIGUSR1: every thread's stack to stderr (what a
    service that does not stop is doing).

    The handlers only write a byte to a pipe; a watcher thread reads it, says "stopping"
    and calls ``stop``. A Python signal handler runs in the main thread between two
    bytecodes, possibly while that thread holds the stop event's lock inside ``Event.wait``
    (or the lock of ``sys.stderr``): calling ``stop`` (which sets that event) from the
    handler then waits for a lock its own thread holds, for ever. The immediate exit of a
    second SIGINT writes with ``os.write`` and leaves with ``os._exit`` for the same reason;
    what it leaves behind is what a crash leaves, which a restart recovers from.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)

    def watch() -> None:
        while byte := os.read(read_fd, 1):
            if byte == b"i":
                sys.stderr.write(_STOPPING)
                sys.stderr.flush()
            stop()

    threading.Thread(target=watch, name="streamkm-stop-signals", daemon=True).start()
    interrupted = False

    def handler(signum: int, _frame: Any) -> None:
        nonlocal interrupted
        if signum == signal.SIGINT:
            if interrupted:
                with contextlib.suppress(OSError):
                    os.write(2, _QUIT_NOW)
                os._exit(EXIT_INTERRUPTED)
            interrupted = True
        with contextlib.suppress(BlockingIOError):  # a full pipe already holds a stop
            os.write(write_fd, b"i" if signum == signal.SIGINT else b"t")

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    faulthandler.register(signal.SIGUSR1, all_threads=True)


class _ClearStatusLine:
    """A logging filter that erases the live status line before a log line is written to
    the same terminal (the status line is redrawn within a second)."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def filter(self, record: Any) -> bool:
        self.out.write("\r\x1b[2K")
        return True


def _start_status_line(service: Any, out: Any) -> Callable[[], None]:
    """The demo's live status line for ``service`` on ``out``; returns its stop function."""
    import logging

    from streamkm.app.demo import StatusLine
    from streamkm.logs import LOGGER_NAME

    stop = threading.Event()
    line = StatusLine(service, stop, out)
    handlers = [h for h in logging.getLogger(LOGGER_NAME).handlers
                if getattr(h, "_streamkm_json", False) and out.isatty()]
    clear = _ClearStatusLine(out)
    for handler in handlers:
        handler.addFilter(clear)
    line.start()

    def stop_line() -> None:
        stop.set()
        line.join(timeout=2)
        for handler in handlers:
            handler.removeFilter(clear)

    return stop_line


def _say_if_compiling() -> None:
    """One line on stderr when this run must compile the numba kernels (first run of an
    install: numba's cache holds none of them yet)."""
    from streamkm._numba.cache import first_compile_pending

    if first_compile_pending():
        sys.stderr.write("streamkm: first run of this install: compiling the numba kernels "
                         "(once; later runs load them from numba's cache)\n")
        sys.stderr.flush()


def _run_service(service: Any, *, status_line: bool = False) -> int:
    from streamkm.logs import log_event

    _install_stop_handlers(service.request_stop)
    _say_if_compiling()
    try:
        service.start()
    except ConfigError as exc:
        _error(str(exc))
        return EXIT_CONFIG
    except (CheckpointError, StateError, OSError) as exc:
        _error(str(exc))
        return EXIT_FAILURE
    stop_line = _start_status_line(service, sys.stderr) if status_line else None
    try:
        service.run()
    except OutputTransactionError as exc:  # expected after fencing: no traceback
        import logging

        log_event(logging.getLogger("streamkm.service"), "error", "service_failed",
                  error=str(exc))
        return EXIT_FAILURE
    except Exception as exc:
        import logging

        log_event(logging.getLogger("streamkm.service"), "error", "service_failed",
                  error=repr(exc))
        raise
    finally:
        if stop_line is not None:
            stop_line()
    return EXIT_OK


def _load_config(path: str) -> Any:
    """The validated configuration, or None after printing the error."""
    from streamkm.config.schema import load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        _error(str(exc))
        return None


def cmd_run(args: argparse.Namespace) -> int:
    """``streamkm run -c FILE``."""
    import logging

    from streamkm.app.env_check import ignored_environment
    from streamkm.config.preflight import check_existing_outputs, preflight
    from streamkm.logs import configure_logging, log_event

    config = _load_config(args.config)
    if config is None:
        return EXIT_CONFIG
    if args.from_start and not args.reset_model:
        _error("--from-start needs --reset-model: the checkpointed model has seen the input "
               "already (`streamkm run --reset-model --from-start -c FILE`)")
        return EXIT_CONFIG
    status_line = sys.stderr.isatty() if args.status is None else args.status
    findings = preflight(config) + ignored_environment(os.environ)
    errors = [f for f in findings if f.severity == "error"]
    for finding in errors:
        _error(finding.message)
    if errors:
        return EXIT_CONFIG
    configure_logging(args.log_level or config.logging.level)
    log = logging.getLogger("streamkm.service")
    for finding in findings:
        log_event(log, "warning", "preflight_warning", message=finding.message)
    if config.scaleout.enabled:  # one process of a scale-out group (docs/scaleout.md)
        from streamkm.app.scaleout import ScaleoutService

        if args.reset_model:
            _error("--reset-model applies to a single process: a scale-out group's model "
                   "lives on the model topic (scaleout.model_topic), not in checkpoints")
            return EXIT_CONFIG
        return _run_service(ScaleoutService(config), status_line=status_line)
    try:
        if args.from_start:
            from streamkm.app.start_over import start_from_beginning

            moved = start_from_beginning(config)
            log_event(log, "warning", "started_over", checkpoints_moved_to=str(moved)
                      if moved else None)
        kept = check_existing_outputs(config, args.on_existing_output)
    except ConfigError as exc:
        _error(str(exc))
        return EXIT_CONFIG
    reset_model = args.reset_model and not args.from_start  # no checkpoint left to reset
    if kept:
        log_event(log, "warning", f"existing_outputs_{args.on_existing_output}",
                  files=[str(p) for p in kept])
    from streamkm.app.service import Service

    resume = bool(kept) and args.on_existing_output == "resume"
    return _run_service(Service(config, reset_model=reset_model,
                                resume_from_outputs=resume), status_line=status_line)


def _kernel_note(config: Any) -> str | None:
    """What ``config show`` says after ``model.kernel``: the kernel the newest checkpoint's
    model runs, or, with ``gamma = "auto"`` and no model yet, that it is chosen later."""
    from streamkm.app.kernel_label import AUTO_KERNELS, kernel_label, meta_kernel
    from streamkm.exceptions import StateError
    from streamkm.io.checkpoint_files import checkpoint_files

    model = config.model
    folder = Path(config.checkpoint.dir)
    for path in reversed(checkpoint_files(folder) if folder.is_dir() else []):
        from streamkm.io.checkpoint import read_checkpoint  # numpy: only with a checkpoint

        try:
            meta = read_checkpoint(path).model_meta
        except StateError:
            continue
        in_use, reason = meta_kernel(meta)
        if in_use is None:
            break
        why = f": {reason}" if reason else ""
        return f"in use: {kernel_label(model.kernel, model.gamma, in_use)} ({path.name}{why})"
    if model.kernel in AUTO_KERNELS and model.gamma in (None, "auto"):
        return (f"gamma = \"auto\": {model.kernel} itself or the linear, anchor or level_set "
                f"kernel, chosen on the first batch")
    return None


def cmd_config_show(args: argparse.Namespace) -> int:
    """``streamkm config show -c FILE``: the effective configuration as TOML, with the
    kernel in use beside ``model.kernel``."""
    from streamkm.config.view import config_to_toml

    config = _load_config(args.config)
    if config is None:
        return EXIT_CONFIG
    sys.stdout.write(config_to_toml(config, kernel_note=_kernel_note(config)))
    return EXIT_OK


def cmd_config_check(args: argparse.Namespace) -> int:
    """``streamkm config check -c FILE``: validate, show, and check the environment."""
    from streamkm.app.env_check import ignored_environment
    from streamkm.config.preflight import checkpoint_findings, existing_outputs, preflight
    from streamkm.config.view import config_to_toml

    config = _load_config(args.config)
    if config is None:
        return EXIT_CONFIG
    sys.stdout.write(config_to_toml(config))
    findings = sorted(preflight(config, network=True) + checkpoint_findings(config)
                      + ignored_environment(os.environ), key=lambda f: f.severity != "error")
    outputs = existing_outputs(config)
    if outputs:
        names = ", ".join(repr(str(p)) for p in outputs)
        sys.stderr.write(f"streamkm: warning: no checkpoint but non-empty output files "
                         f"{names}: `streamkm run` refuses unless --on-existing-output="
                         f"resume, truncate or append\n")
    for finding in findings:
        sys.stderr.write(f"streamkm: {finding}\n")
    errors = sum(f.severity == "error" for f in findings)
    sys.stderr.write(f"streamkm: config {'has ' + str(errors) + ' error(s)' if errors else 'OK'}"
                     f" ({args.config})\n")
    return EXIT_CONFIG if errors else EXIT_OK


def _port_in_use(port: int) -> str | None:
    """Why 127.0.0.1:``port`` cannot be listened on, or ``None`` if it can.

    The probe sets ``SO_REUSEADDR`` like the metrics listener does, so a port whose last
    connections linger in TIME_WAIT (a demo stopped a moment ago) is free, as it is for
    the listener.
    """
    import socket

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def cmd_demo(args: argparse.Namespace) -> int:
    """``streamkm demo``: generate a drifting stream and cluster it live."""
    from streamkm.app.demo import DriftingStream, StreamWriter, demo_config, dump_config
    from streamkm.app.demo_footprint import start_over
    from streamkm.app.service import Service
    from streamkm.logs import configure_logging

    state = Path(args.state_dir).resolve()
    state.mkdir(parents=True, exist_ok=True)
    port = args.metrics_port
    busy = _port_in_use(port) if port else None
    if busy is not None:
        _error(f"--metrics-port {port}: 127.0.0.1:{port} is in use ({busy}); stop what "
               f"listens there, or pass another port (--metrics-port 0: any free port)")
        return EXIT_CONFIG
    try:
        config = demo_config(state, metrics_port=port)
    except ConfigError as exc:
        _error(str(exc))
        return EXIT_CONFIG
    configure_logging(args.log_level or config.logging.level)
    (state / "config.json").write_text(dump_config(config) + "\n")
    stream_file = config.source.paths[0]
    stream_file.touch()
    stop = threading.Event()
    max_bytes = int(args.max_stream_mb * 1e6)
    writer = StreamWriter(stream_file, DriftingStream(seed=args.seed, bad_fraction=0.001),
                          args.rate, stop, max_bytes=max_bytes)
    running: list[Service] = []  # the service of the current start
    stopped_by_user = threading.Event()

    def stop_demo() -> None:
        stopped_by_user.set()
        running[-1].request_stop()

    service = Service(config, reset_model=args.reset_model)
    running.append(service)
    _install_stop_handlers(stop_demo)
    _say_if_compiling()
    try:
        service.start()
    except (ConfigError, CheckpointError, StateError, OSError) as exc:
        _error(str(exc))
        return EXIT_CONFIG if isinstance(exc, ConfigError) else EXIT_FAILURE
    if service.metrics_server is not None:  # a start over listens where the page is open
        config = demo_config(state, metrics_port=service.metrics_server.port)
    max_output = int(args.max_output_mb * 1e6)
    out = sys.stdout
    if service.metrics_server is not None and service.cluster_view is not None:
        out.write(f"streamkm demo: watch the clusters at {service.metrics_server.base_url}/\n")
    out.write(f"streamkm demo: state in {state}, at most "
              f"{2 * args.max_stream_mb + args.max_output_mb:g} MB plus the checkpoints\n")
    out.write(f"  stream   {stream_file} ({args.rate:g} records/s; at {args.max_stream_mb:g} "
              f"MB it moves to {writer.rotated.name}, so at most {2 * args.max_stream_mb:g} "
              f"MB)\n")
    out.write(f"  model    {config.checkpoint.dir} (the newest {config.checkpoint.keep} "
              f"checkpoints are kept)\n")
    if service.metrics_server is not None:
        base = service.metrics_server.base_url
        out.write(f"  metrics  {service.metrics_server.url}\n")
        out.write(f"  health   {base}/healthz (alive), {base}/readyz (ready)\n")
    out.write(f"  output   {config.sinks.assignments}\n")
    out.write(f"  rejects  {config.sinks.dead_letter} (1 line in 1,000 is malformed on purpose)\n")
    out.write(f"  bound    once the outputs hold {args.max_output_mb:g} MB together, the demo "
              f"starts over with a fresh model on the current stream file\n")
    out.write("  Ctrl-C to stop (state is kept; run again to resume)\n")
    out.flush()
    writer.start()
    timer = None
    if args.duration is not None:
        timer = threading.Timer(args.duration, stop_demo)
        timer.daemon = True
        timer.start()
    try:
        while True:
            if not _run_demo_service(service, config, max_output, out, stopped_by_user):
                break
            start_over(config)
            out.write(f"\nstreamkm demo: the outputs reached {args.max_output_mb:g} MB: "
                      f"starting over with a fresh model on the current stream file\n")
            out.flush()
            service = Service(config)
            running.append(service)
            if stopped_by_user.is_set():
                break
            try:
                service.start()
            except (ConfigError, CheckpointError, StateError, OSError) as exc:
                _error(str(exc))
                return EXIT_FAILURE
    finally:
        stop.set()
        if timer is not None:
            timer.cancel()
        writer.join(timeout=2)
    s = service.status
    out.write(f"stopped: {s.records_accepted} records clustered, {s.records_rejected} "
              f"rejected, step {s.step}, {s.checkpoints} checkpoints written\n")
    return EXIT_OK


def _run_demo_service(service: Any, config: Any, max_output: int, out: Any,
                      stopped_by_user: threading.Event) -> bool:
    """Run the demo's started ``service`` with its status line until it stops; True when
    it stopped because its outputs reached ``max_output`` bytes."""
    from streamkm.app.demo import StatusLine
    from streamkm.app.demo_footprint import OutputsBound, output_paths

    status_stop = threading.Event()
    status = StatusLine(service, status_stop, out)
    bound = OutputsBound(output_paths(config), max_output, service.request_stop)
    status.start()
    bound.start()
    try:
        service.run()
    finally:
        bound.finish()
        status_stop.set()
        status.join(timeout=2)
    return bound.reached.is_set() and not stopped_by_user.is_set()


def cmd_checkpoint_export(args: argparse.Namespace) -> int:
    """``streamkm checkpoint export DIR -o model.npz``."""
    from streamkm.io.model_export import export_model

    try:
        checkpoint, model = export_model(args.dir, args.output)
    except (CheckpointError, StateError, OSError) as exc:
        _error(str(exc))
        return EXIT_FAILURE
    sys.stdout.write(f"wrote {args.output}: {type(model).__name__} at step "
                     f"{int(getattr(model, 'n_steps_', 0))} from {checkpoint.path.name}; "
                     f"load it with {type(model).__name__}.load\n")
    return EXIT_OK


def cmd_plot(args: argparse.Namespace) -> int:
    """``streamkm plot DIR [--data FILE] -o clusters.png``."""
    from streamkm.view.plot import checkpoint_view, render_png

    try:
        doc, title = checkpoint_view(args.dir, data=args.data)
        out = render_png(doc, args.output, title=title)
    except ConfigError as exc:
        _error(str(exc))
        return EXIT_CONFIG
    except (CheckpointError, StateError, OSError) as exc:
        _error(str(exc))
        return EXIT_FAILURE
    sys.stdout.write(f"wrote {out}: {len(doc['points']['x'])} records, "
                     f"{len(doc['clusters'])} clusters ({title})\n")
    return EXIT_OK


def cmd_checkpoint_inspect(args: argparse.Namespace) -> int:
    """``streamkm checkpoint inspect DIR``."""
    from streamkm.app.inspect import print_checkpoints, summarize_checkpoints

    try:
        summaries = summarize_checkpoints(args.dir)
    except (FileNotFoundError, NotADirectoryError) as exc:
        _error(str(exc))
        return EXIT_FAILURE
    if args.json:
        sys.stdout.write(json.dumps(summaries, indent=2, sort_keys=True) + "\n")
    else:
        print_checkpoints(summaries, sys.stdout)
    return EXIT_OK if any(s["valid"] for s in summaries) else EXIT_FAILURE


def cmd_completion(args: argparse.Namespace) -> int:
    """``streamkm completion bash``: print the bash completion script."""
    from streamkm.completion import bash_completion

    sys.stdout.write(bash_completion(build_parser()))
    return EXIT_OK


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``streamkm`` command."""
    parser = argparse.ArgumentParser(
        prog="streamkm", description="Streaming kernel k-means service.")
    parser.add_argument("--version", action="version", version=f"streamkm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    levels = ["debug", "info", "warning", "error"]

    run = sub.add_parser("run", help="run the service with a TOML configuration")
    run.add_argument("-c", "--config", required=True, help="TOML configuration file")
    run.add_argument("--log-level", choices=levels, help="override [logging] level")
    run.add_argument("--reset-model", action="store_true",
                     help="start a fresh model over the latest checkpoint: keep its input "
                          "positions and outputs, discard its model (after a change of a "
                          "model-defining setting)")
    run.add_argument("--from-start", action="store_true",
                     help="with --reset-model: read the input files again from their "
                          "beginning; the checkpoints move to a replaced-<time> folder of "
                          "[checkpoint] dir and the output files are emptied, so they hold "
                          "the new model's output only")
    run.add_argument("--on-existing-output", choices=["fail", "truncate", "append", "resume"],
                     default="fail",
                     help="without a checkpoint, what to do with non-empty output files: "
                          "refuse, empty them, write after them, or resume after the last "
                          "checkpoint's outputs with a fresh model (default: %(default)s)")
    run.add_argument("--status", action=argparse.BooleanOptionalAction, default=None,
                     help="rewrite a one-line status (records/s, counts, objective, clusters, "
                          "step) on stderr once a second (default: on when stderr is a "
                          "terminal); the [status] log event is independent of it")
    run.set_defaults(func=cmd_run)

    conf = sub.add_parser("config", help="configuration tools")
    conf_sub = conf.add_subparsers(dest="config_command", required=True)
    show = conf_sub.add_parser("show", help="print the effective configuration (file plus "
                                            "STREAMKM_* variables) as TOML, secrets masked")
    show.add_argument("-c", "--config", required=True, help="TOML configuration file")
    show.set_defaults(func=cmd_config_show)
    check = conf_sub.add_parser("check", help="validate, print the effective configuration "
                                              "and make run's checks: paths, ports, brokers, "
                                              "the checkpoint's settings, ignored STREAMKM_* "
                                              "variables (exit 0/2)")
    check.add_argument("-c", "--config", required=True, help="TOML configuration file")
    check.set_defaults(func=cmd_config_check)

    demo = sub.add_parser("demo", help="cluster a generated drifting stream live")
    demo.add_argument("--state-dir", default=".streamkm/demo",
                      help="folder for the stream, checkpoints and output "
                           "(default: %(default)s)")
    demo.add_argument("--rate", type=_positive_float, default=2000.0,
                      help="records per second written to the stream (default: %(default)s)")
    demo.add_argument("--duration", type=_positive_float, default=None,
                      help="stop after this many seconds (default: run until Ctrl-C)")
    demo.add_argument("--metrics-port", type=int, default=9108,
                      help="port of the live page and metrics on 127.0.0.1, 0 = any free "
                           "port; a port in use is an error (default: %(default)s)")
    demo.add_argument("--max-stream-mb", type=_positive_float, default=32.0,
                      help="size at which the stream file moves to stream.jsonl.1 "
                           "(replacing the older one): the stream takes at most twice "
                           "this (default: %(default)s)")
    demo.add_argument("--max-output-mb", type=_positive_float, default=200.0,
                      help="size of the output files (assignments, events, dead letters) "
                           "together at which the demo starts over with a fresh model on "
                           "the current stream file (default: %(default)s)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the generated stream")
    demo.add_argument("--log-level", choices=levels, help="log level (default: warning)")
    demo.add_argument("--reset-model", action="store_true",
                      help="start a fresh model over the kept state (after a streamkm "
                           "upgrade changed the demo's model settings)")
    demo.set_defaults(func=cmd_demo)

    ckpt = sub.add_parser("checkpoint", help="checkpoint tools")
    ckpt_sub = ckpt.add_subparsers(dest="checkpoint_command", required=True)
    inspect = ckpt_sub.add_parser("inspect", help="list the checkpoints in a folder")
    inspect.add_argument("dir", help="checkpoint folder ([checkpoint] dir)")
    inspect.add_argument("--json", action="store_true",
                         help="print every checkpoint's summary with raw positions as JSON")
    inspect.set_defaults(func=cmd_checkpoint_inspect)
    export = ckpt_sub.add_parser(
        "export", help="write the current model in the estimator's format (.npz)")
    export.add_argument("dir", help="checkpoint folder ([checkpoint] dir)")
    export.add_argument("-o", "--output", required=True, help="model file to write (.npz)")
    export.set_defaults(func=cmd_checkpoint_export)

    plot = sub.add_parser(
        "plot", help="draw the clusters of a checkpoint's model as a PNG (needs matplotlib)")
    plot.add_argument("dir", help="checkpoint folder ([checkpoint] dir)")
    plot.add_argument("--data", help="records to draw (JSON lines, or .csv with a header); "
                                     "default: the model's own support rows")
    plot.add_argument("-o", "--output", required=True, help="PNG file to write")
    plot.set_defaults(func=cmd_plot)

    completion = sub.add_parser(
        "completion", help="print a shell completion script: source <(streamkm completion bash)")
    completion.add_argument("shell", choices=["bash"], help="the shell")
    completion.set_defaults(func=cmd_completion)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``streamkm`` console script; returns the exit code (130 after a
    Ctrl-C that came before the stop handlers were installed)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        sys.stderr.write("\nstreamkm: interrupted\n")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
