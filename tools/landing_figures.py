#!/usr/bin/env python3
"""Draw the landing page's two figures into book/_static/ (committed, so the book build needs nothing more):

    python tools/landing_figures.py      # book/_static/landing_cluster.png, book/_static/landing_measured.png

``show.figures.cluster_hierarchy`` (what the book covers) and ``show.figures.measured_panel`` (what it measures,
from results/h200/softmax.json and results/h200/hopper_matmul.json). Run it again after re-recording those.
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from multicta_kernels import results  # noqa: E402
from multicta_kernels.show import figures  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "book" / "_static"


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    ax = figures.cluster_hierarchy()
    ax.figure.savefig(OUT / "landing_cluster.png", dpi=100, bbox_inches="tight")
    plt.close(ax.figure)
    axes = figures.measured_panel(results.load("h200/softmax.json"), results.load("h200/hopper_matmul.json"))
    axes[0].figure.savefig(OUT / "landing_measured.png", dpi=100, bbox_inches="tight")
    for name in ("landing_cluster.png", "landing_measured.png"):
        print(OUT / name, (OUT / name).stat().st_size, "bytes")


if __name__ == "__main__":
    main()
