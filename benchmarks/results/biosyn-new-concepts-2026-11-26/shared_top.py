"""acc@1 as the evaluation reports it (one concept per rank, exact ties in vocabulary order) beside acc@1 as
BioSyn's check_label counts it, where a dictionary name shared by several concepts is one entry and a hit
for each of them: a mention whose gold concept ties exactly with the top candidate (every composite part).

Reads `evaluate --output` reports and their `--errors` miss files; a miss lists the first 5 candidates of each
query, so a gold tied at the top behind 5 others is not counted (a lower bound).

    python shared_top.py REPORT.json MISSES.jsonl [REPORT.json MISSES.jsonl ...]
"""
import json
import sys
from collections import Counter


def tied_at_top(record: dict) -> bool:
    gold = set(record["gold"].replace("+", "|").split("|"))
    for query in record["queries"]:
        candidates = query["candidates"]
        if not candidates:
            return False
        top = candidates[0][2]
        if not any(cid in gold and score == top for cid, _, score in candidates):
            return False
    return True


def main(paths) -> None:
    print("| corpus | system | protocol | acc@1 | ties at the top among the misses | acc@1, a shared name counting for each of its concepts |")
    print("|---|---|---|---|---|---|")
    for report_path, misses_path in zip(paths[::2], paths[1::2]):
        report = json.load(open(report_path, encoding="utf8"))
        ties = Counter()
        for line in open(misses_path, encoding="utf8"):
            record = json.loads(line)
            if tied_at_top(record):
                ties[(record["system"], record["protocol"])] += 1
        n = report["n_mentions"]
        for system, by_protocol in report["results"].items():
            for protocol, metrics in by_protocol.items():
                tied = ties[(system, protocol)]
                acc = 100 * metrics["acc@1"]
                print(f"| {report['title']} | {system} | {protocol} | {acc:.1f} | {tied} | {acc + 100 * tied / n:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
