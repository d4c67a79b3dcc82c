"""Make the models that ship with bertlab (`bertlab:NAME` in every `--model`): pre-train each with
the budget recipe on the shared data, then copy its final model into bertlab/models/NAME with
fp16 weights (about 11 MB for BERT-mini) and a model card that gives the exact command, the data
and its license. The models and what is said of them are the rows of `bertlab.core.shipped`.

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
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from bertlab.core.atomic import atomic_directory
from bertlab.core.hub import SHIPPED_DIR, SHIPPED_PREFIX
from bertlab.core.model_card import CARD_NAME
from bertlab.core.shipped import CHECKPOINT_MINUTES, SHARED_DATA, SHIPPED_MODELS, ShippedModel
from bertlab.training.pretraining.checkpointing import latest_checkpoint
from bertlab.training.pretraining.run import PretrainRun
from bertlab.training.pretraining.runner import run_pretraining

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
        checkpoint_every_minutes=CHECKPOINT_MINUTES,
        resume=resume,
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
{model.command()}
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
    parser.add_argument("--data", type=Path, default=Path(SHARED_DATA))
    parser.add_argument("--ship-only", action="store_true", help="export finished runs only")
    args = parser.parse_args()
    known = {model.name: model for model in SHIPPED_MODELS}
    unknown = [name for name in args.names if name not in known]
    if unknown:
        print(f"unknown model {unknown[0]}; choose from {', '.join(known)}", file=sys.stderr)
        return 2
    for model in [known[name] for name in args.names] or list(SHIPPED_MODELS):
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
