"""SIGTERM as an orderly stop (`bertlab.cli.stopping`): a KeyboardInterrupt in the command's own
process, while forked workers (the corpus-encoding pool's) still die by it, so that a pool's
terminate never waits forever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from bertlab.cli import main
from bertlab.cli.stopping import sigterm_as_interrupt


def _python(script: str, cli_env: dict[str, str], **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)], text=True, env=cli_env, **popen
    )


def _finish(process: subprocess.Popen, timeout: float, hung: str) -> tuple[str, str]:
    """The process's output once it ends; killed, and the test failed with `hung`, after
    `timeout` seconds."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise AssertionError(hung) from None


def test_pools_made_and_stopped_under_the_handler_never_hang(cli_env) -> None:
    """The reverted handler (workers inherited it and killed themselves on SIGTERM) hung here
    within a few hundred pools: a SIGTERM that reached a worker before Python's after-fork
    bookkeeping was dropped, and the pool's terminate waited for that worker forever."""
    script = """
        import multiprocessing
        from bertlab.cli.stopping import sigterm_as_interrupt
        with sigterm_as_interrupt():
            for _ in range(300):
                with multiprocessing.get_context("fork").Pool(2):
                    pass  # leaving the block terminates the pool: SIGTERM to each worker
        print("stopped")
    """
    process = _python(script, cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = _finish(process, 120, "a pool's terminate hung")
    assert process.returncode == 0 and stdout.strip() == "stopped", stderr


def test_sigterm_interrupts_corpus_encoding_and_stops_its_pool(cli_env) -> None:
    """SIGTERM during the corpus encoding's pool: the command's process gets KeyboardInterrupt,
    the workers end, and nothing waits."""
    script = """
        import time
        from bertlab.cli.stopping import is_terminated, sigterm_as_interrupt
        from bertlab.corpus.encode import encoded_chunks

        def slow(task):
            time.sleep(0.2)
            return task

        with sigterm_as_interrupt():
            try:
                for index, _ in enumerate(encoded_chunks(iter(range(10_000)), slow, 2)):
                    if index == 2:
                        print("encoding", flush=True)
            except KeyboardInterrupt as interrupt:
                print("interrupted", is_terminated(interrupt), flush=True)
    """
    process = _python(script, cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.readline().strip() == "encoding", process.stderr.read()
    process.send_signal(signal.SIGTERM)
    stdout, stderr = _finish(process, 60, "the pool did not stop after SIGTERM")
    assert (process.returncode, stdout.strip()) == (0, "interrupted True"), stderr


def test_a_process_forked_under_the_handler_dies_by_sigterm(cli_env) -> None:
    script = """
        import os, time
        from bertlab.cli.stopping import sigterm_as_interrupt
        with sigterm_as_interrupt():
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            time.sleep(0.5)
            os.kill(pid, 15)
            print(os.waitpid(pid, 0)[1], flush=True)
    """
    process = _python(script, cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert os.WIFSIGNALED(int(stdout)) and os.WTERMSIG(int(stdout)) == signal.SIGTERM


def test_the_handler_is_given_back(tmp_path) -> None:
    """A command's handler stayed installed after `main` returned (in a program that calls it)."""
    before = signal.getsignal(signal.SIGTERM)
    with sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) != before
    assert signal.getsignal(signal.SIGTERM) == before
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nw1\n", encoding="utf-8")
    assert main(["tokenizer", "encode", "--tokenizer", str(vocab), "w1"]) == 0
    assert signal.getsignal(signal.SIGTERM) == before


def test_sigterm_during_a_command_is_one_line_and_exit_code_143(monkeypatch, capsys) -> None:
    """The message says SIGTERM, and the exit code is 128 + 15, as a shell reports it."""
    from bertlab.cli import tokenizer

    def terminated(args) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)  # the handler raises KeyboardInterrupt here
        return 0

    monkeypatch.setattr(tokenizer, "run_tokenizer_encode", terminated)
    assert main(["tokenizer", "encode", "--tokenizer", "vocab.txt", "w1"]) == 143
    assert capsys.readouterr().err.strip() == "bertlab: interrupted by SIGTERM"


def test_sigterm_to_the_process_group_stops_a_data_loader_without_a_traceback(cli_env) -> None:
    """SIGTERM to a command's process group also ends its data loader's worker; torch's SIGCHLD
    handler then raised "DataLoader worker (pid N) is killed by signal: Terminated" in the middle
    of the stop (a traceback in 1 of 8 tries of `pretrain`)."""
    script = """
        import os, signal, time
        import torch
        from torch.utils.data import DataLoader
        from bertlab.cli.stopping import is_terminated, sigterm_as_interrupt

        class Slow(torch.utils.data.Dataset):
            def __len__(self):
                return 1_000_000

            def __getitem__(self, index):
                time.sleep(0.01)
                return index

        with sigterm_as_interrupt():
            try:
                for index, _ in enumerate(DataLoader(Slow(), num_workers=1)):
                    if index == 2:
                        try:
                            # From another process, as a scheduler's (torch's worker ends
                            # quietly on its parent's own SIGTERM): `kill` signals the group.
                            os.system("kill -TERM 0")
                            time.sleep(10)
                        finally:
                            time.sleep(1)  # the stop's cleanup (a checkpoint), loader still open
            except KeyboardInterrupt as interrupt:
                print("interrupted", is_terminated(interrupt), flush=True)
                stopped = interrupt  # its traceback keeps the loader until the process exits
        time.sleep(1)  # the command has returned; the loader goes at exit
    """
    process = _python(
        script, cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    stdout, stderr = _finish(process, 60, "the data loader did not stop after SIGTERM")
    assert (process.returncode, stdout.split(), stderr) == (0, ["interrupted", "True"], "")


def test_sigterm_to_the_process_group_stops_corpus_encoding_at_once(cli_env) -> None:
    """SIGTERM to the group while the encoding workers waited for their next chunk: a worker
    died holding multiprocessing.Pool's task-queue lock, and the pool's terminate waited for
    that lock forever (the command hung, leaving its temporary corpus behind)."""
    script = """
        import itertools, os, time
        from bertlab.cli.stopping import is_terminated, sigterm_as_interrupt
        from bertlab.corpus.encode import encoded_chunks

        def tasks():
            for index in itertools.count():
                time.sleep(0.05)  # reading the corpus: the workers wait for their next chunk
                yield index

        with sigterm_as_interrupt():
            try:
                for index, _ in enumerate(encoded_chunks(tasks(), lambda task: task, 2)):
                    if index == 5:
                        os.system("kill -TERM 0")  # the whole group, from another process
                        time.sleep(10)
            except KeyboardInterrupt as interrupt:
                print("interrupted", is_terminated(interrupt), flush=True)
    """
    process = _python(
        script, cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    stdout, stderr = _finish(process, 60, "corpus encoding hung after SIGTERM to its group")
    assert (process.returncode, stdout.strip()) == (0, "interrupted True"), stderr
