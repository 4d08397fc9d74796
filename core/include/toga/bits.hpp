//! @file toga/bits.hpp
//! Bit operations for core code, host and device: count trailing/leading zeros, trailing ones,
//! population count, on 32- and 64-bit words.
//!
//! Why not <bit>: in CUDA device code, nvcc 13 with libstdc++ 12 compiles std::countr_zero,
//! std::countl_zero and std::popcount on some widths to constants (PTX `mov.u32 %r, 32`), found
//! by the GPU primitive tests. Target dispatch is kept here, in one place: CUDA intrinsics in
//! device code, compiler builtins on the host, a plain loop in constant evaluation.
//! __builtin_is_constant_evaluated, not std::is_constant_evaluated: nvcc treats the latter as a
//! host function and compiles the device path as unreachable (found on the H200).
#pragma once

#include <cstdint>
#include <type_traits>

#include "toga/config.hpp"

namespace toga::bits {

namespace detail {
TOGA_HOST_DEVICE constexpr unsigned popc_loop(std::uint64_t x) {
  unsigned n = 0;
  for (; x; x &= x - 1) ++n;
  return n;
}
}  // namespace detail

//! Number of set bits.
TOGA_HOST_DEVICE constexpr unsigned popc(std::uint32_t x) {
  if (__builtin_is_constant_evaluated()) return detail::popc_loop(x);
#if defined(__CUDA_ARCH__)
  return static_cast<unsigned>(__popc(x));
#else
  return static_cast<unsigned>(__builtin_popcount(x));
#endif
}
TOGA_HOST_DEVICE constexpr unsigned popc(std::uint64_t x) {
  if (__builtin_is_constant_evaluated()) return detail::popc_loop(x);
#if defined(__CUDA_ARCH__)
  return static_cast<unsigned>(__popcll(x));
#else
  return static_cast<unsigned>(__builtin_popcountll(x));
#endif
}
//! Trailing zeros; 32 (64) for x == 0.
TOGA_HOST_DEVICE constexpr unsigned ctz(std::uint32_t x) {
  if (x == 0) return 32;
  if (__builtin_is_constant_evaluated()) return detail::popc_loop(~x & (x - 1));
#if defined(__CUDA_ARCH__)
  return static_cast<unsigned>(__ffs(static_cast<int>(x)) - 1);
#else
  return static_cast<unsigned>(__builtin_ctz(x));
#endif
}
TOGA_HOST_DEVICE constexpr unsigned ctz(std::uint64_t x) {
  if (x == 0) return 64;
  if (__builtin_is_constant_evaluated()) return detail::popc_loop(~x & (x - 1));
#if defined(__CUDA_ARCH__)
  return static_cast<unsigned>(__ffsll(static_cast<long long>(x)) - 1);
#else
  return static_cast<unsigned>(__builtin_ctzll(x));
#endif
}
//! Leading zeros; 64 for x == 0.
TOGA_HOST_DEVICE constexpr unsigned clz(std::uint64_t x) {
  if (x == 0) return 64;
  if (__builtin_is_constant_evaluated()) {
    unsigned n = 0;
    while (!(x >> 63)) {
      x <<= 1;
      ++n;
    }
    return n;
  }
#if defined(__CUDA_ARCH__)
  return static_cast<unsigned>(__clzll(static_cast<long long>(x)));
#else
  return static_cast<unsigned>(__builtin_clzll(x));
#endif
}
//! Trailing ones (the index of the lowest zero bit); 64 for all ones.
TOGA_HOST_DEVICE constexpr unsigned cto(std::uint64_t x) { return ctz(~x); }

}  // namespace toga::bits
