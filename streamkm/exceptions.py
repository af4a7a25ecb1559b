"""The error hierarchy of streamkm.

Every error raised on purpose by streamkm derives from :class:`StreamkmError` and from
the builtin exception a caller would naturally catch (``ValueError`` for bad values,
``AttributeError`` for use before fitting, ...). Messages quote the offending value.
"""

from __future__ import annotations

from sklearn.exceptions import NotFittedError as _SklearnNotFittedError
from sklearn.utils._param_validation import InvalidParameterError as _SklearnParameterError

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


class ParameterError(StreamkmError, _SklearnParameterError):
    """A constructor or function parameter has a bad value.

    Also scikit-learn's ``InvalidParameterError`` (a ``ValueError`` and a ``TypeError``),
    so scikit-learn tools recognise it.
    """


class NotFittedError(StreamkmError, _SklearnNotFittedError):
    """The estimator is used before it was fitted.

    Also scikit-learn's ``NotFittedError`` (an ``AttributeError`` and a ``ValueError``).
    """


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
