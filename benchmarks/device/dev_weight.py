"""Print the rerank_weight that an `evaluate` report of a dev corpus chooses, by the rule of
`add-reranker --tune-weight-on`: the best strict acc@1 of the memory + re-ranker rows (the gold mentions linked
through the pipeline), the smaller weight on a tie. Each weight's figure goes to stderr.

Usage: python dev_weight.py DEV_REPORT.json"""
import json
import sys

report = json.load(open(sys.argv[1], encoding="utf8"))
accuracy = {row["weight"]: report["results"][row["memory_row"]]["strict"]["acc@1"] for row in report["rerank_rows"]}
for weight, value in sorted(accuracy.items()):
    print(f"rerank_weight {weight:g}: strict acc@1 {100 * value:.1f}", file=sys.stderr)
print(f"{min(weight for weight, value in accuracy.items() if value == max(accuracy.values())):g}")
