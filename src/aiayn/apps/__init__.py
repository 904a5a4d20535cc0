"""Applications built on the library (aiayn.model, data, decode, train, evaluate, ...):

- `quickstart`: `aiayn quickstart` (`make demo`), prepare + train + average + evaluate in one command;
- `variations`: `aiayn variations`, the paper's Table 3 rows trained and scored;
- `doctor`: `aiayn doctor`, the environment report;
- `viz`: attention maps and training curves as PNG files.

The foundations they and the library share stay at the package root: errors, checks, config,
overrides, safe_io, tokenizers.
"""
