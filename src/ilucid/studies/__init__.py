"""Studies built on the replay engine (:mod:`ilucid.sim`), one module each.

:mod:`~ilucid.studies.mixed` (training with real-time inference),
:mod:`~ilucid.studies.hetero` (mixed GPU types with Gavel's speeds, replayed in
:mod:`~ilucid.studies.gavel_world`), :mod:`~ilucid.studies.hybrid` (an on-premise
cluster that bursts to the cloud), :mod:`~ilucid.studies.fragmentation` (fractional
GPU packing) and :mod:`~ilucid.studies.sharded` (N schedulers on one cluster). The
engine never imports them: ``ilucid simulate`` and the live service need none.
"""
