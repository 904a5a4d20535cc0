// Beam search's bookkeeping (section 6.1) in C++: aiayn/decode/beam.py's `Beams.advance`, `finish`,
// `_settled` and `done`, operation for operation with the same ATen calls in the same order, so the
// same results to the last bit, without the Python around each of its ~40 small operations a step
// (one sentence of the tiny model: ~1.2 ms of Python against a ~1.1 ms native step).
// NativeDecoder::beam (native_step.cpp) runs steps of the beam loop with them. Shapes: n sentences,
// k hypotheses each, T the longest output + 1 positions; every tensor on the CPU.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>

#include "native_scores.h"

namespace aiayn_native {

using at::Tensor;

// The length penalty of aiayn.decode.common.length_penalty: "gnmt" ((5 + |Y|) / 6)^alpha, or |Y|^alpha.
struct Penalty {
  bool gnmt;
  double alpha;

  double operator()(double length) const { return std::pow(gnmt ? (5.0 + length) / 6.0 : length, alpha); }
  Tensor operator()(const Tensor& length) const { return (gnmt ? (length + 5.0) / 6.0 : length).pow(alpha); }
};

// What the beam search carries between steps (aiayn.decode.beam.Beams; its docstring has the shapes).
struct BeamState {
  Tensor max_lens, live_seqs, live_scores, fin_seqs, fin_scores, fin_log_probs, fin_lens;

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

  // `Beams.done`: which sentences can stop after `step` (n,) bool; style "gnmt", "fairseq" or "len".
  Tensor done(int64_t step, int64_t n_best, const std::string& style, const Penalty& lp) const {
    const Tensor best_live = std::get<0>(live_scores.max(1));  // (n,)
    const int64_t k = fin_scores.size(1);
    const Tensor full = fin_scores.select(1, k - 1).isfinite();
    Tensor done;
    if (style == "gnmt" || style == "fairseq") {
      const Tensor longest = max_lens.to(at::kFloat) + 1.0;
      const Tensor bound = at::maximum(best_live / lp(double(step + 1)), best_live / lp(longest));
      done = full | (fin_scores.select(1, n_best - 1) >= bound);
    } else {
      done = full & (best_live / lp(double(step)) <= fin_scores.select(1, k - 1));
    }
    return done | best_live.isfinite().logical_not();
  }
};

}  // namespace aiayn_native
