"""Where datasets live: the directory named by ``$DPOPT_DATA``, the cache, file checksums,
and the errors a missing or altered dataset raises (shared by the registry and the Adult
loader)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ENV_DATA = "DPOPT_DATA"


ENV_CACHE = "DPOPT_CACHE"


class DatasetNotAvailableError(ValueError):
    """A named dataset is neither found locally nor downloadable right now."""


class DatasetChecksumError(ValueError):
    """A dataset file does not hold the registered data (checksum or shape mismatch)."""


def get_data_home(data_home=None) -> Path:
    """The cache directory: ``data_home``, else ``$DPOPT_CACHE``, else ``~/.cache/dpopt``.

    The directory is not created here (only when a download is saved).
    """
    if data_home is not None:
        if not isinstance(data_home, (str, os.PathLike)):
            raise ValueError(f"data_home must be a str, os.PathLike or None, got {data_home!r}")
        return Path(data_home).expanduser()
    env = os.environ.get(ENV_CACHE, "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "dpopt"


def _env_data_dir():
    value = os.environ.get(ENV_DATA, "").strip()
    return Path(value).expanduser() if value else None


def _file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
