"""What the registry-wide contract tests need to know about each solver, declared beside it.

A solver's own test module (``tests/test_<module>.py``) declares, next to its unit tests:

* ``@crosscheck(name, grid, smoothness=None)`` on ``expected(problem, options, result,
  epsilon) -> (low, high)``: a grid of ``(epsilon, delta, options)`` (or ``pytest.param``
  of one) and the epsilon its docstring promises, computed with
  ``tests/_independent_accounting.py`` (tests/test_accounting_crosscheck.py).
  ``smoothness(problem)`` gives public smoothness constants, so the grid runs without a
  PrivacyLeakWarning.
* ``@noise_spec(name, options)`` on ``spec(problem, options, result) -> [(statistic,
  distribution)]``: how the final iterate is built from the noise on a zero-gradient
  problem (tests/test_mechanisms.py; the first declared options are also its power and
  sparse checks), or ``@custom_noise_test(name)`` on a function that checks the solver's
  noise another way (its released statistics, selections...).
* ``@clip_off(family)`` on a context-manager factory that disables per-sample clipping in
  the family's module (the noise stays calibrated to the threshold), or
  ``no_clipping(family)`` for a family without per-sample clipping; and
  ``noise_scale_undetectable(name, reason)`` when the quick audit cannot see noise / 4 in
  the final model (tests/test_audit.py).
* ``required_options(name, **options)``: options a solver cannot run without (no
  sensible default), used by the tests that run every solver (tests/test_hostile_input.py).
* ``one_step(name, **options)``: options under which the solver makes a single update, for
  the extreme-record clipping test (tests/test_mechanisms.py; optional).

The central tests call :func:`load`, which imports every ``tests/test_*.py`` that imports
this module; each keeps a test failing for a private solver without its declaration.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

#: name -> (grid, expected, smoothness)
CROSSCHECKS: dict = {}
#: name -> [(options, spec)]
NOISE_SPECS: dict = {}
#: name -> check()
CUSTOM_NOISE_TESTS: dict = {}
#: family -> context-manager factory, or None (no per-sample clipping)
CLIP_OFF: dict = {}
#: name -> why noise / 4 cannot be audited from the final model
NOISE_SCALE_UNDETECTABLE: dict = {}
#: name -> options it cannot run without
REQUIRED_OPTIONS: dict = {}
#: name -> options under which it makes a single update of at most step * 2C / n
ONE_STEP: dict = {}

_TESTS = Path(__file__).resolve().parent
_MARKER = "from _declarations import"
_ORIGIN: dict = {}  # (table, key) -> (file, namespace) of the module that declared it


def _declare(table, key, value, *, append=False):
    """``table[key] = value`` (``append``: one more item of a list), called by the
    declaring functions on behalf of the module that calls them.

    A key declared by two files, or twice by one module (except ``append``), is an error;
    a module executed again (imported under a second name) replaces its declarations.
    """
    caller = sys._getframe(2)  # the declaring module (through the function or decorator)
    origin = (caller.f_code.co_filename, id(caller.f_globals))
    prior = _ORIGIN.get((id(table), key))
    if prior is not None and prior[0] != origin[0]:
        raise ValueError(f"{key!r} is declared in {prior[0]} and in {origin[0]}")
    again = prior == origin
    if again and not append:
        raise ValueError(f"{key!r} is declared twice in {origin[0]}")
    _ORIGIN[(id(table), key)] = origin
    if append:
        value = (table[key] if again else []) + [value]
    table[key] = value


def crosscheck(name, grid, *, smoothness=None):
    """Declare ``name``'s accounting cross-check: ``grid`` of (epsilon, delta, options)."""
    def register(expected):
        _declare(CROSSCHECKS, name, (list(grid), expected, smoothness))
        return expected
    return register


def noise_spec(name, options):
    """Declare one zero-gradient noise check of ``name`` with ``options`` (several may be
    declared, in order; the first is also the power check's and the sparse check's)."""
    def register(spec):
        _declare(NOISE_SPECS, name, (options, spec), append=True)
        return spec
    return register


def custom_noise_test(name):
    """Declare ``check()`` as ``name``'s noise test (instead of a :func:`noise_spec`)."""
    def register(check):
        _declare(CUSTOM_NOISE_TESTS, name, check)
        return check
    return register


def clip_off(family):
    """Declare the factory of a context manager disabling ``family``'s clipping."""
    def register(factory):
        _declare(CLIP_OFF, family, factory)
        return factory
    return register


def no_clipping(family):
    """Declare that ``family`` clips nothing per sample (no clipping-off variant)."""
    _declare(CLIP_OFF, family, None)


def noise_scale_undetectable(name, reason):
    """Declare that the quick audit cannot see noise / 4 in ``name``'s final model."""
    _declare(NOISE_SCALE_UNDETECTABLE, name, reason)


def required_options(name, **options):
    """Declare the options ``name`` cannot run without."""
    _declare(REQUIRED_OPTIONS, name, options)


def one_step(name, **options):
    """Declare options under which ``name`` makes one update that moves the model by at
    most ``step * 2C / n`` when one record changes (run with ``clip=1``, ``step=0.5`` on
    one feature)."""
    _declare(ONE_STEP, name, options)


def load():
    """Import every test module that declares something (once: Python caches modules)."""
    for path in sorted(_TESTS.glob("test_*.py")):
        if _MARKER in path.read_text(encoding="utf-8"):
            importlib.import_module(path.stem)
