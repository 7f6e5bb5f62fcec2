"""ilucid: an interpretable scheduler for deep-learning jobs on shared GPU clusters."""

__version__ = "0.1.0"
