"""Table 3 of the paper (section 6.2): variations of the base model, trained and measured alike.

`rows` holds the paper's rows and figures and builds each from a reference model; `run` trains and
measures them (`aiayn variations`); `table` writes the table and the plot.
"""

from aiayn.apps.variations.run import Budget, run_variations

__all__ = ["Budget", "run_variations"]
