"""The incremental assignment (KIP-415 on leases): even spread, only the moves that must happen, hand-overs in two
steps, a departed worker's connectors kept for it within the scheduled rebalance delay."""

from __future__ import annotations

from spark_connect_bridge.runtime.group.assignment import plan
from spark_connect_bridge.runtime.group.store import Assignment, GroupView, Member, Move


def _view(members, connectors, owners=None, pending=None):
    owners, pending = owners or {}, pending or {}
    ms = tuple(m if isinstance(m, Member) else Member(m, f"http://{m}") for m in members)
    return GroupView(ms, tuple(connectors), {c: Assignment(c, w, 1, pending.get(c)) for c, w in owners.items()})


def _loads(view, moves):
    owner = {c: a.worker_id for c, a in view.assignments.items()}
    for m in moves:  # a hand-over counts where the connector is going
        owner[m.connector] = m.worker_id
    counts = {m.worker_id: 0 for m in view.members if m.live}
    for c in view.connectors:
        counts[owner[c]] = counts.get(owner[c], 0) + 1
    return counts


def test_new_connectors_spread_evenly():
    view = _view(["a", "b", "c"], [f"c{i}" for i in range(7)])
    moves = plan(view)
    assert all(not m.pending for m in moves)
    assert sorted(_loads(view, moves).values()) == [2, 2, 3]


def test_a_balanced_group_moves_nothing():
    view = _view(["a", "b"], ["x", "y", "z"], {"x": "a", "y": "b", "z": "a"})
    assert plan(view) == []


def test_an_added_worker_gets_only_what_must_move_through_hand_overs():
    owners = {f"c{i}": "abc"[i % 3] for i in range(6)}
    view = _view(["a", "b", "c", "d"], list(owners), owners)
    moves = plan(view)
    assert all(m.pending and m.worker_id == "d" for m in moves)
    assert len(moves) == 1  # 6 over 4 workers: 2,2,1,1 from 2,2,2,0
    assert sorted(_loads(view, moves).values()) == [1, 1, 2, 2]


def test_no_new_revocation_while_a_hand_over_is_under_way():
    owners = {f"c{i}": "a" for i in range(4)}
    view = _view(["a", "b"], list(owners), owners, pending={"c0": "b"})
    assert plan(view) == []


def test_a_gone_worker_s_connectors_go_to_the_live_ones():
    owners = {"x": "a", "y": "b", "z": "b"}
    view = _view(["a", Member("b", "", live=False, gone=True), "c"], list(owners), owners)
    moves = plan(view)
    assert sorted((m.connector, m.worker_id, m.pending) for m in moves) == [("y", "c", False), ("z", "a", False)]


def test_within_the_rebalance_delay_a_departed_worker_keeps_its_connectors():
    owners = {"x": "a", "y": "b"}
    view = _view(["a", Member("b", "", live=False, gone=False)], list(owners), owners)
    assert plan(view) == []


def test_a_left_worker_unknown_to_the_group_frees_its_connectors():
    view = _view(["a"], ["x"], {"x": "gone-worker"})
    assert plan(view) == [Move("x", "a")]


def test_deleted_connectors_lose_their_assignment():
    view = _view(["a"], [], {"x": "a"})
    assert plan(view) == [Move("x", None)]
