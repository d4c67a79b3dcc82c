"""Which few-minute start beats scratch on the demo's labelled slice? A lab tool for the demo.

Trains a vocabulary on CORPUS, then gives every ARM the same fine-tuning on the demo's (or a
given) labelled slice with the same seeds, and prints each arm against scratch (the spread rule
of bertlab.apps.flows.compare and the paired seeds' sign test). Arms:

    scratch    the random twin (sinusoidal positions, as pre-training starts)
    w2v        the twin with word2vec vectors of CORPUS as its embedding matrix
    mlm        the budget recipe's masked LM for MINUTES on CORPUS (BERT-Tiny below 30 min)
    w2v+mlm    the same, started from the w2v twin
    electra    the budget recipe with ELECTRA's replaced-token detection; electra15: at 15%

    python lab/demo_arms.py runs/arms/en en bertlab/demo_data/imdb_reviews_slice.txt.gz 5 \\
        1,2,3,4,5 scratch,w2v,mlm,w2v+mlm
    python lab/demo_arms.py runs/arms/wikiann en bertlab/demo_data/enwiki_slice.txt.gz 5 \\
        1,2,3,4,5 scratch,w2v,mlm --task wikiann --train wikiann_train.tsv --test wikiann_test.tsv

Writes OUT/log.json with every score. Run it alone on the machine: the pre-training arms are
time-budgeted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bertlab.apps.demo.runner import DATA_DIR
from bertlab.apps.flows import compare, finetune_and_test, random_twin, sign_test
from bertlab.core.config import BertConfig
from bertlab.core.finetune_config import FinetuneConfig, TaskDataConfig
from bertlab.corpus.build import build_corpus
from bertlab.task_families import make_task
from bertlab.tokenizer.training import TokenizerTrainingConfig, train_tokenizer
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import read_task_data
from bertlab.training.pretraining.budget import budget_recipe
from bertlab.training.pretraining.run import PretrainRun
from bertlab.training.pretraining.runner import run_pretraining
from bertlab.training.word2vec.vectors import WordVectorConfig, train_word_vectors

SLICES = {
    "en": ("sst2", DATA_DIR / "sst2_train.tsv", DATA_DIR / "sst2_test.tsv", 64),
    "zh": (
        "chnsenticorp",
        DATA_DIR / "chnsenticorp_train.tsv",
        DATA_DIR / "chnsenticorp_test.tsv",
        128,
    ),
}
ARMS = ("scratch", "w2v", "mlm", "w2v+mlm", "electra", "electra15")


def summary_line(name: str, values, reference: str, reference_values) -> str:
    """One arm's median and range, and, unless it is the reference, its margin against the
    reference's median, the spread rule's verdict and the paired seeds' sign test."""
    median = statistics.median(values)
    line = f"{name}: median {median:.4f} ({min(values):.4f}-{max(values):.4f})"
    if values is reference_values:
        return line
    comparison = compare(reference_values, values)
    wins, losses, p_value = sign_test(reference_values, values)
    return line + (
        f"  margin {comparison.margin:+.4f} vs spread {comparison.spread:.4f} "
        f"({'beats ' + reference if comparison.wins else 'no'}); paired {wins}-{losses}, "
        f"sign test p {p_value:.3f}"
    )


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("lang", choices=("en", "zh"))
    parser.add_argument("corpus")
    parser.add_argument("minutes", type=float)
    parser.add_argument("seeds")
    parser.add_argument("arms")
    parser.add_argument("--shape", default="tiny")
    parser.add_argument("--task", help="default: the demo's task of LANG")
    parser.add_argument("--train", help="with --task: the labelled training file")
    parser.add_argument("--test", help="with --task: the test file")
    parser.add_argument("--max-seq-length", type=int, default=64, help="with --task")
    return parser.parse_args()


