//! @file tests/conformance/conformance.hpp
//! One conformance test body for every backend: the same lane function runs in the simulator
//! (tests/sim, scenario `conformance`) and in CUDA kernels (tests/gpu/conformance_gpu_test.cu).
//!
//! Each lane is paired with the other lane of its pair in the same warp (lane ^ 1), so both are
//! always resident and may wait for each other (on a GPU too). In every round a lane allocates a
//! block (per-thread or warp-cooperative; sizes from a fixed sequence over every size class and
//! TBuddy sizes), checks its alignment, fills it with a pattern, publishes it; then it takes its
//! partner's block of that round, verifies the pattern and frees it (a free by another thread than
//! the allocating one), and acknowledges. Errors are counted in `out`: a corrupted pattern means
//! two live blocks overlapped.
#pragma once

#include <cstdint>

#include "toga/allocator.hpp"
#include "toga/config.hpp"
#include "toga/platform.hpp"

namespace toga::conformance {

enum counter : unsigned { corrupted = 0, null_results = 1, misaligned = 2, allocations = 3, counters = 4 };

//! Shared state of one run: per-lane mailboxes and the counters (device or simulated memory).
struct state {
  std::uint64_t* block;   //!< [lanes] offset + 1 of the published block, 0 = none
  std::uint32_t* round;   //!< [lanes] the round of the published block
  std::uint32_t* acked;   //!< [lanes] the last round whose partner block was freed
  std::uint64_t* out;     //!< [counters]
  unsigned lanes;
  unsigned rounds;
  bool coalesced;
};

//! The sizes a lane asks for, over every size class and some TBuddy sizes.
TOGA_HOST_DEVICE inline std::uint64_t size_for(unsigned lane, unsigned round) {
  constexpr std::uint64_t sizes[] = {1, 16, 17, 48, 64, 100, 128, 200, 256, 500, 512, 1000, 1024, 2048, 4096, 8192, 20000};
  return sizes[(lane * 7u + round * 3u) % (sizeof(sizes) / sizeof(sizes[0]))];
}
TOGA_HOST_DEVICE inline std::uint64_t tag_for(unsigned lane, unsigned round) {
  return 0x9e3779b97f4a7c15ull * (std::uint64_t{lane} * 1000003u + round + 1);
}

template <class P, class A>
TOGA_DEVICE void lane_body(const A& a, const state& s, unsigned me) TOGA_NOEXCEPT(P) {
  const unsigned partner = me ^ 1u;
  const bool paired = partner < s.lanes;
  for (unsigned r = 0; r < s.rounds; ++r) {
    const std::uint64_t bytes = size_for(me, r);
    void* p = s.coalesced ? a.allocate_coalesced(bytes) : a.allocate(bytes);
    std::uint64_t handle = 0;
    if (p == nullptr) {
      P::fetch_add(&s.out[null_results], std::uint64_t{1}, relaxed, device_scope);
    } else {
      P::fetch_add(&s.out[allocations], std::uint64_t{1}, relaxed, device_scope);
      const std::uint64_t off = static_cast<std::uint64_t>(static_cast<char*>(p) - a.small.base);
      const std::uint64_t served = a.served_bytes(bytes);
      const std::uint64_t align = served <= geom::max_class_bytes ? (served < 128 ? served : 128) : served;
      if (off % align != 0) P::fetch_add(&s.out[misaligned], std::uint64_t{1}, relaxed, device_scope);
      std::uint64_t* w = static_cast<std::uint64_t*>(p);
      const std::uint64_t tag = tag_for(me, r);
      for (std::uint64_t i = 0; i < (bytes + 7) / 8; ++i) w[i] = tag ^ i;
      handle = off + 1;
    }
    if (!paired) {  // no partner: free our own block
      if (p) a.deallocate(p);
      continue;
    }
    // publish ours once the partner freed our previous one
    for (unsigned attempt = 0; r > 0 && P::load(&s.acked[partner], acquire, device_scope) < r; ++attempt) P::backoff(attempt);
    P::store(&s.block[me], handle, relaxed, device_scope);
    P::store(&s.round[me], r + 1, release, device_scope);
    // take the partner's block of this round
    for (unsigned attempt = 0; P::load(&s.round[partner], acquire, device_scope) < r + 1; ++attempt) P::backoff(attempt);
    const std::uint64_t theirs = P::load(&s.block[partner], relaxed, device_scope);
    if (theirs != 0) {
      const std::uint64_t* w = reinterpret_cast<const std::uint64_t*>(a.small.base + (theirs - 1));
      const std::uint64_t tag = tag_for(partner, r);
      const std::uint64_t n = (size_for(partner, r) + 7) / 8;
      for (std::uint64_t i = 0; i < n; ++i)
        if (w[i] != (tag ^ i)) {
          P::fetch_add(&s.out[corrupted], std::uint64_t{1}, relaxed, device_scope);
          break;
        }
      a.deallocate(a.small.base + (theirs - 1));
    }
    P::store(&s.acked[me], r + 1, release, device_scope);
  }
  // wait until the partner took our last block before leaving (our mailbox must stay valid)
  if (paired)
    for (unsigned attempt = 0; P::load(&s.acked[partner], acquire, device_scope) < s.rounds; ++attempt) P::backoff(attempt);
}

}  // namespace toga::conformance
