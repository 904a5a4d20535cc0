"""`aiayn shortlist MODEL DATA`: build a model's vocabulary shortlist from a data directory's
training pairs and store it in the model directory (aiayn.decode.shortlist has the format and its
use in decoding).

Candidates per source piece: its `k` most probable target pieces p(t | s) under IBM Model 1
(aiayn.data.lexicon; Brown et al., 1993), as Marian's lexical shortlists take theirs from fast_align
(Junczys-Dowmunt et al., 2018); always kept: the `frequent` most frequent target pieces of the
training targets and the special ids. Marian's usual setting is "50 50" (50 frequent, 50
translations each); ours is the same by default.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tqdm import tqdm

from aiayn.apps.defaults import CANDIDATES, FREQUENT, ITERATIONS
from aiayn.data.datadir import DataDir
from aiayn.data.lexicon import ibm_model1, most_frequent
from aiayn.decode.shortlist import Shortlist
from aiayn.errors import AiaynError
from aiayn.model.io import read_config
from aiayn.tokenizers import load_tokenizer


def check_same_vocabulary(model_dir: Path, info: dict, config, data: DataDir) -> None:
    """DATA must be encoded with MODEL's vocabulary (prepare --spm MODEL_DIR): a one-line error otherwise."""
    model_tok, data_tok = load_tokenizer(model_dir, info), data.tokenizer()
    data_pieces = data_tok.pieces(list(range(data_tok.vocab_size)))
    same = data_pieces[: config.source_vocab_size] == model_tok.pieces(list(range(config.source_vocab_size)))
    same = same and data_pieces[: config.vocab_size] == model_tok.target_pieces(
        list(range(config.vocab_size))
    )
    if not same or data_tok.vocab_size != max(config.vocab_size, config.source_vocab_size):
        raise AiaynError(
            f"{data.path}: its vocabulary is not {model_dir}'s (prepare the data with --spm {model_dir})"
        )


def build_shortlist(
    model_dir: str | Path,
    data_dir: str | Path,
    k: int = CANDIDATES,
    frequent: int = FREQUENT,
    iterations: int = ITERATIONS,
    progress: bool = True,
) -> tuple[Path, Shortlist]:
    """Build MODEL's shortlist from DATA's training pairs and write model_dir/shortlist.safetensors;
    returns its path and the shortlist."""
    if k < 1 or frequent < 0 or iterations < 1:
        raise AiaynError(
            f"k must be >= 1, frequent >= 0 and iterations >= 1; got {k}, {frequent}, {iterations}"
        )
    model_dir, data = Path(model_dir), DataDir(data_dir)
    config, info = read_config(model_dir)
    if data.is_parse:
        raise AiaynError(f"{data.path}: parse data; a shortlist is built from translation pairs")
    check_same_vocabulary(model_dir, info, config, data)
    train = data.tokens("train")
    pairs = [(s[:-1], t[:-1]) for s, t in (train[i] for i in range(len(train)))]  # EOS is always kept
    with tqdm(total=iterations, desc="IBM Model 1", unit="iter", disable=not progress) as bar:
        table = ibm_model1(
            pairs, config.source_vocab_size, config.vocab_size, iterations, lambda _: bar.update()
        )
    ids, probs = table.top(k)  # (source_vocab, k)
    specials = sorted({config.pad_id, config.unk_id, config.bos_id, config.eos_id, config.start_id})
    ids[specials if max(specials) < len(ids) else []] = -1  # special source ids have no candidates
    shortlist = Shortlist(
        candidates=ids.int(),
        probabilities=probs.masked_fill(ids < 0, 0.0),
        frequent=most_frequent([t for _, t in pairs], config.vocab_size, frequent).int(),
        always=torch.tensor(specials, dtype=torch.int32),
        info={
            "method": "ibm-model-1",
            "iterations": iterations,
            "k": ids.size(1),  # at most the target vocabulary
            "frequent": frequent,
            "data": str(data.path),
        },
    )
    return shortlist.save(model_dir), shortlist