def main() -> None:
    args = _parse()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    arms = args.arms.split(",")
    if set(arms) - set(ARMS) or "scratch" not in arms:
        raise SystemExit(f"demo_arms: arms must include scratch and be some of {ARMS}")
    log: dict = {"args": vars(args), "pretraining": {}}

    tokenizer_dir = out / "tokenizer"
    if not (tokenizer_dir / "vocab.txt").exists():
        recipe = budget_recipe(args.minutes * 60)
        config = TokenizerTrainingConfig(
            vocab_size=recipe.vocab_size,
            min_ideograph_frequency=recipe.ideograph_frequency(args.lang),
        )
        tokenizer, _ = train_tokenizer([args.corpus], config, show_progress=False)
        tokenizer.save_pretrained(tokenizer_dir)
    tokenizer = Tokenizer.from_pretrained(tokenizer_dir)
    corpus = build_corpus([args.corpus], tokenizer, out / "corpus", args.lang, False)
    shape = BertConfig.from_preset(
        args.shape, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id
    )
    vectors = None
    if {"w2v", "w2v+mlm"} & set(arms):
        vectors = train_word_vectors(corpus, WordVectorConfig(vector_size=shape.hidden_size))

    models = {}
    for arm in arms:
        if arm in ("scratch", "w2v"):
            continue
        run_dir = out / f"pretrain-{arm}"
        shared = {
            "corpus": [args.corpus],
            "out": run_dir,
            "budget": args.minutes * 60,
            "tokenizer": tokenizer_dir,
            "corpus_cache": out / "corpus",
            "lang": args.lang,
            "eval_every_steps": 100,
        }
        if arm == "w2v+mlm":  # the w2v twin, pre-trained further without dropout
            init = random_twin(
                shape.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
                tokenizer,
                0,
                "sinusoidal",
                out / "w2v-init",
                vectors,
            )
            run = PretrainRun(init_from=init, **shared)
        else:
            extra = {"objective": "electra"} if arm.startswith("electra") else {}
            if arm == "electra15":
                extra["mlm_probability"] = 0.15
            run = PretrainRun(model_size=args.shape, **shared, **extra)
        if not (run_dir / "final" / "config.json").exists():
            result = run_pretraining(run, show_progress=False, say=lambda line: None)
            log["pretraining"][arm] = {
                "steps": result.progress.step,
                "tokens": result.progress.tokens,
                "eval": result.last_eval,
            }
            print(arm, log["pretraining"][arm], flush=True)
        models[arm] = run_dir / "final"

    if args.task:
        name, train, test = args.task, Path(args.train), Path(args.test)
        length = args.max_seq_length
    else:
        name, train, test, length = SLICES[args.lang]
    task = make_task(name, data=TaskDataConfig(max_seq_length=length))
    data = read_task_data(task, train, None, dev_fraction=0.1)
    test_examples = task.read_gold(test, data.label_names)
    twin = shape.replace(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    scores: dict[str, list[float]] = {arm: [] for arm in arms}
    started = time.perf_counter()
    for seed in seeds:
        for arm in arms:
            model_dir = models.get(arm)
            if model_dir is None:
                model_dir = random_twin(
                    twin,
                    tokenizer,
                    seed,
                    "sinusoidal",
                    out / f"twin-{arm}-{seed}",
                    vectors if arm == "w2v" else None,
                )
            config = FinetuneConfig(
                learning_rate=1e-3, batch_size=32, num_train_epochs=4, seed=seed
            )
            run_dir = out / "finetune" / arm / f"seed-{seed}"
            metrics = finetune_and_test(
                task, data, test_examples, model_dir, config, run_dir, False
            )
            scores[arm].append(metrics[task.primary_metric])
            print(f"seed {seed} {arm}: {scores[arm][-1]:.4f}", flush=True)
    log["finetuning_seconds"] = time.perf_counter() - started
    log["scores"] = scores
    for arm in arms:
        print(summary_line(f"{arm:>10}", scores[arm], "scratch", scores["scratch"]))
    (out / "log.json").write_text(json.dumps(log, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
