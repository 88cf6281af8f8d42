"""Reports of an evaluation run: the Markdown table, the acc@k plot, readable system names."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from ..extras import require


def markdown_table(report: Mapping) -> str:
    """The report's results as a Markdown table: one row per system and protocol."""
    lines = [
        f"{report.get('title', 'evaluation')}: {report['n_mentions']} mentions"
        f" ({report['n_missing_gold']} with no gold id in the vocabulary{' left out' if report.get('reachable_only') else ''}, "
        f"{report['n_cuiless']} without concept left out"
        + (f"; the biosyn dictionary adds {report['n_new_concepts_biosyn']} concepts of training mentions that the "
           "vocabulary lacks" if report.get("n_new_concepts_biosyn") else "") + ")",
        "",
        "| system | protocol | acc@1 | acc@5 | acc@10 | MRR | acc@1, a shared name a hit for each of its concepts |",
        "|---|---|---|---|---|---|---|",
    ]
    for system, by_protocol in report["results"].items():
        for protocol, m in by_protocol.items():
            shared = f"{100 * m['shared_acc@1']:.1f}" if "shared_acc@1" in m else "-"  # reports written before it
            lines.append(
                f"| {system} | {protocol} | {100 * m['acc@1']:.1f} | {100 * m['acc@5']:.1f} | "
                f"{100 * m['acc@10']:.1f} | {m['mrr']:.3f} | {shared} |"
            )
    return "\n".join(lines)


def plot_curves(report: Mapping, path: os.PathLike) -> None:
    """A PNG of acc@k against k, one line per system and protocol."""
    require("matplotlib").use("Agg")
    plt = require("matplotlib.pyplot")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, by_protocol in report["results"].items():
        for protocol, m in by_protocol.items():
            ks = sorted(int(key.split("@")[1]) for key in m if key.startswith("acc@"))
            ax.plot(ks, [100 * m[f"acc@{k}"] for k in ks], marker="o", label=f"{system} ({protocol})")
    ax.set_xlabel("k")
    ax.set_ylabel("acc@k (%)")
    ax.set_title(report.get("title", "evaluation"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    from ..io import atomic_write

    atomic_write(Path(path), lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)


def model_label(model: str) -> str:
    """A readable system name: the hub name, or the folder name (with its parent when that is generic)."""
    from ..encoder import offline_default_model

    path = Path(model)
    if not path.is_dir():
        return model
    default = offline_default_model()
    if default and path.resolve() == Path(default).resolve():
        return "all-MiniLM-L6-v2"
    return f"{path.parent.name}/{path.name}" if path.name in ("model", "encoder") else path.name
