"""Kubernetes resource quantities (``64``, ``63500m``, ``263543236Ki``, ``16Gi``, ``1e9``),
read strictly: a value that is not a quantity is refused naming where it was found, so a
node or a pod is never booked with a guess.

The grammar is the API's own (``k8s.io/apimachinery`` resource.Quantity): a decimal
number, then one suffix: binary (Ki Mi Gi Ti Pi Ei), decimal (n u m k M G T P E) or a
decimal exponent (``e3``, ``E-2``). ilucid's memory GB are 2**30 bytes, as the local
backend counts them.
"""

from __future__ import annotations

import math
import re

__all__ = ["cpus_of", "memory_gb_of", "quantity"]

_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE])?$"
)
_SCALE = {
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}


def quantity(value: object, where: str) -> float:
    """The amount ``value`` stands for (a quantity string, or a plain number as an
    int-or-string field may hold); ``where`` names the object and field for the error.
    Negative amounts are refused: only capacities and requests are read here."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        amount = float(value)
    elif isinstance(value, str) and (match := _QUANTITY.match(value.strip())):
        suffix = match["suffix"] or ""
        exponent = int(suffix[1:]) if suffix[:1] in ("e", "E") and suffix[1:] else 0
        if abs(exponent) > 300:
            raise ValueError(f"{where}: {value!r} is out of range")
        amount = float(match["number"]) * _SCALE.get(suffix, 10.0**exponent)
    else:
        raise ValueError(f"{where}: {value!r} is not a Kubernetes quantity (e.g. 8, 500m, 16Gi)")
    if not math.isfinite(amount) or amount < 0:
        raise ValueError(f"{where}: {value!r} must be a finite amount >= 0")
    return amount


def cpus_of(value: object, where: str) -> float:
    """CPUs: ``64`` is 64, ``63500m`` is 63.5."""
    return quantity(value, where)


def memory_gb_of(value: object, where: str) -> float:
    """Memory in GB of 2**30 bytes: ``16Gi`` is 16, ``1e9`` is about 0.93."""
    return quantity(value, where) / 2**30
