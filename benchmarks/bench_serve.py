"""Load test of `bertlab serve` on loopback: C concurrent clients for S seconds of fill-mask and
classify requests on BERT-mini models, once per batching setting.

The server runs as the command line runs it (`python -m bertlab serve`, a separate process, so
its peak memory is its own: VmHWM from /proc). Models are BERT-mini with random weights (speed
does not depend on training): a pre-trained model with its masked-LM head and a two-label
classifier, on Google's uncased vocabulary when ../shared/data has it, else on the words of the
shipped SST-2 slice. Each client holds one keep-alive connection and sends, one after the
other, a fill-mask and a classify request with one SST-2 test sentence each (one word masked
for fill-mask), until the time is up or it has sent `--max-requests`; then the script checks
that the server still answers, stops it with Ctrl-C (SIGINT) and prints one table row per
setting. Clients and server share this machine's cores, as they do on a laptop.

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_serve.py \
        [--seconds 60] [--clients 8] [--max-batch-texts 32 1]
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

from bertlab.core.config import BertConfig
from bertlab.network.bert import BertForPreTraining
from bertlab.network.heads import BertForSequenceClassification
from bertlab.tokenizer.wordpiece import MASK_TOKEN, SPECIAL_TOKENS, Tokenizer

REPO = Path(__file__).resolve().parents[1]
GOOGLE_VOCAB = REPO.parent / "shared" / "data" / "vocab" / "bert-base-uncased-vocab.txt"
SST2 = REPO / "bertlab" / "demo_data"
STARTUP_SECONDS = 120  # loading two BERT-mini models and importing torch
REQUEST_TIMEOUT = 60
PORT_LINE = re.compile(r"serving \d+ model\(s\) at http://127\.0\.0\.1:(\d+)/")


def sentences(path: Path) -> list[str]:
    """The sentences of an SST-2 TSV file (`sentence<TAB>label` with a header)."""
    with path.open(encoding="utf-8") as file:
        return [row["sentence"] for row in csv.DictReader(file, delimiter="\t")]


def build_models(directory: Path) -> tuple[Path, Path, str]:
    """BERT-mini with its MLM head and a two-label classifier; (mlm, classifier, vocab name)."""
    if GOOGLE_VOCAB.is_file():
        tokenizer, vocab_name = Tokenizer.from_pretrained(GOOGLE_VOCAB), GOOGLE_VOCAB.name
    else:
        words = sorted({w for s in sentences(SST2 / "sst2_train.tsv") for w in s.lower().split()})
        tokenizer = Tokenizer({t: i for i, t in enumerate([*SPECIAL_TOKENS, *words])})
        vocab_name = f"the {len(words)} words of bertlab/demo_data/sst2_train.tsv"
    config = BertConfig.from_preset("mini", vocab_size=tokenizer.vocab_size)
    torch.manual_seed(0)
    mlm, classifier = directory / "mlm", directory / "sst2"
    BertForPreTraining(config).save_pretrained(mlm)
    BertForSequenceClassification(config, id2label={0: "negative", 1: "positive"}).save_pretrained(
        classifier
    )
    for model in (mlm, classifier):
        tokenizer.save_pretrained(model)
    return mlm, classifier, vocab_name


def start_server(mlm: Path, classifier: Path, max_batch_texts: int, log: Path):
    """`bertlab serve` on a free loopback port: (process, port)."""
    command = [
        sys.executable, "-m", "bertlab", "serve",
        "--model", f"mlm={mlm}", "--model", f"sst2={classifier}",
        "--port", "0", "--max-batch-texts", str(max_batch_texts),
    ]  # fmt: skip
    process = subprocess.Popen(command, stderr=log.open("w"), stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        found = PORT_LINE.search(log.read_text(encoding="utf-8"))
        if found:
            port = int(found.group(1))
            if get(port, "/api/health")[0] == 200:
                return process, port
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text(encoding='utf-8')}")
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("the server did not start in time")


def get(port: int, path: str) -> tuple[int, dict | None]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    except OSError:
        return 0, None
    finally:
        connection.close()


def client(port: int, seed: int, pool: list[str], deadline: float, max_requests: int, out: list):
    """Alternate fill-mask and classify requests until `deadline`; append (kind, s, status)."""
    rng = random.Random(seed)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    headers = {"Content-Type": "application/json"}
    for number in range(max_requests):
        if time.monotonic() >= deadline:
            break
        words = rng.choice(pool).split()
        if number % 2 == 0:
            words[rng.randrange(len(words))] = MASK_TOKEN
            kind, path, body = (
                "fill-mask",
                "/api/models/mlm/fill-mask",
                {"texts": [" ".join(words)]},
            )
        else:
            kind, path, body = "classify", "/api/models/sst2/classify", {"texts": [" ".join(words)]}
        start = time.perf_counter()
        try:
            connection.request("POST", path, json.dumps(body), headers)
            response = connection.getresponse()
            response.read()
            status = response.status
        except OSError as error:
            status = type(error).__name__
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
        out.append((kind, time.perf_counter() - start, status))
    connection.close()


def peak_memory_mib(pid: int) -> float | None:
    """The process's peak resident memory (Linux VmHWM), in MiB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(found.group(1)) / 1024 if found else None


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run(setting: int, args, mlm: Path, classifier: Path, pool: list[str], work: Path) -> dict:
    process, port = start_server(mlm, classifier, setting, work / f"server-{setting}.log")
    try:
        idle_memory = peak_memory_mib(process.pid)
        records: list = []
        deadline = time.monotonic() + args.seconds
        threads = [
            threading.Thread(
                target=client, args=(port, seed, pool, deadline, args.max_requests, records)
            )
            for seed in range(args.clients)
        ]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        health_status, health = get(port, "/api/health")
        still = get(port, "/api/models")[0] == 200 and health_status == 200
        peak = peak_memory_mib(process.pid)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            exit_code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            exit_code = "killed"
    errors = [record for record in records if record[2] != 200]
    latencies = {
        kind: [seconds for k, seconds, status in records if k == kind and status == 200]
        for kind in ("fill-mask", "classify")
    }
    every = latencies["fill-mask"] + latencies["classify"]
    sizes = {int(size): count for size, count in (health or {}).get("batch_sizes", {}).items()}
    calls = sum(sizes.values())
    return {
        "max_batch_texts": setting,
        "requests": len(records),
        "seconds": elapsed,
        "errors": len(errors),
        "error_kinds": sorted({str(status) for _, _, status in errors}),
        "p50": {kind: statistics.median(v) for kind, v in latencies.items() if v},
        "p99": {kind: percentile(v, 0.99) for kind, v in latencies.items() if v},
        "p50_all": statistics.median(every) if every else None,
        "p99_all": percentile(every, 0.99) if every else None,
        "idle_memory_mib": idle_memory,
        "peak_memory_mib": peak,
        "mean_batch": sum(size * count for size, count in sizes.items()) / calls if calls else None,
        "max_batch": max(sizes) if sizes else None,
        "still_answers": still,
        "exit_code": exit_code,
    }


