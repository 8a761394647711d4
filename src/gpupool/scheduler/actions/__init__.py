"""The actions of a cycle, one module each, run in this order by ``run_cycle``: allocate
(within guarantees) -> borrow (idle capacity, DRF) -> preempt (lower priority, same tenant)
-> reclaim (owners take back lent capacity) -> defragment (room on one node for a guarantee)
-> backfill (jobs that end before a starving head can start)."""
