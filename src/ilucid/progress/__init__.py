"""What a job imports to tell ilucid how far it is: ``ilucid.progress.report(step, total)``
(:mod:`ilucid.progress.writer`; ``docs/progress.md``)."""

from ilucid.progress.writer import ENV, report

__all__ = ["ENV", "report"]
