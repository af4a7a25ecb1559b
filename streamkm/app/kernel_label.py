"""The label of the kernel a model runs: ``"auto -> heat"`` when ``gamma = "auto"`` chose
it, else the kernel's name (shown by ``config show``, ``checkpoint inspect``, the live page,
the ``kernel_chosen`` log event and the ``streamkm_model_kernel`` metric:
:mod:`streamkm.app.kernel_shown`).

With ``gamma = "auto"`` the rbf and laplacian kernels are a request, not a promise: the
model chooses, on its first batch, the median-width kernel itself or the linear, heat,
anchor-graph or density level-set kernel (:mod:`streamkm.kernels`). The reason is the fitted model's
``auto_decision_`` when it has one.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AUTO_KERNELS", "kernel_label", "model_kernel", "meta_kernel"]

#: Kernels whose ``gamma = "auto"`` lets the model choose another kernel.
AUTO_KERNELS = frozenset({"rbf", "laplacian"})


def kernel_label(configured: str, gamma: Any, resolved: str | None) -> str:
    """``"auto -> <resolved>"`` when ``gamma = "auto"`` (the default, also given as
    ``None``) chose the kernel, else the kernel's name; before the choice,
    ``"auto (chosen on the first batch)"``.

    Examples
    --------
    >>> kernel_label("rbf", "auto", "anchor"), kernel_label("rbf", 0.5, "rbf")
    ('auto -> anchor', 'rbf')
    >>> kernel_label("rbf", "auto", None), kernel_label("cosine", "auto", None)
    ('auto (chosen on the first batch)', 'cosine')
    """
    if configured not in AUTO_KERNELS or gamma not in ("auto", None):  # None: the default
        return resolved or configured
    return "auto (chosen on the first batch)" if resolved is None else f"auto -> {resolved}"


def _reason(decision: Any) -> str | None:
    if decision is None:
        return None
    if isinstance(decision, dict):
        decision = decision.get("reason", decision)
    return str(decision)


def model_kernel(model: Any) -> tuple[str | None, str | None]:
    """``(name of the kernel in use, reason it was chosen)`` of a fitted estimator or
    sketched pipeline; ``(None, None)`` before it is fitted."""
    engine = getattr(model, "model_", model)
    if engine is None or not getattr(engine, "is_fitted", lambda: False)():
        return None, None
    spec = engine.__dict__.get("_kernel_spec")
    name = getattr(spec, "name", None)
    return name, _reason(getattr(engine, "auto_decision_", None))


def meta_kernel(model_meta: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """``(kernel in use, reason)`` from a checkpoint's model metadata."""
    if not model_meta:
        return None, None
    spec = model_meta.get("kernel_spec")
    name = spec.get("name") if isinstance(spec, dict) else None
    return name, _reason(model_meta.get("auto_decision", model_meta.get("auto_decision_")))
