"""How does a model of the shipped kind fine-tune on the demo's labelled slice? A lab tool for the
demo's shipped-model rows.

Fine-tunes each MODEL folder (`scratch` names the demo's own scratch row: BERT-Tiny on a
vocabulary trained as the demo trains it, at the demo's own rate; with --twin, a random twin of
the first folder's shape and vocabulary, started as the demo's twins are) on the demo's task of
LANG with the demo's settings (`bertlab.apps.demo.config.RECIPES`: batch, epochs, dev split,
sequence length, the shipped model's rate), any of which a flag replaces, seed by seed, and prints
each test score, the medians, and each model against the first (the spread rule of
bertlab.apps.flows.compare and the paired seeds' sign test).

    python lab/shipped_rows.py runs/rows-zh zh 1,2,3,4,5 bertlab/models/mini-reviews-zh \\
        runs/models/zh-hour/final --epochs 3

Writes OUT/log.json with every score and each run's seconds. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from demo_arms import summary_line  # lab/, the script's own folder

from bertlab.apps.demo.config import RECIPES
from bertlab.apps.demo.rows import demo_task_data, model_config
from bertlab.apps.demo.runner import train_demo_tokenizer
from bertlab.apps.flows import finetune_and_test, random_twin
from bertlab.core.config import BertConfig
from bertlab.core.finetune_config import FinetuneConfig
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining.budget import BudgetRecipe


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("lang", choices=tuple(RECIPES))
    parser.add_argument("seeds", help="comma-separated, e.g. 1,2,3,4,5")
    parser.add_argument(
        "models", nargs="+", help="model folders or `scratch`; the first is the reference"
    )
    parser.add_argument("--twin", action="store_true", help="add the first model's random twin")
    parser.add_argument("--rate", type=float, help="default: the recipe's shipped_learning_rate")
    parser.add_argument("--epochs", type=int, help="default: the recipe's finetune_epochs")
    parser.add_argument("--max-seq-length", type=int, help="default: the recipe's")
    parser.add_argument("--batch-size", type=int, help="default: the recipe's")
    return parser.parse_args()


def _label(index: int, folder: str) -> str:
    path = Path(folder)
    return folder if folder == "scratch" else f"{index}:{path.parent.name}/{path.name}"


def main() -> None:
    args = _parse()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recipe = RECIPES[args.lang]
    if args.max_seq_length:
        recipe = replace(recipe, finetune_max_seq_length=args.max_seq_length)
    rate = args.rate or recipe.shipped_learning_rate
    epochs = args.epochs or recipe.finetune_epochs
    seeds = [int(seed) for seed in args.seeds.split(",")]
    task, data, test = demo_task_data(recipe)
    arms = {_label(index, folder): Path(folder) for index, folder in enumerate(args.models)}
    if args.twin:
        arms["twin"] = None
    first = next((Path(folder) for folder in args.models if folder != "scratch"), None)
    tiny = None
    if "scratch" in args.models:
        tokenizer, _ = train_demo_tokenizer(recipe, out)
        tiny = model_config(recipe, tokenizer, BertConfig.hidden_dropout_prob)
    log: dict = {"args": vars(args), "rate": rate, "epochs": epochs, "scores": {}, "seconds": {}}
    for seed in seeds:
        for arm, folder in arms.items():
            arm_rate = rate
            if folder == Path("scratch"):
                arm_rate = recipe.finetune_learning_rate
                folder = random_twin(
                    tiny, tokenizer, seed, BudgetRecipe.position_init, out / "scratch" / f"{seed}"
                )
            elif folder is None:
                folder = random_twin(
                    BertConfig.from_json_file(first / "config.json"),
                    Tokenizer.from_pretrained(first),
                    seed,
                    BudgetRecipe.position_init,
                    out / "twin" / f"seed-{seed}",
                )
            config = FinetuneConfig(
                learning_rate=arm_rate,
                batch_size=args.batch_size or recipe.finetune_batch_size,
                num_train_epochs=epochs,
                seed=seed,
            )
            started = time.perf_counter()
            run_dir = out / "finetune" / arm.replace("/", "_").replace(":", "-") / f"seed-{seed}"
            metrics = finetune_and_test(task, data, test, folder, config, run_dir, False)
            log["scores"].setdefault(arm, []).append(metrics[task.primary_metric])
            log["seconds"].setdefault(arm, []).append(round(time.perf_counter() - started, 1))
            print(f"seed {seed} {arm}: {log['scores'][arm][-1]:.4f}", flush=True)
    reference = next(iter(arms))
    for arm, values in log["scores"].items():
        print(summary_line(arm, values, reference, log["scores"][reference]))
    (out / "log.json").write_text(json.dumps(log, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
