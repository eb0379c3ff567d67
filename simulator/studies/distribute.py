"""Running a study's tasks in this process, on local worker processes, or on a Dask cluster
(the simulator is bit-deterministic, so every backend gives the same rows).
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .calls import one_line, run_call
from .trace import Call, StudyError


@dataclass
class Task:
    """One unit of work: a call on one profile point, optionally with a forced tiling."""
    call: Call
    soc: str
    overrides: dict[str, Any]
    mode: str = "timing"
    seed: int = 0
    tiling: dict | None = None


def execute_task(task: Task) -> dict[str, Any]:
    """Run a task (in whatever process or Dask worker gets it) and return its row."""
    row, _ = run_call(task.call, task.soc, task.overrides, mode=task.mode, seed=task.seed,
                      tiling=task.tiling)
    return row


def _progress(total: int, desc: str, enabled: bool):
    try:
        from tqdm import tqdm
    except ImportError:          # pragma: no cover - tqdm is a core dependency
        enabled = False
        tqdm = None
    if not enabled or tqdm is None:
        class _Null:
            def update(self, n=1): pass
            def close(self): pass
        return _Null()
    return tqdm(total=total, desc=desc, unit="call", file=sys.stderr, leave=False, dynamic_ncols=True)


MAX_LOCAL_WORKERS = 256      # processes a LocalCluster may start (each holds a whole simulator)


SCHEMES = ("tcp", "tls")     # what a --scheduler address may name; no scheme means tcp


def check_scheduler(scheduler: str | None) -> None:
    """A --scheduler address that can be used (checked before any work): local:N with N in
    range, or a tcp:// or tls:// address dask.distributed parses (tls:// only with the TLS
    settings of distributed's configuration)."""
    if scheduler is None:
        return
    m = re.fullmatch(r"local(?::(\d+))?", scheduler)
    if m:
        if not 1 <= int(m.group(1) or 1) <= MAX_LOCAL_WORKERS:
            raise StudyError(f"--scheduler {scheduler}: a LocalCluster of 1 to {MAX_LOCAL_WORKERS} workers")
        return
    try:
        from distributed.comm import parse_address, parse_host_port
    except ImportError:
        raise StudyError("--scheduler needs dask.distributed: pip install 'ascend-sim[dask]'") from None
    try:
        scheme, loc = parse_address(scheduler)
        parse_host_port(loc)
    except (ValueError, TypeError) as e:
        raise StudyError(f"--scheduler: '{scheduler}' is not a Dask scheduler address "
                         f"(tcp://host:8786, or local:N): {one_line(str(e))}") from None
    if scheme not in SCHEMES:
        raise StudyError(f"--scheduler: '{scheduler}': ascend-sim connects to a scheduler over tcp:// or tls:// "
                         f"(or starts one with local:N), not {scheme}://")
    if scheme == "tls" and _tls_security() is None:
        raise StudyError(f"--scheduler {scheduler}: a tls:// scheduler needs distributed's TLS settings "
                         f"(distributed.comm.tls.ca-file, .client.cert and .client.key in the Dask configuration, "
                         f"or DASK_DISTRIBUTED__COMM__TLS__CA_FILE and the like); none are set")


def _tls_security():
    """distributed's Security from its configuration, if that names a CA file and a client
    certificate (what a tls:// connection needs); else None."""
    from distributed.security import Security
    security = Security()
    if security.tls_ca_file and security.tls_client_cert:
        return security
    return None


def _dask_client(scheduler: str):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise StudyError("--scheduler needs dask.distributed: pip install 'ascend-sim[dask]'") from None
    check_scheduler(scheduler)
    m = re.fullmatch(r"local(?::(\d+))?", scheduler)
    if m:
        import logging
        for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core",
                     "distributed.worker", "distributed.http.proxy"):
            logging.getLogger(name).setLevel(logging.WARNING)
        cluster = LocalCluster(n_workers=int(m.group(1) or os.cpu_count() or 1), threads_per_worker=1,
                               processes=True, dashboard_address=None)
        return Client(cluster), cluster
    security = _tls_security() if scheduler.startswith("tls://") else None
    try:
        return Client(scheduler, timeout="10s", security=security), None
    except ValueError as e:            # the address does not parse
        raise StudyError(f"--scheduler: '{scheduler}' is not a Dask scheduler address "
                         f"(tcp://host:8786, or local:N): {one_line(str(e))}") from None
    except (OSError, TimeoutError) as e:
        raise StudyError(f"--scheduler: cannot reach a Dask scheduler at {scheduler}: {one_line(str(e))}") from None


def map_tasks(tasks: Sequence[Task], *, workers: int | None = 1, scheduler: str | None = None,
              progress: bool = False, desc: str = "simulating",
              fn: Callable[[Task], dict] = execute_task,
              on_result: Callable[[int, dict], None] | None = None) -> list[dict]:
    """Run tasks and return their rows in task order. Biggest calls go first (better packing);
    `workers` local processes (None: one per CPU), or a Dask scheduler address ('local:N' starts
    a LocalCluster). `on_result(i, row)` is called in this process as each task finishes (a
    study writes its rows as they come). Ctrl-C stops the workers at once."""
    n = len(tasks)
    results: list[dict | None] = [None] * n
    order = sorted(range(n), key=lambda i: -tasks[i].call.elements())
    bar = _progress(n, desc, progress)

    def finished(i: int, row: dict) -> None:
        results[i] = row
        if on_result is not None:
            on_result(i, row)
        bar.update(1)

    try:
        if scheduler:
            client, cluster = _dask_client(scheduler)
            try:
                from distributed import as_completed
                futures = client.map(fn, [tasks[i] for i in order], pure=False)
                index = {f.key: i for f, i in zip(futures, order)}
                for fut in as_completed(futures):
                    finished(index[fut.key], fut.result())
            finally:
                client.close()
                if cluster is not None:
                    cluster.close()
        else:
            workers = workers or os.cpu_count() or 1
            if workers <= 1 or n <= 1:
                for i in order:
                    finished(i, fn(tasks[i]))
            else:
                from concurrent.futures import ProcessPoolExecutor, as_completed
                ex = ProcessPoolExecutor(max_workers=min(workers, n))
                try:
                    futs = {ex.submit(fn, tasks[i]): i for i in order}
                    for fut in as_completed(futs):
                        finished(futs[fut], fut.result())
                except BaseException:
                    # leaving the pool normally waits for every running call (minutes on a big
                    # one): stop the workers instead, so Ctrl-C takes effect at once
                    for proc in list(getattr(ex, "_processes", {}).values()):
                        proc.terminate()
                    ex.shutdown(wait=False, cancel_futures=True)
                    raise
                ex.shutdown(wait=True)
    finally:
        bar.close()
    return results  # type: ignore[return-value]
