// Beam search's bookkeeping (section 6.1) in C++: aiayn/decode/beam.py's `Beams.advance`, `finish`,
// `_settled` and `done`, operation for operation with the same ATen calls in the same order, so the
// same results to the last bit, without the Python around each of its ~40 small operations a step
// (one sentence of the tiny model: ~1.2 ms of Python against a ~1.1 ms native step).
// `Search::beam` (native_step.cpp) runs steps of the beam loop with them. Shapes: n sentences,
// k hypotheses each, T the longest output + 1 positions; every tensor on the CPU.
//
// `BeamState` is the one object the beam state crosses the boundary as: Python's `Beams` fields by
// name (each readable and writable from Python), checked against each other when it is made.
#pragma once

#include <ATen/ATen.h>
#include <torch/custom_class.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>

#include "native_rules.h"
#include "native_scores.h"

namespace aiayn_native {

using at::Tensor;

// What the beam search carries between steps (aiayn.decode.beam.Beams; its docstring has the shapes).
struct BeamState : torch::CustomClassHolder {
  Tensor max_lens, live_seqs, live_scores, fin_seqs, fin_scores, fin_log_probs, fin_lens;

  BeamState(Tensor max_lens, Tensor live_seqs, Tensor live_scores, Tensor fin_seqs, Tensor fin_scores,
            Tensor fin_log_probs, Tensor fin_lens)
      : max_lens(std::move(max_lens)), live_seqs(std::move(live_seqs)), live_scores(std::move(live_scores)),
        fin_seqs(std::move(fin_seqs)), fin_scores(std::move(fin_scores)), fin_log_probs(std::move(fin_log_probs)),
        fin_lens(std::move(fin_lens)) {
    check();
  }

  // The tensors' shapes, dtypes and device agree: n sentences of k hypotheses, sequences of T.
  void check() const {
    TORCH_CHECK(live_scores.dim() == 2 && live_seqs.dim() == 3, "live_scores must be (n, k), live_seqs (n, k, T)");
    const int64_t n = live_scores.size(0), k = live_scores.size(1), total = live_seqs.size(2);
    TORCH_CHECK(max_lens.dim() == 1 && max_lens.size(0) == n && max_lens.scalar_type() == at::kLong,
                "max_lens must be (n,) int64");
    for (const Tensor* t : {&live_seqs, &fin_seqs}) {
      TORCH_CHECK(t->sizes() == at::IntArrayRef({n, k, total}) && t->scalar_type() == at::kLong,
                  "live_seqs and fin_seqs must be (n, k, T) int64");
    }
    for (const Tensor* t : {&live_scores, &fin_scores, &fin_log_probs}) {
      TORCH_CHECK(t->sizes() == at::IntArrayRef({n, k}) && t->scalar_type() == at::kFloat,
                  "live_scores, fin_scores and fin_log_probs must be (n, k) float32");
    }
    TORCH_CHECK(fin_lens.sizes() == at::IntArrayRef({n, k}) && fin_lens.scalar_type() == at::kLong,
                "fin_lens must be (n, k) int64");
    for (const Tensor* t : {&max_lens, &live_seqs, &live_scores, &fin_seqs, &fin_scores, &fin_log_probs, &fin_lens}) {
      TORCH_CHECK(t->device().is_cpu(), "the beams must be on the CPU");
    }
  }

  // `Beams.finish`: merge the candidates `finishing` (n, c) into the pools, keeping the k best.
  void finish(const Tensor& seqs, const Tensor& log_probs, const Tensor& finishing, int64_t step, double lp) {
    const int64_t k = fin_scores.size(1), total = seqs.size(2);
    Tensor cand = (log_probs / lp).masked_fill(finishing.logical_not(), -std::numeric_limits<float>::infinity());
    auto [scores, pos] = at::cat({fin_scores, cand}, 1).topk(k, 1);
    fin_scores = scores;
    fin_log_probs = at::cat({fin_log_probs, log_probs}, 1).gather(1, pos);
    fin_lens = at::cat({fin_lens, at::full_like(log_probs, step, log_probs.options().dtype(at::kLong))}, 1)
                   .gather(1, pos);
    fin_seqs = at::cat({fin_seqs, seqs}, 1).gather(1, pos.unsqueeze(2).expand({-1, -1, total}));
  }

