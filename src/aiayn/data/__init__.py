"""The data pipeline of section 5.1: corpora in, a prepared data directory out, batches for training.

Modules (imported by their full names, so that `aiayn prepare` does not load torch):
`corpus` (reading and validating parallel text), `builtin` (corpora from Debian packages),
`tokenizer` (joint SentencePiece BPE), `dataset` (memory-mapped token shards), `batching`
(token-bucketed, seeded, rank-sharded batches), `prepare` (the `aiayn prepare` command), `sources`
(what prepare reads: a corpus's name or `SplitFiles`, and its `Filters`) and `datadir` (`DataDir`, the
one reader of a prepared data directory).
"""
