"""`aiayn doctor`: the environment a bug report or a benchmark figure needs, in one screen.

`report()` (aiayn.apps.doctor.probes) gathers it as a JSON-ready dict; `format_report()`
(aiayn.apps.doctor.table) writes the human table.
"""

from aiayn.apps.doctor.probes import allocator, cpu, report
from aiayn.apps.doctor.table import format_report

__all__ = ["allocator", "cpu", "format_report", "report"]
