"""ilucid: an interpretable scheduler for deep-learning jobs on shared GPU clusters."""

__version__ = "0.1.0"

# before any other ilucid module: the compiled core only while it matches its source
from ilucid.compiled import guard as _guard

_guard.install()
