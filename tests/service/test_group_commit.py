"""Group commit: what arrives while a transaction is written shares the next one."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from ilucid.service.group_commit import GroupCommit


class GatedWriter:
    """Doubles each item; the first transaction waits at a gate until released, so the
    items submitted meanwhile are known to queue up."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.first_started = threading.Event()
        self.gate = threading.Event()
        self.fail_on = fail_on

    def __call__(self, items: Sequence[int]) -> list[int]:
        if not self.batches:
            self.first_started.set()
            assert self.gate.wait(10)
        self.batches.append(list(items))
        if self.fail_on in items:
            raise OSError(f"disk full while writing {list(items)}")
        return [2 * item for item in items]


def _submit_all(
    commits: GroupCommit[int, int], items: list[int]
) -> tuple[dict[int, object], list[threading.Thread]]:
    """Each item submitted from a thread of its own: its answer (or error), the threads."""
    answers: dict[int, object] = {}

    def one(item: int) -> None:
        try:
            answers[item] = commits.submit(item)
        except OSError as exc:
            answers[item] = exc

    threads = [threading.Thread(target=one, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    return answers, threads


def test_what_arrives_during_a_write_shares_the_next_transaction() -> None:
    writer = GatedWriter()
    commits: GroupCommit[int, int] = GroupCommit(writer)
    answers, first = _submit_all(commits, [0])
    assert writer.first_started.wait(10)
    rest, threads = _submit_all(commits, list(range(1, 9)))
    while len(commits._queued) < 8:  # every one of them is waiting for the first write
        threading.Event().wait(0.01)
    writer.gate.set()
    for thread in [*first, *threads]:
        thread.join(10)
    answers.update(rest)
    assert answers == {item: 2 * item for item in range(9)}
    assert writer.batches == [[0], list(range(1, 9))]  # 2 transactions for 9 items
    assert (commits.transactions, commits.items) == (2, 9)


def test_a_failed_transaction_fails_each_of_its_items_and_no_other() -> None:
    writer = GatedWriter(fail_on=5)
    commits: GroupCommit[int, int] = GroupCommit(writer)
    answers, first = _submit_all(commits, [0])
    assert writer.first_started.wait(10)
    rest, threads = _submit_all(commits, [4, 5, 6])
    while len(commits._queued) < 3:
        threading.Event().wait(0.01)
    writer.gate.set()
    for thread in [*first, *threads]:
        thread.join(10)
    answers.update(rest)
    assert answers[0] == 0
    for item in (4, 5, 6):  # all three were in the transaction that failed
        assert isinstance(answers[item], OSError) and "disk full" in str(answers[item])
    # and the next submission gets a transaction of its own
    assert commits.submit(7) == 14


def test_many_threads_at_once_get_every_answer_in_fewer_transactions() -> None:
    written: list[int] = []

    def write(items: Sequence[int]) -> list[int]:
        threading.Event().wait(0.002)  # a commit takes a while
        written.extend(items)
        return [item + 1 for item in items]

    commits: GroupCommit[int, int] = GroupCommit(write)
    results: dict[int, int] = {}
    start = threading.Barrier(16)

    def client(base: int) -> None:
        start.wait()
        for k in range(25):
            results[base + k] = commits.submit(base + k)

    threads = [threading.Thread(target=client, args=(i * 100,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert results == {item: item + 1 for item in results} and len(results) == 400
    assert sorted(written) == sorted(results)  # each item written once
    assert commits.transactions < 400 / 2, commits.transactions


@pytest.mark.parametrize("count", [1, 3])
def test_a_writer_that_answers_the_wrong_number_of_results_fails_its_items(count: int) -> None:
    commits: GroupCommit[int, int] = GroupCommit(lambda items: [1] * (len(items) + count))
    with pytest.raises(RuntimeError, match="results for 1 items"):
        commits.submit(1)
