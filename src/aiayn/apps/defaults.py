"""The applications' defaults that `aiayn --help` shows (shortlist, distill, backtranslate), as plain
constants: building the command line's parser imports this module, not the applications, so
`aiayn --version` and `aiayn COMMAND --help` answer without importing PyTorch."""

# aiayn.apps.shortlist: candidates per source piece, most frequent target pieces always kept, EM
# iterations of IBM Model 1 (Marian's usual "50 50")
CANDIDATES, FREQUENT, ITERATIONS = 50, 50, 5

# aiayn.apps.distill
DISTILL_CHUNK = 1000  # training sources translated per chunk: what an interruption can lose
STUDENT = "student"  # configs/student.yaml: the student's model and recipe

# aiayn.apps.backtranslate
BT_TAG = "<BT>"  # the first token of a tagged back-translation's synthetic source
BT_CHUNK = 1000  # lines translated per resumable part
