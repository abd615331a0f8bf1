"""Incremental cooperative assignment (Kafka's KIP-415, on leases): spread connectors evenly, move only what must.

:func:`plan` is a pure function of the group (:class:`~.store.GroupView`) run inside the store's rebalance
transaction. Each run:

1. drops the assignments of deleted connectors;
2. gives every connector without a live owner to the least loaded live worker: a new connector, one whose owner
   left, or one whose owner's lease ran out more than ``scheduled.rebalance.max.delay.ms`` ago (within the
   delay the connector waits for its owner, as KIP-415's scheduled rebalance does: a bounced worker gets its
   work back instead of a double move);
3. when no hand-over is under way, moves connectors from the most to the least loaded workers until their counts
   differ by at most one, in two steps like KIP-415's revoke-then-assign: the owner is asked to hand the
   connector over (``pending``); it stops the query and :meth:`~.store.GroupStore.release` gives the connector
   to the new worker under a new epoch. A live worker's query is never started twice.

>>> view = GroupView((Member("a", ""), Member("b", "")), ("x", "y"), {})
>>> [(m.connector, m.worker_id) for m in plan(view)]
[('x', 'a'), ('y', 'b')]
"""

from __future__ import annotations

from .store import GroupView, Member, Move

__all__ = ["plan", "Member"]


def plan(view: GroupView) -> list[Move]:
    """The moves that bring ``view`` to an even spread, moving as little as possible (see the module doc)."""
    live = sorted(m.worker_id for m in view.members if m.live)
    known = {m.worker_id: m for m in view.members}
    names = set(view.connectors)
    moves = [Move(c, None) for c in sorted(view.assignments) if c not in names]
    if not live:
        return moves
    load = {w: 0 for w in live}
    owner: dict[str, str] = {}
    pending = False
    for name in sorted(names):
        a = view.assignments.get(name)
        if a is None or a.worker_id is None:
            continue
        member = known.get(a.worker_id)
        if member is None or member.gone:  # left, or away for longer than the scheduled rebalance delay
            continue
        owner[name] = a.worker_id
        if a.pending_worker is not None and a.pending_worker in load:
            load[a.pending_worker] += 1  # counted where it is going
            pending = True
        elif a.worker_id in load:
            load[a.worker_id] += 1
    for name in sorted(names - owner.keys()):
        target = min(live, key=lambda w: (load[w], w))
        load[target] += 1
        moves.append(Move(name, target))
    if pending:
        return moves  # one revocation round at a time: wait for the hand-overs under way
    movable = {w: sorted(n for n, o in owner.items() if o == w and view.assignments[n].pending_worker is None)
               for w in live}
    while True:
        most = max(live, key=lambda w: (load[w], w))
        least = min(live, key=lambda w: (load[w], w))
        if load[most] - load[least] <= 1 or not movable[most]:
            return moves
        name = movable[most].pop()
        load[most] -= 1
        load[least] += 1
        moves.append(Move(name, least, pending=True))
