"""Dataclasses that pickle by their fields, as the class's own ``__init__`` builds them.

Compiled by mypyc (the wheel, setup.py), two kinds of dataclass cannot be unpickled
the default way (an empty object from ``__new__``, then its state): a frozen one,
whose state goes through its frozen ``__setattr__``, and one that writes its own
``__init__``, which mypyc's ``__new__`` runs (with no arguments, so it fails).
Jobs, clusters, configurations and job records cross process boundaries
(``--processes``, the fit worker, Dask). Registering a reducer with
:mod:`copyreg` works for both the compiled and the pure-Python class, and every
pickler (multiprocessing's, cloudpickle's) consults it.
"""

from __future__ import annotations

import copyreg
from dataclasses import fields
from typing import Any

__all__ = ["REGISTERED", "picklable"]

#: the classes registered so far (a test checks every frozen dataclass, and every one
#: with its own ``__init__``, is)
REGISTERED: set[type] = set()


def _reduce(obj: Any) -> tuple[type, tuple[Any, ...]]:
    return type(obj), tuple(getattr(obj, f.name) for f in fields(obj) if f.init)


def picklable(*classes: type) -> None:
    """Pickle ``classes`` (dataclasses, init fields positional) by their fields."""
    for cls in classes:
        copyreg.pickle(cls, _reduce)
        REGISTERED.add(cls)
