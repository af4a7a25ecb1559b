"""The error hierarchy of streamkm.

Every error raised on purpose by streamkm derives from :class:`StreamkmError` and from
the builtin exception a caller would naturally catch (``ValueError`` for bad values,
``AttributeError`` for use before fitting, ...). Messages quote the offending value.

:class:`ParameterError` and :class:`NotFittedError` also derive from scikit-learn's own
exceptions, so they are created on first use (module ``__getattr__``): importing this module,
or ``streamkm``, does not import scikit-learn, which commands that never build a model
(``streamkm --version``, ``--help``, ``config check``, ``checkpoint inspect``) do not need;
modules on those paths raise them through :func:`parameter_error`.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = [
    "StreamkmError",
    "ValidationError",
    "InputTypeError",
    "ParameterError",
    "NotFittedError",
    "StateError",
    "ConfigError",
    "CheckpointError",
    "OutputTransactionError",
    "DecodeError",
    "SinkError",
    "TransportError",
    "NoLevelSetError",
    "StorageError",
    "OutputRecordError",
    "parameter_message",
    "parameter_error",
]


class StreamkmError(Exception):
    """Base class of every error streamkm raises on purpose."""


class ValidationError(StreamkmError, ValueError):
    """Input data is not acceptable (not 2-D, not finite, wrong feature count, ...)."""


class NoLevelSetError(ValidationError):
    """The ``level_set`` kernel cannot be fitted: no density level set of the rows splits
    into the requested number of pieces."""


class InputTypeError(ValidationError, TypeError):
    """Input data of a type that cannot be used at all (e.g. sparse where dense is needed,
    objects that are not numbers); also a ``TypeError``, as in scikit-learn."""


class StateError(StreamkmError, ValueError):
    """A saved state is malformed, corrupt, or of an unsupported format version."""


class ConfigError(StreamkmError, ValueError):
    """A service configuration key has a bad value or is unknown."""


class CheckpointError(StreamkmError, OSError):
    """No usable checkpoint could be written or read."""


class DecodeError(StreamkmError, ValueError):
    """A raw record could not be decoded into a feature vector."""


class SinkError(StreamkmError, OSError):
    """A sink could not make its entries durable (e.g. the Kafka broker is unreachable);
    the checkpoint that needed them is not written and is retried."""


class OutputTransactionError(StreamkmError, RuntimeError):
    """A transaction of outputs (exactly-once Kafka outputs) failed for good: the producer
    was fenced by another one with the same transactional id, a message of the transaction
    was refused, or its partitions were lost. The outputs since the last checkpoint are
    aborted and the model is ahead of them, so the service stops; a restart resumes from the
    last checkpoint and writes them again. Not an ``OSError``: never retried in place."""


class TransportError(StreamkmError, OSError):
    """A message transport (the Kafka broker of scale-out mode) did not take or deliver a
    message; connectors translate their client library's errors into it. Retried."""


class StorageError(StreamkmError, OSError):
    """The file system refused a write of an output file or a checkpoint (full, quota,
    read-only, I/O error): a fault of the device, not of any record.

    The runtime pauses ingestion and retries until the write succeeds. ``target`` names what
    was being written (``assignments``, ``events``, ``dead_letter``, ``checkpoint``);
    ``errno`` and ``strerror`` are the operating system's.
    """

    def __init__(self, target: str, error: OSError) -> None:
        where = f" ({error.filename})" if error.filename else ""
        super().__init__(error.errno, f"{target}: {error.strerror or error}{where}")
        self.target = target
        self.error = error

    @property
    def errno_name(self) -> str:
        """The symbolic errno (``ENOSPC``), or ``"unknown"``."""
        import errno as _errno

        return _errno.errorcode.get(self.errno or 0, "unknown")


class OutputRecordError(StreamkmError, ValueError):
    """One entry cannot be serialised or written by a sink for a reason of its own (an
    encoding or serialisation error of that entry), whatever the device. The record is
    dead-lettered with the error as its detail instead; it is never retried."""


def parameter_message(owner: str, name: str, accepted: str, value: Any) -> str:
    """The message of a bad parameter value, worded as scikit-learn's validation words it.

    Parameters
    ----------
    owner : str
        The estimator (or function) the parameter belongs to.
    name : str
        The parameter.
    accepted : str
        What the parameter accepts (``"an int in the range [1, inf)"``).
    value : object
        The refused value, quoted with ``repr``.

    Examples
    --------
    >>> parameter_message("MiniBatchKernelKMeans", "tau", "an int in the range [1, inf)", 0)
    "The 'tau' parameter of MiniBatchKernelKMeans must be an int in the range [1, inf). Got 0 instead."
    """
    return f"The {name!r} parameter of {owner} must be {accepted}. Got {value!r} instead."


def parameter_error(message: str) -> Exception:
    """A :class:`ParameterError` with ``message``, to ``raise``.

    For modules on the paths that load no scikit-learn (checking a configuration): a
    module-level ``from streamkm.exceptions import ParameterError`` creates the class, which
    imports scikit-learn; this creates it only when a parameter is bad.
    """
    return __getattr__("ParameterError")(message)


_SKLEARN_BASED_LOCK = threading.Lock()


def _define_parameter_error() -> type:
    from sklearn.utils._param_validation import InvalidParameterError

    class ParameterError(StreamkmError, InvalidParameterError):
        """A constructor or function parameter has a bad value.

        Also scikit-learn's ``InvalidParameterError`` (a ``ValueError`` and a ``TypeError``),
        so scikit-learn tools recognise it.
        """

    return ParameterError


def _define_not_fitted_error() -> type:
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    class NotFittedError(StreamkmError, SklearnNotFittedError):
        """The estimator is used before it was fitted.

        Also scikit-learn's ``NotFittedError`` (an ``AttributeError`` and a ``ValueError``).
        """

    return NotFittedError


_SKLEARN_BASED = {"ParameterError": _define_parameter_error,
                  "NotFittedError": _define_not_fitted_error}


def __getattr__(name: str) -> Any:
    """Create a scikit-learn based error class on first access (then a plain global)."""
    define = _SKLEARN_BASED.get(name)
    if define is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _SKLEARN_BASED_LOCK:
        cls = globals().get(name)
        if cls is None:
            cls = define()
            cls.__module__ = __name__
            cls.__qualname__ = name
            globals()[name] = cls
    return cls


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SKLEARN_BASED))
