"""The SST-2 rows among the last 2,000 of train.tsv whose sentence (`phrase_roots`) has no row among
the first 1,000 or the first 65,349: the scoring rows of the width-defaults check
(lab/performance-notebook.md, 2026-11-28). Writes test-k1-disjoint.tsv and test-all-disjoint.tsv
in the working folder and prints how many rows each keeps."""

from bertlab.data.tasks.splits import phrase_roots

SST2 = "../shared/data/glue/SST-2/train.tsv"

lines = open(SST2, encoding="utf-8").read().splitlines()
header, rows = lines[0], lines[1:]
roots = phrase_roots([row.split("\t")[0] for row in rows])
scoring = range(len(rows) - 2000, len(rows))
for name, trained in (("k1", 1000), ("all", 65349)):
    seen = {roots[i] for i in range(trained)}
    kept = [i for i in scoring if roots[i] not in seen]
    text = "\n".join([header] + [rows[i] for i in kept]) + "\n"
    open(f"test-{name}-disjoint.tsv", "w", encoding="utf-8").write(text)
    print(f"{name}: {len(kept)} of 2,000 scoring rows have a sentence with no training row")
