"""Checks of the environment a configuration needs, made before the service starts.

``streamkm run`` calls :func:`preflight` after loading the configuration and refuses to
start (exit 2) on any error; ``streamkm config check`` prints every finding. Each finding is
one line naming the key, its value and the fix, e.g.::

    metrics.port 9108 is in use: set [metrics] port or STREAMKM_METRICS__PORT=0

Checked: the metrics address resolves to an address of this host and its port is free; the
checkpoint folder and the output files can be created and written (a probe file is written,
fsynced and removed, so a read-only or full file system is found before any output exists);
no configured path lies under a regular file; source files are readable (a missing one is a
warning: the tailer waits for it); with ``network=True`` the servers of the source and
sinks kinds accept a connection (e.g. the Kafka bootstrap servers). Which files a kind reads
and writes and how its servers are reached are the hooks its connector registered
(:class:`streamkm.io.registry.KindHooks`).

:func:`check_existing_outputs` refuses a start without a checkpoint over non-empty output
files, which the service could not account for (``--on-existing-output``).
:func:`checkpoint_findings` is the refusal ``run`` makes of a model-defining setting changed
since the newest checkpoint (:mod:`streamkm.config.diff`), for ``config check``.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from streamkm.config.schema import ServiceConfig
from streamkm.exceptions import ConfigError
from streamkm.io import registry
from streamkm.io.checkpoint_files import checkpoint_files

__all__ = ["Finding", "preflight", "metrics_bind_error", "check_existing_outputs",
           "existing_outputs", "checkpoint_findings", "empty_files", "PROBE_BYTES", "OnExistingOutput"]

#: Bytes written by the probe of a folder: a file system with less room fails the probe.
PROBE_BYTES = 64 * 1024

OnExistingOutput = Literal["fail", "truncate", "append", "resume"]


@dataclass(frozen=True)
class Finding:
    """One problem: ``severity`` is ``"error"`` (the service cannot work) or ``"warning"``."""

    severity: Literal["error", "warning"]
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.message}"


def _fix(key: str) -> str:
    section, _, name = key.partition(".")
    name = name.split("[")[0]
    return f"set [{section}] {name} or STREAMKM_{section.upper()}__{name.upper()}"


def _reason(exc: OSError) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the file system is full"
    if exc.errno == errno.EROFS:
        return "the file system is read-only"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or str(exc)


def _file_ancestor(path: Path) -> Path | None:
    """The nearest ancestor of ``path`` that exists and is not a folder, if any."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or ".")


def _probe_folder(folder: Path) -> OSError | None:
    """Write, fsync and remove a :data:`PROBE_BYTES` file in ``folder``."""
    try:
        fd, name = tempfile.mkstemp(prefix=".streamkm-probe-", dir=folder)
    except OSError as exc:
        return exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"\0" * PROBE_BYTES)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        return exc
    finally:
        try:
            os.unlink(name)
        except OSError:
            pass
    return None


def _check_folder(key: str, folder: Path) -> list[Finding]:
    """A folder the service writes into (created if missing)."""
    above = _file_ancestor(folder)
    if above is not None:
        return [Finding("error", f"{key} {str(folder)!r} is under the file {str(above)!r}, "
                                 f"not a folder: {_fix(key)} to a folder path")]
    if folder.exists() and not folder.is_dir():
        return [Finding("error", f"{key} {str(folder)!r} is a file, not a folder: "
                                 f"{_fix(key)} to a folder path")]
    target = _nearest_existing(folder)
    failure = _probe_folder(target)
    if failure is not None:
        where = "" if target == folder else f" (its existing parent {str(target)!r})"
        return [Finding("error", f"{key} {str(folder)!r} is not writable{where}: "
                                 f"{_reason(failure)}: {_fix(key)} to a writable folder")]
    return []


def _not_a_folder(key: str, path: Path, target: str) -> list[Finding]:
    if path.is_dir():
        return [Finding("error", f"{key} {str(path)!r} is a folder, not a file: "
                                 f"{_fix(key)} to {target}")]
    return []


