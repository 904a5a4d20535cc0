// numpy's `Generator.shuffle` of a 1-d array, draw for draw, with the array's random reads fetched
// ahead: the epoch's permutation of the batch plan (section 5.1's batches; aiayn/data/shuffle.py).
//
// numpy runs Fisher-Yates (for i = n - 1 down to 1: swap a[i] and a[j], j uniform in [0, i]) with
// j drawn by masked rejection (`random_interval`: the 32-bit outputs of its PCG64, each 64-bit output
// giving its low then its high half, masked to the smallest 2^k - 1 >= i, until one is <= i). Its
// loop waits on the memory for each a[j] in turn: at 36M entries that is about 140 ns a step. Here the
// draws run 32 steps ahead of the swaps and each a[j] is prefetched when drawn, so the reads overlap
// (about 20 ns a step); the generator's state goes back to Python afterwards, so that what numpy
// draws next is what it would have drawn. tests/data/test_shuffle.py compares both, permutation and
// state.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>

namespace aiayn_native {

using u128 = unsigned __int128;

// numpy's PCG64 (XSL-RR 128/64, O'Neill's pcg64 as numpy/random/src/pcg64 has it) with its spare
// 32-bit half.
struct Pcg64 {
  u128 state, inc;
  bool has_half;
  uint32_t half;

  uint64_t next64() {
    static constexpr u128 multiplier = (u128(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;
    state = state * multiplier + inc;
    const uint64_t folded = uint64_t(state >> 64) ^ uint64_t(state);
    const unsigned rot = unsigned(state >> 122);
    return (folded >> rot) | (folded << ((-rot) & 63));
  }

  uint32_t next32() {
    if (has_half) {
      has_half = false;
      return half;
    }
    const uint64_t next = next64();
    has_half = true;
    half = uint32_t(next >> 32);
    return uint32_t(next);
  }

  // A uniform integer in [0, max]: numpy's `random_interval`.
  uint64_t interval(uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max, value;
    for (int shift = 1; shift < 64; shift *= 2) mask |= mask >> shift;
    if (max <= 0xFFFFFFFFULL) {
      while ((value = next32() & mask) > max) {
      }
    } else {
      while ((value = next64() & mask) > max) {
      }
    }
    return value;
  }
};

// Fisher-Yates over values (n,) and keys (n,) alike, the draws `ahead` steps before their swaps.
template <typename K>
void shuffle_alike(Pcg64& rng, int32_t* values, K* keys, int64_t n) {
  constexpr int64_t ahead = 32, ring = 64;  // ring: a power of two above `ahead`
  int64_t drawn[ring];
  int64_t next = n - 1;  // the next step to draw for
  auto draw = [&](int64_t slot) {
    const int64_t j = int64_t(rng.interval(uint64_t(next)));
    drawn[slot & (ring - 1)] = j;
    __builtin_prefetch(values + j, 1);
    __builtin_prefetch(keys + j, 1);
    --next;
  };
  for (int64_t slot = 0; slot < ahead && next >= 1; ++slot) draw(slot);
  for (int64_t i = n - 1, step = 0; i >= 1; --i, ++step) {
    if (next >= 1) draw(step + ahead);
    const int64_t j = drawn[step & (ring - 1)];
    std::swap(values[i], values[j]);
    std::swap(keys[i], keys[j]);
  }
}

// values (n,) int32 and keys (n,) int16 or int32 shuffled alike in place; state (6,) int64: PCG64's
// state (high, low 64 bits), its increment (high, low), whether a spare half is held, the half: read,
// and written back after.
inline void pcg64_shuffle(const at::Tensor& values, const at::Tensor& keys, const at::Tensor& state) {
  TORCH_CHECK(values.dim() == 1 && values.scalar_type() == at::kInt && values.is_contiguous() && values.is_cpu(),
              "values must be a contiguous 1-d int32 CPU tensor");
  TORCH_CHECK(keys.dim() == 1 && keys.numel() == values.numel() && keys.is_contiguous() && keys.is_cpu() &&
                  (keys.scalar_type() == at::kShort || keys.scalar_type() == at::kInt),
              "keys must be a contiguous 1-d int16 or int32 CPU tensor as long as values");
  TORCH_CHECK(state.dim() == 1 && state.numel() == 6 && state.scalar_type() == at::kLong && state.is_contiguous(),
              "state must be six int64: PCG64's state, increment, spare flag and half");
  auto* s = reinterpret_cast<uint64_t*>(state.data_ptr<int64_t>());
  Pcg64 rng{(u128(s[0]) << 64) | s[1], (u128(s[2]) << 64) | s[3], s[4] != 0, uint32_t(s[5])};
  if (keys.scalar_type() == at::kShort)
    shuffle_alike(rng, values.data_ptr<int32_t>(), keys.data_ptr<int16_t>(), values.numel());
  else
    shuffle_alike(rng, values.data_ptr<int32_t>(), keys.data_ptr<int32_t>(), values.numel());
  s[0] = uint64_t(rng.state >> 64), s[1] = uint64_t(rng.state), s[4] = rng.has_half, s[5] = rng.half;
}

}  // namespace aiayn_native
