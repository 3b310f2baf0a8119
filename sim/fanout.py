"""Fan work out over processes: a local process pool by default, or a Dask cluster
(``distributed``) given a scheduler address or ``local[:N]`` for a local one. Used by the
design-space sweeps (sim/explore.py) and the RTL regressions (scripts/bench_rtl.py,
scripts/fault_campaign.py): the same code on one machine or on a cluster.

Work goes out as chunks: ``fn(chunk, **kwargs)`` returns a list of results. A chunk whose worker
dies is retried on its own (``RETRIES`` times: locally in a pool of its own, so it cannot take
other chunks down with it; on Dask by the scheduler's retries), then ``failed(chunk)`` gives
its results.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from attenio.base.errors import ConfigError

__all__ = ["RETRIES", "fan_out"]

RETRIES = 2


def fan_out(fn, chunks: list, record, failed, *, workers: int | None = None,
            scheduler: str | None = None, **kwargs) -> None:
    """Run ``fn(chunk, **kwargs)`` for every chunk; ``record(results)`` as each finishes (in
    completion order). ``scheduler``: ``None`` (a process pool of ``workers``, default the CPU
    count), ``"local"``/``"local:N"`` (a Dask LocalCluster) or a Dask scheduler address.
    Raises ConfigError at once for an unreachable scheduler or a missing ``distributed``."""
    if scheduler is None:
        _local(fn, chunks, record, failed, workers or os.cpu_count() or 1, kwargs)
    else:
        _dask(fn, chunks, record, scheduler, workers, kwargs)


def _local(fn, chunks, record, failed, workers, kwargs) -> None:
    pending = {i: 0 for i in range(len(chunks))}     # chunk → times its worker died
    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futs = {pool.submit(fn, chunks[i], **kwargs): i for i in pending}
            for fut in as_completed(futs):
                record(fut.result())
                del pending[futs[fut]]
    except BrokenProcessPool:
        pass
    # after a worker died: the chunks left, one at a time, each in a pool of its own
    for i in sorted(pending):
        while True:
            try:
                with ProcessPoolExecutor(max_workers=1) as pool:
                    record(pool.submit(fn, chunks[i], **kwargs).result())
                break
            except BrokenProcessPool:
                pending[i] += 1
                if pending[i] > RETRIES:
                    record(failed(chunks[i]))
                    break


def _dask(fn, chunks, record, scheduler, workers, kwargs) -> None:
    try:
        from distributed import Client, LocalCluster
        from distributed import as_completed as dask_completed
    except ModuleNotFoundError:
        raise ConfigError("scheduler is invalid: a Dask run needs the distributed package "
                          "(pip install 'attenio[explore]')") from None
    cluster = None
    if scheduler == "local" or scheduler.startswith("local:"):
        try:
            n = int(scheduler.split(":", 1)[1]) if ":" in scheduler else (workers or 2)
        except ValueError:
            raise ConfigError(f"scheduler={scheduler!r} is invalid: local:N with N workers, "
                              "or an address such as tcp://host:8786") from None
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
    try:
        client = Client(cluster or scheduler, timeout="5s")
    except (OSError, TimeoutError, ValueError) as exc:
        if cluster:
            cluster.close()
        raise ConfigError(f"scheduler={scheduler!r} is invalid: cannot reach it "
                          f"({exc})") from None
    try:
        futs = client.map(fn, chunks, retries=RETRIES, pure=False, **kwargs)
        for fut in dask_completed(futs):
            record(fut.result())
    finally:
        client.close()
        if cluster:
            cluster.close()