def _opens(key: str, path: Path, mode: str, failure: str, target: str) -> list[Finding]:
    """Open ``path`` with ``mode`` and close it (appending nothing)."""
    try:
        with open(path, mode):
            pass
    except OSError as exc:
        return [Finding("error", f"{key} {str(path)!r} {failure}: {_reason(exc)}: "
                                 f"{_fix(key)} to {target}")]
    return []


def _check_output_file(key: str, path: Path) -> list[Finding]:
    """A file the service appends to (created with its folder if missing)."""
    findings = _not_a_folder(key, path, "a file path") or _check_folder(key, path.parent)
    if findings or not path.exists():
        return findings
    return _opens(key, path, "ab", "cannot be appended to", "a writable file")


def _check_source_file(key: str, path: Path) -> list[Finding]:
    above = _file_ancestor(path)
    if above is not None:
        return [Finding("error", f"{key} {str(path)!r} is under the file {str(above)!r}: "
                                 f"{_fix(key)} to the files to read")]
    if not path.exists():
        return [Finding("warning", f"{key} {str(path)!r} does not exist (yet): the service "
                                   f"waits for it; {_fix(key)} if that is not the input")]
    return (_not_a_folder(key, path, "the files to read")
            or _opens(key, path, "rb", "cannot be read", "readable files"))


