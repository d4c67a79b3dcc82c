"""Make the models that ship with bertlab (`bertlab:NAME` in every `--model`): pre-train each with
the budget recipe on the shared data, then copy its final model into bertlab/models/NAME with
fp16 weights (about 11 MB for BERT-mini) and a model card that gives the exact command, the data
and its license.

    python tools/ship_model.py --data ../shared/data            # every model (make models)
    python tools/ship_model.py --data ../shared/data mini-reviews-en
    python tools/ship_model.py --data ../shared/data --ship-only mini-reviews-en  # export a run

A run already finished in runs/models/NAME is exported as it is; an interrupted one resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from bertlab.core.atomic import atomic_directory
from bertlab.core.hub import SHIPPED_DIR, SHIPPED_PREFIX
from bertlab.core.model_card import CARD_NAME
from bertlab.training.checkpointing import latest_checkpoint
from bertlab.training.pretrain_run import PretrainRun, run_pretraining

REPO = Path(__file__).resolve().parent.parent
RUNS = Path("runs/models")
WEIGHTS = "model.safetensors"
COPIED = (
    "config.json",
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


@dataclass(frozen=True)
class ShippedModel:
    """One shipped model: what it is pre-trained on, for how long, and what the card says."""

    name: str
    corpus: tuple[str, ...]  # relative to --data; "bertlab/..." to the repository
    budget_minutes: float
    description: str
    license: str


MODELS = (
    ShippedModel(
        name="mini-reviews-en",
        corpus=("corpus_reviews_en/imdb_reviews.txt.gz",),
        budget_minutes=60,
        description="BERT-mini (4 layers of 256) pre-trained for an hour on 2 CPU cores on the "
        "100,000 IMDB movie reviews, with the recipe of the README's hour (whose run fine-tuned "
        "SST-2 3.6 points above the same model from scratch)",
        license="The IMDB Large Movie Review Dataset (Maas et al. 2011, 'Learning Word Vectors "
        "for Sentiment Analysis', ACL) states no license; its README asks users to cite the "
        "paper; research use. The model's weights are released under bertlab's Apache-2.0.",
    ),
    ShippedModel(
        name="mini-reviews-zh",
        corpus=(
            "corpus_zh/zhwiki_bert_sampled.txt",
            "corpus_zh/CLUECorpusSmall_bert_sampled.txt",
            "bertlab/demo_data/chnsenticorp_unlabeled.txt.gz",
        ),
        budget_minutes=60,
        description="BERT-mini (4 layers of 256) pre-trained for an hour on 2 CPU cores on "
        "the shared Chinese corpus (Wikipedia and CLUECorpusSmall samples) and 8,100 ChnSentiCorp "
        "reviews (text only; none of the demo's labelled reviews)",
        license="Chinese Wikipedia: CC BY-SA 3.0; CLUECorpusSmall and ChnSentiCorp: research use, "
        "no explicit license found (cite the CLUE benchmark and Tan Songbo's ChnSentiCorp). The "
        "model's weights are released under bertlab's Apache-2.0; the Wikipedia part of its "
        "training text is CC BY-SA.",
    ),
)


def corpus_path(path: str, data: Path) -> Path:
    return REPO / path if path.startswith("bertlab/") else data / path


def pretrain_run(model: ShippedModel, data: Path) -> PretrainRun:
    corpus = tuple(str(corpus_path(path, data)) for path in model.corpus)
    out = RUNS / model.name
    resume = latest_checkpoint(out) is not None
    return PretrainRun(
        corpus=corpus,
        out=out,
        budget=model.budget_minutes * 60,
        checkpoint_every_minutes=10,
        resume=resume,
    )


def command(model: ShippedModel) -> str:
    corpus = " ".join(str(corpus_path(path, Path("../shared/data"))) for path in model.corpus)
    corpus = corpus.replace(f"{REPO}/", "")
    return (
        f"bertlab pretrain --corpus {corpus} "
        f"--budget {model.budget_minutes:g}m --checkpoint-minutes 10 --out runs/models/{model.name}"
    )


def ship(model: ShippedModel, final: Path) -> Path:
    """Copy `final` into SHIPPED_DIR/NAME: fp16 weights, the tokenizer, the card with the command
    and the license."""
    target = SHIPPED_DIR / model.name
    with atomic_directory(target) as directory:
        for name in COPIED:
            if (final / name).is_file():
                shutil.copy2(final / name, directory / name)
        weights = load_file(final / WEIGHTS)
        half = {
            key: value.to(torch.float16) if value.is_floating_point() else value
            for key, value in weights.items()
        }
        save_file(half, directory / WEIGHTS, metadata={"format": "pt"})
        (directory / WEIGHTS).chmod(0o644)  # as bertlab.core.atomic writes every file
        card = (final / CARD_NAME).read_text(encoding="utf-8")
        (directory / CARD_NAME).write_text(card + shipping_note(model, final), encoding="utf-8")
    return target


def shipping_note(model: ShippedModel, final: Path) -> str:
    plan = final.parent / "budget_plan.json"
    device = json.loads(plan.read_text(encoding="utf-8"))["device"] if plan.is_file() else "CPU"
    if device == "CPU":
        device = f"CPU ({processor()})"
    name = f"{SHIPPED_PREFIX}{model.name}"
    return f"""
## Shipped with bertlab as `{name}`

{model.description}. Load it by name in any `--model` (`bertlab fill-mask --model
{name} "..."`, `bertlab finetune --model {name} ...`) or from this folder in
`transformers` (`BertForMaskedLM.from_pretrained(folder)`). The weights are stored in fp16
(half the size; fine-tuning and inference load them into fp32); the held-out figures
above were measured in the run's own precision before the conversion.

Made on the {device} by `make models` (`python tools/ship_model.py --data ../shared/data
{model.name}`), which runs:

```bash
{command(model)}
```

and copies `runs/models/{model.name}/final` here. A time budget depends on the machine's speed
(the tokens read are above), so a remake reads more or fewer tokens.

### Data and license

{model.license}
"""


def processor() -> str:
    """The CPU's model name and core count, e.g. "AMD EPYC, 2 cores"."""
    names = (
        [
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines()
            if line.startswith("model name")
        ]
        if Path("/proc/cpuinfo").is_file()
        else []
    )
    cores = os.cpu_count() or 0
    return f"{names[0] if names else 'unknown'}, {cores} cores"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="default: every shipped model")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--ship-only", action="store_true", help="export finished runs only")
    args = parser.parse_args()
    known = {model.name: model for model in MODELS}
    unknown = [name for name in args.names if name not in known]
    if unknown:
        print(f"unknown model {unknown[0]}; choose from {', '.join(known)}", file=sys.stderr)
        return 2
    for model in [known[name] for name in args.names] or list(MODELS):
        final = RUNS / model.name / "final"
        if not (final / WEIGHTS).is_file():
            if args.ship_only:
                print(f"no finished run in {final.parent}", file=sys.stderr)
                return 1
            run_pretraining(pretrain_run(model, args.data), say=print)
        print(f"wrote {ship(model, final)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
