"""Plots of sweep rows (matplotlib): cycles against each swept parameter, and the roofline.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..outputs import atomic_path, check_output
from ..profile import PIPES
from .sweep import point_totals
from .trace import StudyError


def _short(key: str) -> str:
    """A parameter's short name for plots: 'cores.aiv.count' -> 'aiv.count'."""
    parts = key.split(".")
    if len(parts) > 1 and parts[-1] in ("count", "bytes", "latency_cycles", "bytes_per_cycle", "clock_mhz"):
        return ".".join(parts[-2:])
    return parts[-1]


def r0_soc(rows: Sequence[dict]) -> str:
    return rows[0]["soc"] if rows else ""


PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def check_plot(path: str | Path) -> Path:
    """A plot can be written there and matplotlib is installed: checked before a sweep starts."""
    path = check_output(path, "--plot", PLOT_SUFFIXES)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise StudyError("--plot needs matplotlib: pip install matplotlib") from None
    return path


def plot_sweep(rows: Sequence[dict], params: Sequence[str], path: str | Path, title: str = "") -> Path:
    """Three panels: total cycles against the first swept parameter (a line per SoC and other
    parameters; the simulated, estimated and step totals when the rows have an estimated part),
    the per-pipe busy breakdown per point, and a roofline with every simulated call placed on
    it. PNG or SVG by the file's extension (matplotlib, Agg backend)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = check_plot(path)
    totals = point_totals(rows)
    by_point: dict[int, list[dict]] = {}
    for r in rows:
        by_point.setdefault(r["point"], []).append(r)
    first = {p: by_point[p][0] for p in by_point}
    socs = sorted({r["soc"] for r in rows})
    labels = [_point_label(first[t["point"]], params, len(socs) > 1 or not params) for t in totals]
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))
    _cycles_panel(axes[0], totals, first, params)
    _pipes_panel(axes[1], rows, totals, by_point, labels)
    _roofline_panel(axes[2], plt.get_cmap("tab10"), rows, totals, by_point, labels)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    try:
        with atomic_path(path, "plot") as tmp:
            fig.savefig(tmp, dpi=110, format=Path(path).suffix.lstrip(".").lower() or None)
    finally:
        plt.close(fig)
    return path


def _point_label(r0: dict, params: Sequence[str], with_soc: bool) -> str:
    """A sweep point's name: its SoC (when the sweep has several, or no parameter) and its values."""
    return "\n".join(([r0["soc"]] if with_soc else []) + [f"{_short(k)}={r0[k]}" for k in params])


