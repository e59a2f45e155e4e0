"""The write turn (syncd.writes.turn.FairLock) is served in the order it was asked for: a thread
that takes it again and again never keeps out one that asked while it held it (the daemon's
step beside a stream of agent writes), and a waiter that gives up leaves no hole."""

from __future__ import annotations

import threading

import pytest

from syncd.writes.turn import FairLock

from .helpers import wait_for


def test_waiters_are_served_in_the_order_they_asked():
    lock = FairLock()
    order: list[int] = []
    lock.acquire()
    threads = []
    for n in range(5):
        thread = threading.Thread(target=lambda n=n: (lock.acquire(), order.append(n), lock.release()))
        thread.start()
        threads.append(thread)
        wait_for(lambda n=n: lock.waiting() == n + 1, 10, f"waiter {n} to ask")  # the order under test
    lock.release()
    for thread in threads:
        thread.join(10)
    assert order == [0, 1, 2, 3, 4]


def test_a_thread_taking_it_straight_back_waits_for_the_one_that_asked_meanwhile():
    """A plain lock lets the thread that releases it take it straight back (the waiter has not
    run yet): with a stream of agent writes, a daemon step could wait for as long as they last."""
    lock = FairLock()
    order: list[str] = []
    lock.acquire()
    waiter = threading.Thread(target=lambda: (lock.acquire(), order.append("asked meanwhile"), lock.release()))
    waiter.start()
    wait_for(lambda: lock.waiting() == 1, 10, "the waiter to ask while we hold it")
    lock.release()
    lock.acquire()
    order.append("took it back")
    lock.release()
    waiter.join(10)
    assert order == ["asked meanwhile", "took it back"]


def test_non_blocking_acquire_and_misuse():
    lock = FairLock()
    assert not lock.locked()
    assert lock.acquire(blocking=False) and lock.locked()
    assert not lock.acquire(blocking=False)
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()
    with lock:
        assert not lock.acquire(blocking=False)
    assert lock.acquire(blocking=False)
    lock.release()


def test_a_waiter_that_gives_up_leaves_no_hole(monkeypatch):
    lock = FairLock()
    lock.acquire()
    # White-box: an interruption inside the wait is injected into the lock's own condition.
    real_wait = lock._cond.wait
    calls = []

    def interrupted_wait(*args):
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(lock._cond, "wait", interrupted_wait)
    with pytest.raises(KeyboardInterrupt):
        lock.acquire()
    assert lock.waiting() == 0  # the one that gave up is not counted as waiting
    monkeypatch.setattr(lock._cond, "wait", real_wait)
    got = []
    waiter = threading.Thread(target=lambda: (lock.acquire(), got.append(1), lock.release()))
    waiter.start()
    wait_for(lambda: lock.waiting() == 1, 10, "the next waiter to ask")
    lock.release()
    waiter.join(10)
    assert calls and got == [1], "the next waiter was served past the one that gave up"
