// The rules every step of a search obeys (section 6.1), in C++: aiayn/decode/rules.py's `SearchRules`
// (its `mask` and the length penalty `lp`), written once here for the native runs of greedy and beam
// search (native_step.cpp's `Search`). One object crosses from Python once per search.
#pragma once

#include <ATen/ATen.h>
#include <torch/custom_class.h>

#include <cmath>
#include <limits>
#include <string>

namespace aiayn_native {

using at::Tensor;

// The special columns, the length penalty and its style: what `SearchRules` holds that a native run
// reads. Columns are those of the output layer the search runs on (a shortlist's, where it has one).
struct SearchRules : torch::CustomClassHolder {
  int64_t eos;
  Tensor banned;  // (b,) int64 columns never chosen
  bool gnmt;      // style "gnmt": ((5 + |Y|) / 6)^alpha; "len" and "fairseq": |Y|^alpha
  std::string style;
  double alpha;

  SearchRules(int64_t eos, Tensor banned, std::string style, double alpha)
      : eos(eos), banned(std::move(banned)), gnmt(style == "gnmt"), style(std::move(style)), alpha(alpha) {
    TORCH_CHECK(this->style == "gnmt" || this->style == "fairseq" || this->style == "len",
                "no length penalty style ", this->style);
    TORCH_CHECK(this->banned.dim() == 1 && this->banned.scalar_type() == at::kLong && this->banned.device().is_cpu(),
                "banned must be 1-d int64 columns on the CPU");
    TORCH_CHECK(eos >= 0 && (this->banned.numel() == 0 || this->banned.min().item<int64_t>() >= 0),
                "banned and eos must be columns of the output layer");
  }

  // lp(|Y|) (aiayn.decode.rules.length_penalty).
  double lp(double length) const { return std::pow(gnmt ? (5.0 + length) / 6.0 : length, alpha); }
  Tensor lp(const Tensor& length) const { return (gnmt ? (length + 5.0) / 6.0 : length).pow(alpha); }

  // `SearchRules.mask`: scores (n, per, columns) of n sentences at `step` (from 1), in place: never a
  // banned column; where step > caps[i], sentence i's rows may only end (EOS's score kept).
  void mask(const Tensor& scores, int64_t step, const int64_t* caps) const {
    constexpr float kNone = -std::numeric_limits<float>::infinity();
    if (banned.numel() > 0) scores.index_fill_(2, banned, kNone);
    for (int64_t i = 0; i < scores.size(0); ++i) {
      if (step <= caps[i]) continue;
      const Tensor keep = scores.select(0, i).select(1, eos).clone();
      scores.select(0, i).fill_(kNone).select(1, eos).copy_(keep);
    }
  }

  // What a run checks before writing anything: eos and the banned columns among `columns`.
  void check_columns(int64_t columns) const {
    TORCH_CHECK(eos < columns && (banned.numel() == 0 || banned.max().item<int64_t>() < columns),
                "banned and eos must be columns of the output layer");
  }
};

}  // namespace aiayn_native
