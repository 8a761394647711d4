"""Host memory a job reserves on a node when it gave no ``mem=``: every workload gets a memory
limit on its node (a cgroup), so the scheduler reserves that limit like any other — a node's
memory is promised once. The default is the job's share of the node: its cards' share of the
node's cards, or its CPU's share of the node's CPU where that is larger (a CPU-only job), at
least ``FLOOR_MIB`` and at most the node's memory. A slice counts as its part of a card: a
share its compute (or, memory only, its card memory of 80 GiB), a MIG or vNPU instance a
seventh.

A whole node (``node=whole``) without ``mem=`` takes all of its node's memory, as ``mem=all``
does anywhere. Only states whose owner turned it on (``ClusterState.use_default_memory``: the
server) apply it; the simulators replay traces whose jobs reserve what the trace says."""

from typing import Any

import numpy as np

from gpupool.scheduler.ask import Ask

FLOOR_MIB = 256


def mem_need(state: Any, ask: Ask) -> int | np.ndarray:
    """The memory ``ask`` takes on each node: its own ``mem=``, or the default per node.
    ``state``: a ClusterState, or a view of some of its rows read by the same names."""
    if ask.request.mem_all or (ask.request.whole_node and not ask.mem):
        whole: np.ndarray = state.mem_cap  # all of it: mem=all, or a whole node without a size
        return whole
    per_card = getattr(state, "default_mem_per_card", None)
    if ask.mem or per_card is None:
        return int(ask.mem)
    by_cards = ask.card_units * per_card
    by_cpu = ask.cpu * state.default_mem_per_cpu
    need = np.maximum(np.floor(np.maximum(by_cards, by_cpu)), FLOOR_MIB)  # shares add up
    # never more than a whole node: a job asking more cards than a node has is refused for
    # its cards, and one spread over nodes takes its share on each (placer._span_nodes)
    out: np.ndarray = np.minimum(need, state.mem_cap).astype(np.int64)
    return out


def takes_memory(mem: int | np.ndarray) -> bool:
    return isinstance(mem, np.ndarray) or mem > 0


def mem_at(mem: int | np.ndarray, row: int) -> int:
    return int(mem[row]) if isinstance(mem, np.ndarray) else int(mem)
