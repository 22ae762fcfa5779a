"""Throughput measurement behind scripts/benchmark.py: `measure` (timers,
rates, FLOP counts), `workloads` (what runs in a worker process), `runs`
(configurations run as subprocesses, with peak memory) and `report` (the
table); on tabular data, `census` (the census-like set) and `tabular` (its
peers' workloads)."""