def _resolve(address: str, port: int) -> list[tuple[int, tuple]] | ConfigError:
    try:
        infos = socket.getaddrinfo(address or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return ConfigError(f"metrics.address {address!r} does not resolve ({exc.strerror}): "
                           f"{_fix('metrics.address')} (e.g. 127.0.0.1)")
    return [(family, sockaddr) for family, _t, _p, _c, sockaddr in infos]


def metrics_bind_error(address: str, port: int, exc: OSError) -> ConfigError:
    """The one-line error for a metrics listener that cannot bind ``address:port``."""
    if exc.errno == errno.EADDRINUSE:
        return ConfigError(f"metrics.port {port} is in use: set [metrics] port or "
                           f"STREAMKM_METRICS__PORT=0 (any free port)")
    if exc.errno == errno.EADDRNOTAVAIL:
        return ConfigError(f"metrics.address {address!r} is not an address of this host: "
                           f"{_fix('metrics.address')} (e.g. 127.0.0.1)")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return ConfigError(f"metrics.port {port} needs privileges to bind: set [metrics] "
                           f"port above 1023 or STREAMKM_METRICS__PORT=0")
    if isinstance(exc, socket.gaierror):
        return ConfigError(f"metrics.address {address!r} does not resolve ({exc.strerror}): "
                           f"{_fix('metrics.address')} (e.g. 127.0.0.1)")
    return ConfigError(f"metrics {address!r} port {port} cannot be served: "
                       f"{exc.strerror or exc}: {_fix('metrics.port')}")


def _check_metrics(config: ServiceConfig) -> list[Finding]:
    address, port = config.metrics.address, config.metrics.port
    resolved = _resolve(address, port)
    if isinstance(resolved, ConfigError):
        return [Finding("error", str(resolved))]
    family, sockaddr = resolved[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # as the HTTP server does: a port in TIME_WAIT is free, a listening one is not
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(sockaddr)
        except OSError as exc:
            return [Finding("error", str(metrics_bind_error(address, port, exc)))]
    return []


def _check_reachable(config: ServiceConfig, timeout_s: float) -> list[Finding]:
    checks = [registry.source_hooks(config.source.kind).reachability,
              registry.sinks_hooks(config.sinks.kind).reachability]
    findings: list[Finding] = []
    for i, check in enumerate(checks):
        if check is not None and check not in checks[:i]:  # a check both kinds share: once
            findings += [Finding("error", message) for message in check(config, timeout_s)]
    return findings


def preflight(config: ServiceConfig, *, network: bool = False,
              broker_timeout_s: float = 3.0) -> list[Finding]:
    """Every problem of the environment that would stop or mislead the service.

    Parameters
    ----------
    config : ServiceConfig
        The validated configuration (paths absolute).
    network : bool
        Also try a connection to the servers of the source and sinks kinds (e.g. the Kafka
        bootstrap servers).
    broker_timeout_s : float
        Connection timeout per bootstrap server.

    Returns
    -------
    list of Finding
        Errors first; empty when everything is in order.
    """
    findings: list[Finding] = []
    if config.metrics.enabled:
        findings += _check_metrics(config)
    findings += _check_folder("checkpoint.dir", Path(config.checkpoint.dir))
    for key, path in registry.output_files(config.sinks):
        findings += _check_output_file(key, path)
    if config.sinks.model is not None:  # the model file, with any sinks kind
        findings += _check_output_file("sinks.model", Path(config.sinks.model))
    for key, path in registry.input_files(config.source):
        findings += _check_source_file(key, path)
    if network:
        findings += _check_reachable(config, broker_timeout_s)
    return sorted(findings, key=lambda f: f.severity != "error")


def existing_outputs(config: ServiceConfig) -> list[Path]:
    """Non-empty output files of a service that has no checkpoint yet (empty otherwise).

    Without a checkpoint the service cannot know which of their lines it wrote, so it
    would append after them as if they were its own.
    """
    paths = [path for _, path in registry.output_files(config.sinks)]
    folder = Path(config.checkpoint.dir)
    if not paths or folder.is_dir() and checkpoint_files(folder):
        return []
    return [p for p in paths if p.is_file() and p.stat().st_size > 0]


def check_existing_outputs(config: ServiceConfig, mode: OnExistingOutput) -> list[Path]:
    """Apply ``--on-existing-output`` to :func:`existing_outputs`; return the files found.

    ``fail`` raises, ``truncate`` empties the files, ``append`` keeps them, ``resume``
    checks that the resume point beside them reads (the runtime truncates the files to its
    lengths and resumes the input from its positions, :mod:`streamkm.io.resume_point`).

    Raises
    ------
    ConfigError
        ``mode = "fail"`` and output files are not empty, or ``mode = "resume"`` and there
        is no usable resume point.
    """
    found = existing_outputs(config)
    if not found:
        return found
    if mode == "fail":
        names = ", ".join(repr(str(p)) for p in found)
        raise ConfigError(
            f"no checkpoint in {str(config.checkpoint.dir)!r} but the output files {names} "
            f"are not empty: the service cannot tell which lines it wrote. Start with "
            f"--on-existing-output=resume to continue after the last checkpoint's outputs "
            f"with a fresh model, --on-existing-output=truncate to empty them, "
            f"--on-existing-output=append to keep them and write after them, or restore "
            f"the checkpoint folder")
    if mode == "resume":
        from streamkm.io.resume_point import read_resume_point, resume_point_path
        from streamkm.exceptions import StateError

        point = resume_point_path(config.sinks)
        try:
            if point is None:
                raise StateError("the outputs have no resume point")
            read_resume_point(point)
        except StateError as exc:
            raise ConfigError(f"--on-existing-output=resume: {exc}; use "
                              f"--on-existing-output=truncate or append instead") from None
    if mode == "truncate":
        empty_files(found)
    return found


def empty_files(paths: list[Path]) -> None:
    """Truncate each file to 0 bytes, durably."""
    for path in paths:
        with open(path, "r+b") as fh:
            fh.truncate(0)
            os.fsync(fh.fileno())


def checkpoint_findings(config: ServiceConfig) -> list[Finding]:
    """The refusal ``streamkm run`` makes of ``config`` against the newest checkpoint that
    verifies (a changed model-defining setting), as an error; nothing without a checkpoint.
    Reads only (no temporary file is removed, nothing is logged)."""
    folder = Path(config.checkpoint.dir)
    if config.scaleout.enabled or not folder.is_dir() or not checkpoint_files(folder):
        return []
    from streamkm.config.diff import check_against_checkpoint
    from streamkm.exceptions import StateError
    from streamkm.io.checkpoint import read_checkpoint  # numpy: only with a checkpoint

    for path in reversed(checkpoint_files(folder)):
        try:
            checkpoint = read_checkpoint(path)
        except StateError:
            continue  # run falls back to the previous one too
        try:
            check_against_checkpoint(config, checkpoint.meta, str(path), log=False)
        except ConfigError as exc:
            return [Finding("error", str(exc))]
        return []
    return []
