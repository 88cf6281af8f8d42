"""acc@1 / acc@5 of the device's reports for each seed, as the BENCHMARKS table shows them.

    python summarize.py   (from this folder; output: scores.md)
"""
import json
from pathlib import Path

ROWS = [("untuned", "untuned-dev", None, "mpnet"), ("+ SAP", "sap-dev", None, "sap/model"),
        ("+ DHNS", "dhns-dev", "dhns", "dhns/model"), ("+ memory", "dhns-dev", "dhns", "dhns/model + memory")]


def cell(report, system, protocol):
    for name, by_protocol in report["results"].items():
        if name == system or (system.endswith("+ memory") and name.startswith(system)):
            r = by_protocol[protocol]
            return f"{100 * r['acc@1']:.1f} / {100 * r['acc@5']:.1f}"
    return ""


def main():
    lines = ["| seed | system | dev strict | dev biosyn | NCBI test strict | test biosyn | BC5CDR strict | BC5CDR biosyn |", "|---|---|---|---|---|---|---|---|"]
    for seed in (42, 43, 44):
        folder = Path(f"seed{seed}")
        for label, dev_name, chain, system in ROWS:
            dev = json.loads((folder / f"{dev_name}.json").read_text())
            cells = [cell(dev, system, p) for p in ("strict", "biosyn")]
            if chain:
                for other in ("ncbi-test", "bc5cdr"):
                    report = json.loads((folder / f"{chain}-{other}.json").read_text())
                    cells += [cell(report, system, p) for p in ("strict", "biosyn")]
            else:
                cells += ["", "", "", ""]
            lines.append(f"| {seed} | {label} | " + " | ".join(cells) + " |")
    for seed in (42, 43, 44):
        settings = json.loads((Path(f"seed{seed}") / "dhns-dev.json").read_text())["memory"]["settings_by_protocol"]
        lines.append(f"\nseed {seed}, memory settings chosen on dev (whole grid): {json.dumps(settings)}")
    Path("scores.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
