"""JSON (de)serialisation of a numpy random generator's state, for checkpoints.

One format for every saved generator (the engine, the drift controller, the sketch
reservoir): numpy's ``bit_generator.state`` dict with arrays written as
``{"__ndarray__": [...], "dtype": name}`` and numpy integers as ints.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamkm.exceptions import ParameterError, StateError

__all__ = ["rng_state_to_json", "rng_from_json_state"]

_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")


def rng_state_to_json(rng: np.random.Generator) -> dict[str, Any]:
    """The JSON-able state of ``rng``.

    Raises
    ------
    ParameterError
        ``rng`` uses a bit generator outside PCG64, PCG64DXSM, Philox, SFC64, MT19937.
    """
    state = rng.bit_generator.state
    if state.get("bit_generator") not in _BIT_GENERATORS:
        raise ParameterError(f"unsupported bit generator {state.get('bit_generator')!r}")

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, np.ndarray):
            return {"__ndarray__": value.tolist(), "dtype": value.dtype.name}
        if isinstance(value, np.integer):
            return int(value)
        return value

    return convert(state)


def rng_from_json_state(state: Any) -> np.random.Generator:
    """The generator saved by :func:`rng_state_to_json`.

    Raises
    ------
    StateError
        ``state`` is not such a state (unknown bit generator, malformed fields).
    """
    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            if "__ndarray__" in value:
                return np.asarray(value["__ndarray__"], dtype=value["dtype"])
            return {k: convert(v) for k, v in value.items()}
        return value

    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in _BIT_GENERATORS:
        raise StateError(f"unsupported random generator {state!r} in saved state")
    bit_generator = getattr(np.random, name)()
    try:
        bit_generator.state = convert(state)
    except (TypeError, ValueError, KeyError) as exc:
        raise StateError(f"malformed random generator state in saved state: {exc!r}") from exc
    return np.random.Generator(bit_generator)