  // `_settled`: where each survivor goes, each surviving beam's best child in its parent's slot.
  static Tensor settled(const Tensor& parent) {
    const int64_t n = parent.size(0), k = parent.size(1);
    const auto options = parent.options();
    Tensor same = parent.unsqueeze(2) == parent.unsqueeze(1);  // (n, k, k)
    Tensor first = (same & at::ones({k, k}, options.dtype(at::kBool)).tril(-1)).any(-1).logical_not();
    Tensor taken = at::zeros({n, k}, options.dtype(at::kLong)).scatter_add_(1, parent, first.to(at::kLong));
    Tensor free = std::get<1>(taken.sort(std::optional<bool>(true), 1, false));  // stable, ascending
    Tensor rank = first.logical_not().to(at::kLong).cumsum(1) - 1;
    Tensor slot = at::where(first, parent, free.gather(1, rank.clamp_min(0)));
    return at::empty_like(slot).scatter_(1, slot, at::arange(k, options).expand({n, k}));
  }

  // `Beams.advance` from logits (n, k, vocab) and their log-normalisers lse (n * k,) -> the beam each
  // new live hypothesis extends and its last token, (n, k) each. `scores` is written over.
  std::tuple<Tensor, Tensor> advance(const Tensor& scores, const Tensor& lse, int64_t step, int64_t eos, double lp) {
    const int64_t n = scores.size(0), k = scores.size(1), vocab = scores.size(2), total = live_seqs.size(2);
    Tensor offsets = live_scores - lse.view({n, k});
    auto [top, index] = beam_top(scores.contiguous(), offsets.contiguous(), std::min(2 * k, k * vocab));
    Tensor beam = at::floor_divide(index, vocab), token = at::remainder(index, vocab);  // (n, c)
    Tensor seqs = live_seqs.gather(1, beam.unsqueeze(2).expand({-1, -1, total}));  // (n, c, T)
    seqs.select(2, step - 1).copy_(token);
    Tensor is_eos = token.eq(eos) & top.isfinite();
    Tensor finishing = is_eos.clone();
    finishing.narrow(1, k, finishing.size(1) - k).fill_(false);  // only the k best may finish
    if (finishing.any().item<bool>()) finish(seqs, top, finishing, step, lp);
    auto [live, pos] = top.masked_fill(is_eos, -std::numeric_limits<float>::infinity()).topk(k, 1);
    Tensor settle = settled(beam.gather(1, pos));
    live_scores = live.gather(1, settle);
    pos = pos.gather(1, settle);
    live_seqs = seqs.gather(1, pos.unsqueeze(2).expand({-1, -1, total}));
    return {beam.gather(1, pos), token.gather(1, pos)};
  }

  // `Beams.done`: which sentences can stop after `step` (n,) bool, by the rules' length penalty style.
  Tensor done(int64_t step, int64_t n_best, const SearchRules& rules) const {
    const Tensor best_live = std::get<0>(live_scores.max(1));  // (n,)
    const int64_t k = fin_scores.size(1);
    const Tensor full = fin_scores.select(1, k - 1).isfinite();
    Tensor done;
    if (rules.style == "gnmt" || rules.style == "fairseq") {
      const Tensor longest = max_lens.to(at::kFloat) + 1.0;
      const Tensor bound = at::maximum(best_live / rules.lp(double(step + 1)), best_live / rules.lp(longest));
      done = full | (fin_scores.select(1, n_best - 1) >= bound);
    } else {
      done = full & (best_live / rules.lp(double(step)) <= fin_scores.select(1, k - 1));
    }
    return done | best_live.isfinite().logical_not();
  }
};

}  // namespace aiayn_native