def _cycles_panel(ax, totals: list[dict], first: dict[int, dict], params: Sequence[str]) -> None:
    """Workload cycles against the first swept parameter: a line per SoC and other parameters;
    with an estimated part, the step's time in us (chips' clocks differ) as the simulated part
    (solid), the estimated part (dotted) and the step, their sum (dashed), in the same colour."""
    xparam = params[0] if params else None
    with_estimate = any(t.get("estimated") for t in totals)
    series: dict[str, list[tuple[Any, float, float]]] = {}
    for t in totals:
        r0 = first[t["point"]]
        others = [f"{_short(k)}={r0[k]}" for k in params[1:]]
        name = " ".join([r0["soc"]] + others)
        x = r0[xparam] if xparam else r0["soc"]
        figures = (t["time_us"], t["estimated_us"]) if with_estimate else (t["cycles"], 0.0)
        series.setdefault(name, []).append((x, *figures))
    numeric = xparam is not None and all(isinstance(x, (int, float)) for s in series.values() for x, _, _ in s)
    for k, (name, pts) in enumerate(series.items()):
        if numeric:
            pts = sorted(pts)
        xs = [p[0] if numeric else str(p[0]) for p in pts]
        color = f"C{k % 10}"
        if not with_estimate:
            ax.plot(xs, [p[1] for p in pts], marker="o", color=color, label=name)
            continue
        ax.plot(xs, [p[1] for p in pts], marker="o", color=color, label=f"{name} simulated")
        ax.plot(xs, [p[2] for p in pts], marker="s", ls=":", color=color, label=f"{name} estimated")
        ax.plot(xs, [p[1] + p[2] for p in pts], marker="^", ls="--", color=color, label=f"{name} step")
    ax.set_xlabel(xparam or "SoC")
    ax.set_ylabel("us (count-weighted): simulated, estimated, step" if with_estimate
                  else "workload cycles (sum over calls, count-weighted)")
    ax.set_title(("step time" if with_estimate else "cycles") + " vs " + (xparam or "SoC"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def _pipes_panel(ax, rows: Sequence[dict], totals: list[dict], by_point: dict[int, list[dict]],
                 labels: list[str]) -> None:
    """Per-pipe busy fraction per point, cycle-weighted over the point's simulated calls."""
    pipes = [p for p in PIPES if any(r.get(f"busy_{p}", 0) for r in rows if r.get("status") == "ok")]
    fracs: dict[str, list[float]] = {p: [] for p in pipes}
    for t in totals:
        rs = [r for r in by_point[t["point"]] if r["status"] == "ok"]
        wsum = sum(r["cycles"] * r["count"] for r in rs) or 1.0
        for p in pipes:
            fracs[p].append(sum(r[f"busy_{p}"] * r["cycles"] * r["count"] for r in rs) / wsum)
    n = max(len(pipes), 1)
    width = 0.8 / n
    xs = np.arange(len(labels))
    for j, p in enumerate(pipes):
        ax.bar(xs + (j - (n - 1) / 2) * width, fracs[p], width, label=p)
    ax.set_xticks(xs, [l.replace("\n", ", ") for l in labels], fontsize=7, rotation=25, ha="right")
    ax.set_ylabel("busy fraction (mean over cores used, cycle-weighted)")
    ax.set_ylim(0, 1)
    ax.set_title("per-pipe breakdown")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)


def _roofline_panel(ax, cmap, rows: Sequence[dict], totals: list[dict], by_point: dict[int, list[dict]],
                    labels: list[str]) -> None:
    """Every simulated call on a roofline in the compute pipe's units, a dashed roof per distinct
    ridge (estimated calls sit on their roofline by construction: not drawn)."""
    roofs = {}
    for k, t in enumerate(totals):
        rs = [r for r in by_point[t["point"]] if r["status"] == "ok" and r.get("device_bytes")]
        if not rs:
            continue
        color = cmap(k % 10)
        xi = [r["compute_work_cycles"] / r["device_bytes"] for r in rs]
        yi = [min(r["compute_work_cycles"] / (r["cycles"] * r["compute_cores"]), 1.0) for r in rs]
        ax.scatter(xi, yi, s=[12 + 30 * r["count"] ** 0.5 for r in rs], color=color, alpha=0.7,
                   label=labels[k].replace("\n", " ") or r0_soc(by_point[t["point"]]))
        ridge = rs[0]["compute_cores"] / rs[0]["device_bytes_per_cycle"]   # work cycles per byte at the ridge
        roofs.setdefault(round(ridge, 9), color)
    if roofs:
        allx = [r["compute_work_cycles"] / r["device_bytes"] for r in rows
                if r.get("status") == "ok" and r.get("device_bytes")]
        lo = min(min(allx), min(roofs)) / 4
        hi = max(max(allx), max(roofs)) * 4
        xx = np.geomspace(lo, hi, 200)
        for ridge, color in roofs.items():
            ax.plot(xx, np.minimum(1.0, xx / ridge), color=color, lw=1.2, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
    ax.set_xlabel("intensity: compute-pipe work cycles per device-memory byte")
    ax.set_ylabel("compute-pipe utilisation (fraction of chip peak)")
    ax.set_title("simulated calls (dashed roof: min(1, intensity / ridge))")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="best")
