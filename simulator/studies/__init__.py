"""Studies (a package: trace, whatif, calls, estimate, distribute, sweep, regress, tune, plot): workload
traces, replay of a whole step (simulated and estimated), cycle regression, what-if sweeps and tiling search.

This is the logic behind `ascend-sim replay / regress / sweep / tune`; the command line in
simulator/cli/ only parses arguments and prints. Everything here is plain Python and usable
from a notebook:

    from simulator import studies
    w = studies.load_trace("traces/efficientnet_b0_silu_backward.yaml")
    rows = studies.replay(w, "Ascend910B1")
    rows = studies.sweep(w, ["Ascend910B1"], {"device_memory.bandwidth_GBps": [800, 1600, 3200]})
    best = studies.tune(w.calls[0], "Ascend910B1")

A workload trace is a sequence of operator calls (operator, tensor shapes and dtypes, attributes,
stream) with optional cycle baselines per SoC; traces/README.md documents the format. A call is
turned into a `simulator.run` generically from the operator's OpDef parameters: tensors become
random arrays from a fixed seed, attributes are coerced to the parameter's kind. Calls of an
operator that is not registered are reported as "not available" and skipped, never a crash.

Work is split into tasks (one per distinct call per profile point) and run in-process, on local
processes (`workers=N`, concurrent.futures) or on a Dask distributed cluster (`scheduler=ADDRESS`).
The simulator is bit-deterministic, so every backend gives identical rows.
"""
from __future__ import annotations

from .trace import (FORMAT, TOP_LEVEL_KEYS, CALL_KEYS, TENSOR_KEYS, PARAM_KINDS, DTYPE_ALIASES, StudyError,
                    numpy_dtype, canonical_dtype, TensorSpec, Call, Workload, parse_selection, shape_of,
                    check_init, call_from_record, read_structured, load_trace, save_trace, write_baselines,
                    EstimatedCall, estimated_from_record, estimated_yaml, write_estimated)  # noqa: F401
from .estimate import Roofline, unit_rate, roofline, estimated_row  # noqa: F401
from .whatif import (parse_value, parse_assignments, parse_sweep_values, profile_fields, resolve_overrides,
                     make_profile)  # noqa: F401
from .calls import (opdef_for, available_ops, coerce_attr, NotAvailable, validate_call, build_inputs, estimate_call,
                    light_inputs, compute_cores, run_call, one_line)  # noqa: F401
from .distribute import Task, check_scheduler, execute_task, map_tasks  # noqa: F401
from .sweep import (Point, SweepFile, read_sweep_file, ROW_HEAD, evaluate, replay, grid_points, sweep, total_cycles,
                    point_totals, read_rows, write_rows, ROW_SUFFIXES, task_key)  # noqa: F401
from .regress import Drift, RegressResult, regress  # noqa: F401
from .tune import TuneResult, tiling_space, tune  # noqa: F401
from .plot import PLOT_SUFFIXES, check_plot, r0_soc, plot_sweep  # noqa: F401
