"""Whether a fit has begun the releases that read its private data.

A failure after a noisy release can be decided by that release's outcome (a range that
resolves or not, a level that is kept or not), so whether the fit fails is itself an output
of the release, to be paid for like the release; a refusal of public facts (an argument, a
budget too small for any model at this n) reveals nothing about the records and costs
nothing. The charge point (:mod:`dpopt.api.charge`: ``charged``, and ``charged_after``
around the model path) tells the two apart by one fact: whether a release had begun when
the failure came.

The table layer calls :func:`begin` just before its first selection
(:mod:`dpopt.preprocessing.table_encoder`, :mod:`dpopt.preprocessing.dask_tables`), and the
default path's routes before their first release that reads the data (the private scaling,
the constant on all rows, the high-dimensional screen); the charge point opens a
:func:`watch` around the fit and reads ``started``. A watch is per context
(:class:`contextvars.ContextVar`, as the budgets of :mod:`dpopt.privacy.budget`), the
innermost one is marked, so a nested fit (a search's trial) has its own, and :func:`begin`
with no watch open does nothing.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager

__all__ = ["Watch", "watch", "begin"]

_WATCH: contextvars.ContextVar = contextvars.ContextVar("dpopt_release_watch", default=None)


class Watch:
    """``started``: whether :func:`begin` was called inside the watch."""

    __slots__ = ("started",)

    def __init__(self):
        self.started = False


@contextmanager
def watch():
    """``with watch() as w: ...``: ``w.started`` says whether a release began inside."""
    w = Watch()
    token = _WATCH.set(w)
    try:
        yield w
    finally:
        _WATCH.reset(token)


def begin():
    """Mark the innermost open watch as started (no watch open: nothing to mark)."""
    w = _WATCH.get()
    if w is not None:
        w.started = True
