"""Trace-driven simulator: replays jobs through the scheduling core on a virtual clock.

Import each name from the module that defines it: :func:`~ilucid.sim.engine.simulate`
from :mod:`ilucid.sim.engine`, what a replay records from :mod:`ilucid.sim.replay_types`,
its figures from :mod:`ilucid.sim.metrics`. The studies built on the engine are in
:mod:`ilucid.studies`.
"""
