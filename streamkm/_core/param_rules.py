"""What a parameter accepts, in plain Python: checked without scikit-learn, worded like it.

An estimator's parameters are a table of :class:`Parameter` (name, default, rules). The
table is what the configuration's ``[model]`` section checks values against, so that
``streamkm config check`` needs neither scikit-learn nor numba; the estimator turns the same
table into scikit-learn's ``_parameter_constraints`` (:func:`sklearn_constraints`) for
scikit-learn's tools, and checks its parameters with the same rules
(:func:`parameter_problem`), so a bad value gives one message everywhere: scikit-learn's
``The 'x' parameter of Estimator must be ... Got ... instead.``

A rule is one of :class:`Interval` (numbers in a range), :class:`Options` (a set of
strings), :class:`InstanceOf` (instances of a type), :data:`NONE` and :data:`BOOLEAN`; its
``str`` is the text scikit-learn's matching constraint gives.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import importlib
import math
import operator
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from streamkm.exceptions import parameter_message

__all__ = ["Rule", "Interval", "Options", "InstanceOf", "NONE", "BOOLEAN", "RANDOM_STATE_RULES", "Parameter",
           "parameter_problem", "sklearn_constraints", "is_text_only"]


class Rule(ABC):
    """One kind of accepted value (subclasses say which)."""

    @abstractmethod
    def accepts(self, value: Any) -> bool:
        """Whether ``value`` satisfies the rule."""

    @abstractmethod
    def to_sklearn(self) -> Any:
        """The scikit-learn constraint with the same meaning and text."""


@dataclass(frozen=True)
class Interval(Rule):
    """Numbers (``kind`` ``"int"`` or ``"float"``; a float rule takes ints too) between
    ``left`` and ``right`` (None: unbounded), ``closed`` on ``"left"``, ``"right"``,
    ``"both"`` or ``"neither"`` side."""

    kind: str
    left: float | int | None
    right: float | int | None
    closed: str

    def accepts(self, value: Any) -> bool:
        if not isinstance(value, Integral if self.kind == "int" else Real):
            return False
        if not isinstance(value, Integral) and math.isnan(value):
            return False
        left_out = operator.lt if self.closed in ("left", "both") else operator.le
        right_out = operator.gt if self.closed in ("right", "both") else operator.ge
        left = -math.inf if self.left is None else self.left  # an open end refuses infinity
        right = math.inf if self.right is None else self.right
        return not (left_out(value, left) or right_out(value, right))

    def __str__(self) -> str:
        def bound(value: float | int | None, unbounded: str) -> Any:
            if value is None:
                return unbounded
            return value if self.kind == "int" else float(value)

        left = "[" if self.closed in ("left", "both") else "("
        right = "]" if self.closed in ("right", "both") else ")"
        return (f"{'an int' if self.kind == 'int' else 'a float'} in the range "
                f"{left}{bound(self.left, '-inf')}, {bound(self.right, 'inf')}{right}")

    def to_sklearn(self) -> Any:
        from sklearn.utils._param_validation import Interval as SklearnInterval

        kind = Integral if self.kind == "int" else Real
        return SklearnInterval(kind, self.left, self.right, closed=self.closed)


class Options(Rule):
    """One of a set of strings (``options``; a subclass may compute them when asked)."""

    def __init__(self, options: Iterable[str]) -> None:
        self._options = set(options)

    @property
    def options(self) -> set[str]:
        """The accepted strings."""
        return self._options

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.options

    def __str__(self) -> str:
        return f"a str among {{{', '.join(repr(o) for o in self.options)}}}"

    def __repr__(self) -> str:
        return f"Options({sorted(self.options)!r})"

    def to_sklearn(self) -> Any:
        from sklearn.utils._param_validation import StrOptions

        return StrOptions(self.options)


class InstanceOf(Rule):
    """Instances of a type, given as the type or as ``"module:QualName"`` (imported only
    when a value is checked against it or the rule is described)."""

    def __init__(self, kind: type | str) -> None:
        self._kind = kind

    @property
    def type(self) -> type:
        """The type."""
        if isinstance(self._kind, str):
            module, _, name = self._kind.partition(":")
            self._kind = getattr(importlib.import_module(module), name)
        return self._kind

    def is_of(self, kind: type) -> bool:
        """Whether the rule is for instances of ``kind`` (imports nothing)."""
        return self._kind is kind

    def accepts(self, value: Any) -> bool:
        if isinstance(self._kind, str):  # a value of a type never imported is not one
            module = self._kind.partition(":")[0].split(".")[0]
            if module not in sys.modules:
                return False
        return isinstance(value, self.type)

    def __str__(self) -> str:
        kind = self.type
        name = (kind.__qualname__ if kind.__module__ == "builtins"
                else f"{kind.__module__}.{kind.__qualname__}")
        return f"an instance of {name!r}"

    def __repr__(self) -> str:
        return f"InstanceOf({self._kind!r})"

    def to_sklearn(self) -> Any:
        return self.type


class _NoneRule(Rule):
    def accepts(self, value: Any) -> bool:
        return value is None

    def __str__(self) -> str:
        return "None"

    def __repr__(self) -> str:
        return "NONE"

    def to_sklearn(self) -> Any:
        return None


class _BooleanRule(Rule):
    _parts = (InstanceOf(bool), InstanceOf("numpy:bool_"))

    def accepts(self, value: Any) -> bool:
        return any(part.accepts(value) for part in self._parts)

    def __str__(self) -> str:
        return " or ".join(str(part) for part in self._parts)

    def __repr__(self) -> str:
        return "BOOLEAN"

    def to_sklearn(self) -> Any:
        return "boolean"


#: The value None.
NONE: Rule = _NoneRule()
#: ``True`` / ``False`` (numpy's booleans too).
BOOLEAN: Rule = _BooleanRule()
#: ``random_state`` in every estimator: None, a non-negative int seed or a numpy Generator
#: (see :func:`streamkm._core.validation.check_random_state`).
RANDOM_STATE_RULES: tuple[Rule, ...] = (Interval("int", 0, None, "left"),
                                        InstanceOf("numpy.random:Generator"), NONE)


@dataclass(frozen=True)
class Parameter:
    """One estimator parameter: its name, its default and the rules a value must meet
    (any one of them)."""

    name: str
    default: Any
    rules: tuple[Rule, ...]


def _is_bool(value: Any) -> bool:
    return BOOLEAN.accepts(value)


def parameter_problem(owner: str, parameter: Parameter, value: Any) -> str | None:
    """What is wrong with ``value`` for ``parameter`` of ``owner``, or None if nothing.

    A bool is refused unless the parameter accepts booleans (``True`` is an int to Python,
    never a number of clusters here). The message is scikit-learn's
    (:func:`streamkm.exceptions.parameter_message`).
    """
    rules = parameter.rules
    takes_bool = any(rule is BOOLEAN or (isinstance(rule, InstanceOf) and rule.is_of(bool))
                     for rule in rules)
    if (takes_bool or not _is_bool(value)) and any(rule.accepts(value) for rule in rules):
        return None
    texts = [str(rule) for rule in rules]
    accepted = texts[0] if len(texts) == 1 else f"{', '.join(texts[:-1])} or {texts[-1]}"
    return parameter_message(owner, parameter.name, accepted, value)


def is_text_only(parameter: Parameter) -> bool:
    """Whether every value the parameter accepts is a string."""
    return all(isinstance(rule, Options) for rule in parameter.rules)


def sklearn_constraints(parameters: Sequence[Parameter]) -> dict[str, list[Any]]:
    """The table as scikit-learn's ``_parameter_constraints`` (imports scikit-learn)."""
    return {p.name: [rule.to_sklearn() for rule in p.rules] for p in parameters}

