"""Public names of a package imported on first access (a module ``__getattr__``), so that
importing the package loads none of the libraries its names need until one is used."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, namespace: dict[str, Any], public: Mapping[str, str],
               computed: Mapping[str, Callable[[], Any]] | None = None,
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose names load on first access.

    Parameters
    ----------
    package : str
        The package's ``__name__`` (for the error message).
    namespace : dict
        The package's ``globals()``: a name, once imported, is cached there.
    public : mapping of str to str
        Each public name and the module it is imported from.
    computed : mapping of str to callable, optional
        Names whose value is computed on every access (not cached), such as a submodule
        or a registry's current contents.

    Returns
    -------
    getattr, dir : callable
        To assign to the package's ``__getattr__`` and ``__dir__``.
    """
    computed = dict(computed or {})

    def __getattr__(name: str) -> Any:
        if name in computed:
            return computed[name]()
        module = public.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(public) | set(computed))

    return __getattr__, __dir__
