"""acc@1 of the three GPU chains per corpus, protocol and system, under the index's three tie orders:
before (vocabulary row order) -> after (commit 91eb9b7: names added later first, then canonical names) -> given
(add_names puts every pair it is given first, the most often given first).

    python summarize_scores.py /work/runs/s21/scores > scores.md
"""
import json
import sys
from pathlib import Path

folder = Path(sys.argv[1])
CORPORA = [("dev", "NCBI-disease dev"), ("ncbi-test", "NCBI-disease test"), ("bc5cdr", "BC5CDR-disease dev")]
SEEDS = (42, 43, 44)
VERSIONS = ("before", "after", "given")


def acc(seed, version, corpus, memory, protocol, key="acc@1"):
    results = json.loads((folder / f"seed{seed}-{version}-{corpus}.json").read_text())["results"]
    [system] = [s for s in results if ("memory" in s) == memory]
    return 100 * results[system][protocol][key]


print("| system | protocol | " + " | ".join(f"{title}: seeds {', '.join(map(str, SEEDS))}" for _, title in CORPORA) + " |")
print("|---|---|" + "---|" * len(CORPORA))
for memory in (False, True):
    for protocol in ("strict", "biosyn"):
        cells = []
        for corpus, _ in CORPORA:
            runs = [[acc(s, v, corpus, memory, protocol) for v in VERSIONS] for s in SEEDS]
            cells.append(" / ".join(" -> ".join(f"{x:.1f}" for x in run) for run in runs))
        print(f"| {'+ memory' if memory else 'SAP + DHNS'} | {protocol} | " + " | ".join(cells) + " |")
print()
print("shared_acc@1 (a gold tied with the first candidate counts), the same under every order:")
for corpus, title in CORPORA:
    same = all(
        abs(acc(s, "before", corpus, m, p, "shared_acc@1") - acc(s, v, corpus, m, p, "shared_acc@1")) < 1e-9
        for s in SEEDS for m in (False, True) for p in ("strict", "biosyn") for v in VERSIONS
    )
    vals = [acc(s, "given", corpus, True, "biosyn", "shared_acc@1") for s in SEEDS]
    print(f"- {title}: equal under every order: {same}; + memory, biosyn: {' / '.join(f'{v:.1f}' for v in vals)}")
