"""The ``streamkm`` command line.

``streamkm run -c FILE``
    Run the service with a TOML configuration (exit 2 on a configuration error).
``streamkm demo``
    Generate a drifting non-linear stream into a file under ``./.streamkm/demo`` and
    cluster it live, with metrics and a one-line status.
``streamkm checkpoint inspect DIR``
    List the checkpoints in a folder: validity, step, counts, positions.

SIGTERM / SIGINT make the service finish its batch, checkpoint and exit 0.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from streamkm._version import __version__
from streamkm.exceptions import CheckpointError, ConfigError, StateError

__all__ = ["main", "build_parser"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2


def _error(message: str) -> None:
    sys.stderr.write(f"streamkm: error: {message}\n")
    sys.stderr.flush()


def _install_stop_handlers(stop: Callable[[], None]) -> None:
    """First SIGTERM/SIGINT: graceful stop. A second SIGINT: immediate KeyboardInterrupt."""
    def handler(signum: int, _frame: Any) -> None:
        stop()
        if signum == signal.SIGINT:
            signal.signal(signal.SIGINT, signal.default_int_handler)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _run_service(service: Any) -> int:
    from streamkm.logs import log_event

    _install_stop_handlers(service.request_stop)
    try:
        service.start()
    except ConfigError as exc:
        _error(str(exc))
        return EXIT_CONFIG
    except (CheckpointError, StateError, OSError) as exc:
        _error(str(exc))
        return EXIT_FAILURE
    try:
        service.run()
    except Exception as exc:
        import logging

        log_event(logging.getLogger("streamkm.service"), "error", "service_failed",
                  error=repr(exc))
        raise
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """``streamkm run -c FILE``."""
    from streamkm.service.config import load_config
    from streamkm.logs import configure_logging

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        _error(str(exc))
        return EXIT_CONFIG
    configure_logging(args.log_level or config.logging.level)
    from streamkm.runtime.build import build_runtime

    return _run_service(build_runtime(config))  # scale-out member or single process


def cmd_demo(args: argparse.Namespace) -> int:
    """``streamkm demo``: generate a drifting stream and cluster it live."""
    import socket

    from streamkm.service.demo import DriftingStream, StatusLine, StreamWriter, demo_config
    from streamkm.service.demo import dump_config
    from streamkm.logs import configure_logging
    from streamkm.service.runtime import Service

    state = Path(args.state_dir).resolve()
    state.mkdir(parents=True, exist_ok=True)
    port = args.metrics_port
    if port:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                port = 0
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
    writer = StreamWriter(stream_file, DriftingStream(seed=args.seed, bad_fraction=0.001),
                          args.rate, stop)
    service = Service(config)
    _install_stop_handlers(service.request_stop)
    try:
        service.start()
    except (ConfigError, CheckpointError, StateError, OSError) as exc:
        _error(str(exc))
        return EXIT_CONFIG if isinstance(exc, ConfigError) else EXIT_FAILURE
    out = sys.stdout
    out.write(f"streamkm demo: state in {state}\n")
    out.write(f"  stream   {stream_file} ({args.rate:g} records/s)\n")
    if service.metrics_server is not None:
        out.write(f"  metrics  {service.metrics_server.url}\n")
    out.write(f"  output   {config.sinks.assignments}\n")
    out.write("  Ctrl-C to stop (state is kept; run again to resume)\n")
    out.flush()
    writer.start()
    status = StatusLine(service, stop, out)
    status.start()
    timer = None
    if args.duration is not None:
        timer = threading.Timer(args.duration, service.request_stop)
        timer.daemon = True
        timer.start()
    try:
        service.run()
    finally:
        stop.set()
        if timer is not None:
            timer.cancel()
        writer.join(timeout=2)
        status.join(timeout=2)
    s = service.status
    out.write(f"stopped: {s.records_accepted} records clustered, {s.records_rejected} "
              f"rejected, step {s.step}, {s.checkpoints} checkpoints written\n")
    return EXIT_OK


def cmd_checkpoint_inspect(args: argparse.Namespace) -> int:
    """``streamkm checkpoint inspect DIR``."""
    from streamkm.service.inspect import print_checkpoints, summarize_checkpoints

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
    run.set_defaults(func=cmd_run)

    demo = sub.add_parser("demo", help="cluster a generated drifting stream live")
    demo.add_argument("--state-dir", default=".streamkm/demo",
                      help="folder for the stream, checkpoints and output "
                           "(default: %(default)s)")
    demo.add_argument("--rate", type=_positive_float, default=2000.0,
                      help="records per second written to the stream (default: %(default)s)")
    demo.add_argument("--duration", type=_positive_float, default=None,
                      help="stop after this many seconds (default: run until Ctrl-C)")
    demo.add_argument("--metrics-port", type=int, default=9108,
                      help="metrics port on 127.0.0.1, 0 = any free port; a busy port "
                           "falls back to a free one (default: %(default)s)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the generated stream")
    demo.add_argument("--log-level", choices=levels, help="log level (default: warning)")
    demo.set_defaults(func=cmd_demo)

    ckpt = sub.add_parser("checkpoint", help="checkpoint tools")
    ckpt_sub = ckpt.add_subparsers(dest="checkpoint_command", required=True)
    inspect = ckpt_sub.add_parser("inspect", help="list the checkpoints in a folder")
    inspect.add_argument("dir", help="checkpoint folder ([checkpoint] dir)")
    inspect.add_argument("--json", action="store_true", help="print JSON")
    inspect.set_defaults(func=cmd_checkpoint_inspect)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``streamkm`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
