"""memtrace: trace a real HF + peft training step on FakeTensors and account every live storage.

Dev-only ground truth for zerocalc (never shipped to the browser). Entry points:
  python -m tools.memtrace PLAN.json        one plan, table + optional JSON
  tools.memtrace.trace.trace(plan_dict)     -> result dict (bytes)
  tools.memtrace.grid.GRID / run_grid()     the fixed comparison grid
Recipe and pitfalls: docs/tracer.md. Component mapping: tools/memtrace/trace.py components().
"""
