"""SST-2's train, dev and test parts as `experiment transfer` carves them (`task_splits`: 1,377
held-out whole sentences, the README's test), written as TSV files for `bertlab finetune` and
`bertlab evaluate`: train.tsv (48,511 rows), train-1k.tsv (the sst2-1k row's 1,000), dev.tsv and
test.tsv in the working folder. Used by the width-defaults check of lab/performance-notebook.md."""

from pathlib import Path

from bertlab.apps.experiments.transfer_data import task_splits
from bertlab.apps.experiments.transfer_rows import ROWS

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared/data of the checkout

rows = {row.name: row for row in ROWS["en"]}
for name, train_file in (("sst2", "train.tsv"), ("sst2-1k", "train-1k.tsv")):
    _, data, test = task_splits(DATA, rows[name])
    parts = {train_file: data.train, "dev.tsv": data.dev, "test.tsv": test}
    for file, examples in parts.items():
        lines = ["sentence\tlabel"] + [f"{e.text_a}\t{e.label}" for e in examples]
        Path(file).write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"{name}: {file} {len(examples):,} rows")
