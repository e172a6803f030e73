"""Decisions in slices: a long decision gives the decision thread back every few milliseconds.

A decision is written as a *stepwise* computation, a generator (:data:`Steps`) that yields between
small pieces of work (a span decoded, a pass replayed, a note written) and returns its result. The
same generator run to its end in one go (:func:`finish`) is the plain decision; :class:`Slices`
runs several of them round-robin on one thread, each for at most a time budget before the next
gets its turn. Nothing is computed differently, only in turns: a small run queued behind a
3,000-pass one is decided within about one budget instead of after the whole long decision.

Two decisions that read and write the same run-store keys (a run id, a session) must still see
each other in the order they were queued (a resumed leg reads the leg state its earlier leg
wrote; a turn's findings read the session state the turn before it left). :class:`StoreTurns`
keeps that order: a decision declares its keys once it knows them, and waits (yields
:data:`WAIT`, giving its turn away) before its first store access while an earlier decision that
shares a key, or has not said its keys yet, is still open.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Collection, Generator
from typing import Final, Generic, TypeVar

T = TypeVar("T")
Tag = TypeVar("Tag")

WAIT: Final = True
"""Yielded by a step that cannot go on until another decision has finished (store order)."""

Steps = Generator[bool | None, None, T]
"""A stepwise computation: yields ``None`` after a piece of work, :data:`WAIT` when blocked."""

SLICE_SECONDS: Final = 0.02
"""How long one decision keeps the thread before the next one queued gets its turn. Well under
the 100 ms a run may wait behind another; each step is far shorter (some spans, one pass)."""

STEP_SPANS: Final = 32
"""Spans a per-span loop (parsing a held span, grouping, decoding a span's events, reading a tool
span, writing a note) handles per step. Each is a few to some tens of microseconds, so a step stays
around a millisecond, far under :data:`SLICE_SECONDS`; a step per span cost more in resuming the
chain of generators down to it (≈ 3,700 instructions through eight of them) than many a span's
own work."""


def finish(steps: Steps[T]) -> T:
    """Run a stepwise computation to its end on the calling thread, in one go."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


class Slices(Generic[Tag, T]):
    """Stepwise computations run round-robin on the calling thread, a time budget each.

    :meth:`add` queues one; :meth:`step` gives the oldest queued one its turn (until its budget is
    spent, it waits on another, or it ends) and returns what ended. A computation that raises
    ends with the exception (returned, not raised: one bad decision must not stop the others).
    """

    def __init__(
        self, budget: float = SLICE_SECONDS, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.budget = budget
        self.clock = clock
        self._queue: deque[tuple[Tag, Steps[T]]] = deque()
        self.longest_turn = 0.0
        """The longest turn given so far (seconds, by ``clock``): what the thread was held."""
        self.longest_turn_cpu = 0.0
        """The most thread CPU time one turn took so far (seconds; on a shared machine the
        wall-clock turn also counts the time the thread waited for a core)."""

    def add(self, tag: Tag, steps: Steps[T]) -> None:
        self._queue.append((tag, steps))

    def __len__(self) -> int:
        return len(self._queue)

    def tags(self) -> list[Tag]:
        """The tags of the computations not ended yet, in turn order."""
        return [tag for tag, _ in self._queue]

    def step(self) -> tuple[Tag, T | BaseException] | None:
        """One turn of the oldest queued computation; ``(tag, result or exception)`` when it ended
        in this turn, else None (it went to the back of the queue)."""
        if not self._queue:
            return None
        tag, steps = self._queue.popleft()
        clock = self.clock
        cpu = time.thread_time()
        started = clock()
        deadline = started + self.budget
        try:
            while True:
                if next(steps) is WAIT or clock() >= deadline:
                    break
        except StopIteration as stop:
            self._turn(clock() - started, cpu)
            return tag, stop.value
        except Exception as error:
            self._turn(clock() - started, cpu)
            return tag, error
        self._turn(clock() - started, cpu)
        self._queue.append((tag, steps))
        return None

    def _turn(self, seconds: float, cpu_started: float) -> None:
        self.longest_turn = max(self.longest_turn, seconds)
        self.longest_turn_cpu = max(self.longest_turn_cpu, time.thread_time() - cpu_started)


class StoreTurns:
    """Keeps decisions that share run-store keys in the order they were queued (see module)."""

    def __init__(self) -> None:
        self._open: dict[int, frozenset[str] | None] = {}
        self._numbers = itertools.count()

    def ticket(self) -> Ticket:
        """A place in the order, taken when a decision is queued; close it when it ends."""
        number = next(self._numbers)
        self._open[number] = None
        return Ticket(self, number)

    def _clear(self, number: int) -> bool:
        mine = self._open.get(number)
        for other, keys in self._open.items():
            if other >= number:
                # Dicts keep insertion order and numbers only grow: the rest are later.
                break
            if keys is None or mine is None or not keys.isdisjoint(mine):
                return False
        return True


class Ticket:
    """One decision's place in :class:`StoreTurns`."""

    __slots__ = ("_number", "_turns")

    def __init__(self, turns: StoreTurns, number: int) -> None:
        self._turns = turns
        self._number = number

    @property
    def declared(self) -> bool:
        """Whether the decision has said its keys yet."""
        return self._turns._open.get(self._number) is not None

    def declare(self, keys: Collection[str] | None) -> None:
        """The run-store keys this decision may read or write from now on (None: not known yet,
        so every later decision waits for this one before touching the store)."""
        if self._number in self._turns._open:
            self._turns._open[self._number] = None if keys is None else frozenset(keys)

    def wait(self) -> Generator[bool | None, None, None]:
        """Steps that end once no earlier open decision shares a key (or has not said its keys)."""
        while not self._turns._clear(self._number):
            yield WAIT

    def close(self) -> None:
        """The decision ended (decided or failed): later ones need not wait for it."""
        self._turns._open.pop(self._number, None)
