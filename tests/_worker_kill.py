"""A chunk task that kills its own worker process once (importable by worker processes)."""

import os
import signal

import numpy as np

from dpopt.data.chunked import _chunk_gradient


def gradient_killing_its_worker_once(xb, yb, *, flag, **kwargs):
    """``dpopt.data.chunked._chunk_gradient``, except that the first task of a later step
    (w != 0) to find no file ``flag`` writes its process id there and kills its own worker
    process with SIGKILL (no clean-up: as a crash or the kernel's OOM killer would). The
    scheduler reruns the lost tasks elsewhere; the rerun finds the flag and computes."""
    if np.any(kwargs["w"] != 0.0):
        try:
            fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
    return _chunk_gradient(xb, yb, **kwargs)
