// Eight floats as one value (GCC's vector extension: one AVX register, or two SSE halves where the
// code is compiled without AVX), for the kernels of native_scores.h and native_attention.h.
#pragma once

#include <cstdint>
#include <cstring>

// 32-byte vectors pass only through inline functions: GCC's note that their ABI differs without
// AVX concerns calls that never happen (it comes at the end of the file: not popped).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace aiayn_native {

typedef float f8 __attribute__((vector_size(32)));
typedef int32_t i8 __attribute__((vector_size(32)));
typedef uint32_t u8 __attribute__((vector_size(32)));

__attribute__((always_inline)) inline f8 broadcast(float a) { return f8{} + a; }

__attribute__((always_inline)) inline f8 load8(const float* p) {
  f8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

__attribute__((always_inline)) inline void store8(float* p, const f8& v) { std::memcpy(p, &v, sizeof v); }

}  // namespace aiayn_native
