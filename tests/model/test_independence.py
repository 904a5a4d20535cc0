"""`aiayn.model` is section 3 alone: importing it imports nothing that makes it fast (aiayn.runtime),
nor the search or training that use it."""

import subprocess
import sys


def test_the_model_imports_nothing_of_runtime_decoding_or_training():
    others = ("aiayn.runtime", "aiayn.decode", "aiayn.train")
    code = (
        "import sys, aiayn.model, aiayn.model.io; print(sorted(m for m in sys.modules if m.startswith(%r)))"
    )
    code %= (others,)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
