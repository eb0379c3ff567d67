"""Draw a call's per-pipe timeline (the `--trace-layout pipe` view: a row per pipe, one core) with
the flags between pipes as arrows, and save it as a PNG. Needs matplotlib.

    python examples/plot_pipe_timeline.py [--soc Ascend910A] [-o docs/img/add_sample_pipes.png]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE / "kernels"))

import simulator  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soc", default="Ascend910A")
    ap.add_argument("-o", "--output", default="docs/img/add_sample_pipes.png")
    ap.add_argument("--core", type=int, default=None, help="core index (default: the first one used)")
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import add_sample
    spec = add_sample.launch(None)
    r = simulator.run_kernel(spec["body"], spec["block_dim"], spec["args"], soc=args.soc, warmup=1)
    trace = r.report.trace
    events = trace.events("pipe")
    pipes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    slices = [e for e in events if e.get("ph") == "X"]
    core = args.core if args.core is not None else min(e["tid"] for e in slices)
    rows = [p for p in sorted(pipes) if any(e["pid"] == p and e["tid"] == core for e in slices)]
    y = {p: i for i, p in enumerate(reversed(rows))}
    colors = {"PIPE_S": "#9e9e9e", "PIPE_V": "#43a047", "PIPE_MTE2": "#1e88e5", "PIPE_MTE3": "#fb8c00",
              "PIPE_M": "#8e24aa", "PIPE_MTE1": "#00acc1", "PIPE_FIX": "#6d4c41"}
    fig, ax = plt.subplots(figsize=(12, 0.6 * len(rows) + 1.2))
    for e in slices:
        if e["tid"] == core and e["pid"] in y:
            name = pipes[e["pid"]]
            ax.broken_barh([(e["ts"], max(e["dur"], 0.005))], (y[e["pid"]] - 0.35, 0.7),
                           facecolors=colors.get(name, "#555"), edgecolor="white", linewidth=0.3)
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e["tid"] == core}
    for e in events:
        if e.get("ph") == "f" and e["tid"] == core and e["id"] in starts:
            s = starts[e["id"]]
            if s["pid"] in y and e["pid"] in y:
                ax.annotate("", xy=(e["ts"], y[e["pid"]]), xytext=(s["ts"], y[s["pid"]]),
                            arrowprops=dict(arrowstyle="->", color="#d32f2f", lw=0.6, alpha=0.7))
    ax.set_yticks(list(y.values()), [pipes[p] for p in y])
    ax.set_xlabel("us")
    ax.set_title(f"add sample on {args.soc}, core {core}: one row per pipe, flags as arrows "
                 f"(ascend-sim --trace-layout pipe)")
    fig.tight_layout()
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
