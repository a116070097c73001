"""Whether a fit has begun the releases that read its private data.

A failure after a noisy release can be decided by that release's outcome (a range that
resolves or not, a column that is kept or not), so the failure is itself an output of the
release and must be paid for (Dwork & Roth 2014, section 3.5: what a mechanism outputs
includes whether it halts). A refusal of public facts (an argument, a budget too small for
any model at this n) is not. The charge point (:func:`dpopt.api.charge.charged_after`)
tells the two apart by one fact: whether the fit had started to release when it failed.

The default path's routes call :func:`begin` just before their first release that reads
the data (the private scaling, the constant on all rows, the high-dimensional screen);
the charge point opens a :func:`watch` around the fit and reads ``started``. A watch is
per context (:class:`contextvars.ContextVar`, as the budgets of :mod:`dpopt.privacy.budget`),
so a nested fit (a search's trial) has its own, and :func:`begin` with no watch open does
nothing.
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