def row(result: dict) -> str:
    ms = 1000
    p50, p99 = result["p50"], result["p99"]
    return (
        f"| {result['max_batch_texts']} | {result['requests']} | "
        f"{result['requests'] / result['seconds']:.1f} | "
        f"{p50['fill-mask'] * ms:.0f} / {p99['fill-mask'] * ms:.0f} | "
        f"{p50['classify'] * ms:.0f} / {p99['classify'] * ms:.0f} | "
        f"{result['errors']} | {result['peak_memory_mib']:.0f} | "
        f"{result['mean_batch']:.2f} (max {result['max_batch']}) | "
        f"{'yes' if result['still_answers'] else 'NO'} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--max-requests", type=int, default=100_000, help="per client")
    parser.add_argument("--max-batch-texts", type=int, nargs="+", default=[32, 1])
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    pool = [s for s in sentences(SST2 / "sst2_test.tsv") if len(s.split()) >= 3]
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(temporary)
        mlm, classifier, vocab_name = build_models(work)
        results = [
            run(setting, args, mlm, classifier, pool, work) for setting in args.max_batch_texts
        ]
    print(
        f"bertlab serve, BERT-mini (random weights, vocabulary: {vocab_name}), {args.clients} "
        f"clients for {args.seconds:g} s each, fill-mask and classify alternating, one SST-2 "
        f"test sentence per request; torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    print()
    print(
        "| --max-batch-texts | requests | requests/s | fill-mask p50 / p99 ms | "
        "classify p50 / p99 ms | errors | server peak RSS MiB | inputs per forward pass | "
        "answers afterwards |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for result in results:
        print(row(result))
    for result in results:
        if result["errors"] or result["exit_code"] != 0:
            print(
                f"max_batch_texts {result['max_batch_texts']}: errors {result['error_kinds']}, "
                f"server exit code {result['exit_code']}"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
