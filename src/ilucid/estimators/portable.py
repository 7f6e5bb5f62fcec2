"""EBM fits that come out the same on every CPU.

interpret's boosting picks its SIMD path (AVX-512, AVX2 or scalar) from the CPU
it runs on, and the paths round differently. The same replay of ITP cluster02
under the default profile gave a mean JCT of 27,673 s on an AVX-512 machine,
28,715 s on an AVX2 one and 28,314 s on the scalar path. A comparison of
policies, or a replay that is meant to predict the service, must not depend on
which machine ran it, so every fit takes the scalar path, which every CPU has.
It costs little: fits are small and run beside the replay or the reconcile loop.
"""

from __future__ import annotations

__all__ = ["SCALAR_ONLY", "portable_fits"]

SCALAR_ONLY = 0  # interpret's AccelerationFlags_NONE


def portable_fits() -> None:
    """Pin interpret's boosting to its scalar path for this process.

    Process-wide, because interpret reads the option at each fit; ilucid's
    estimators are the only EBMs fitted in its processes, and all want it.
    """
    from interpret.develop import set_option

    set_option("acceleration", SCALAR_ONLY)
