//! @file toga/bits.hpp
//! Bit operations for core code, host and device: count trailing/leading zeros, trailing ones,
//! population count, on 32- and 64-bit words; the k-th set bit and the lowest n set bits of a
//! 64-bit word (a bin's bitmap word: which slots a group claims and which one each lane takes).
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

//! Index of the k-th lowest set bit of x, counting from 0 (so select(x, 0) == ctz(x)); 64 when x
//! has k or fewer set bits. A binary search by population count over the word's halves (one
//! 32-bit step, then five within 32 bits): a fixed number of steps for every k, where clearing the
//! lowest bit k times took a loop of up to 63 iterations (a leader claiming 32 slots for its
//! group, one lane of the group per iteration; measured in docs/benchmarks.md, "Bit selection").
TOGA_HOST_DEVICE constexpr unsigned select(std::uint64_t x, unsigned k) {
  if (k >= popc(x)) return 64;
  std::uint32_t v = static_cast<std::uint32_t>(x);
  unsigned pos = 0, n = popc(v);
  if (k >= n) {
    k -= n;
    v = static_cast<std::uint32_t>(x >> 32);
    pos = 32;
  }
  for (unsigned w = 16; w > 0; w >>= 1) {  // (unrolled: w is 16, 8, 4, 2, 1)
    n = popc(v & ((std::uint32_t{1} << w) - 1));
    if (k >= n) {
      k -= n;
      v >>= w;
      pos += w;
    }
  }
  return pos;
}
//! The n lowest set bits of x (x itself when it has n or fewer).
TOGA_HOST_DEVICE constexpr std::uint64_t lowest(std::uint64_t x, unsigned n) {
  const unsigned p = select(x, n);  // the first set bit not taken (64: every bit is taken)
  return p == 64 ? x : x & ((std::uint64_t{1} << p) - 1);
}

}  // namespace toga::bits
