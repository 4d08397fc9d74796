// Unit tests of the foundation: the Platform concept accepts the real backends and rejects
// incomplete ones, the PRNG is the specified one, the runnable-set arithmetic is exact, the bit
// selection the allocator claims slots with agrees with clearing bits one at a time.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "toga/bits.hpp"
#include "toga/platform.hpp"
#include "toga/sim/platform.hpp"
#include "toga/sim/rng.hpp"
#include "toga/sim/types.hpp"

namespace {

// A platform missing one operation (fetch_or) must not satisfy the concept.
struct incomplete : toga::sim::platform {
  template <class T, toga::memory_order O, toga::scope S>
  static T fetch_or(T*, T, toga::order_tag<O>, toga::scope_tag<S>) = delete;
};
// A platform whose lane_id has the wrong type must not satisfy it either.
struct wrong_type : toga::sim::platform {
  static int lane_id() { return 0; }
};

}  // namespace

TEST(PlatformConcept, AcceptsBackendsAndRejectsIncompleteOnes) {
  EXPECT_TRUE(toga::Platform<toga::sim::platform>);
  EXPECT_FALSE(toga::Platform<incomplete>);
  EXPECT_FALSE(toga::Platform<wrong_type>);
  EXPECT_FALSE(toga::Platform<int>);
}

TEST(PlatformConcept, FailureOrderDropsTheReleasePart) {
  using toga::memory_order;
  EXPECT_EQ(toga::failure_order(memory_order::acq_rel), memory_order::acquire);
  EXPECT_EQ(toga::failure_order(memory_order::release), memory_order::relaxed);
  EXPECT_EQ(toga::failure_order(memory_order::seq_cst), memory_order::seq_cst);
  EXPECT_EQ(toga::failure_order(memory_order::acquire), memory_order::acquire);
}

TEST(Rng, SplitMix64MatchesTheReferenceSequence) {
  // Reference values of splitmix64 from seed 0 (Vigna's splitmix64.c).
  std::uint64_t s = 0;
  EXPECT_EQ(toga::sim::splitmix64(s), 0xe220a8397b1dcdafull);
  EXPECT_EQ(toga::sim::splitmix64(s), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(toga::sim::splitmix64(s), 0x06c45d188009454full);
}

TEST(Rng, XoshiroIsDeterministicAndBelowIsInRangeAndSpread) {
  toga::sim::rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
  unsigned hist[7] = {};
  for (int i = 0; i < 70'000; ++i) {
    const auto v = a.below(7);
    ASSERT_LT(v, 7u);
    ++hist[v];
  }
  for (unsigned h : hist) EXPECT_NEAR(h, 10'000, 600);
}

TEST(LaneSet, MatchesAReferenceSetUnderRandomOperations) {
  toga::sim::rng r(7);
  for (unsigned n : {1u, 2u, 63u, 64u, 65u, 130u}) {
    toga::sim::lane_set s;
    s.resize(n);
    std::set<unsigned> ref;
    for (int step = 0; step < 5'000; ++step) {
      const auto i = static_cast<unsigned>(r.below(n));
      if (r.below(2)) {
        s.set(i);
        ref.insert(i);
      } else {
        s.reset(i);
        ref.erase(i);
      }
      ASSERT_EQ(s.count(), ref.size());
      if (ref.empty()) continue;
      const auto k = static_cast<unsigned>(r.below(ref.size()));
      ASSERT_EQ(s.nth(k), *std::next(ref.begin(), k));
      const auto after = static_cast<unsigned>(r.below(n + 1));
      auto it = ref.upper_bound(after);
      const unsigned want = it == ref.end() ? *ref.begin() : *it;
      ASSERT_EQ(s.next_cyclic(after), want) << "n=" << n << " after=" << after;
    }
  }
}

namespace {
// The reference: the k-th set bit by clearing the lowest bit k times (64 when there is none).
unsigned select_by_clearing(std::uint64_t x, unsigned k) {
  for (; k > 0 && x != 0; --k) x &= x - 1;
  return x == 0 ? 64u : static_cast<unsigned>(__builtin_ctzll(x));
}
std::uint64_t lowest_by_clearing(std::uint64_t x, unsigned n) {
  std::uint64_t r = 0;
  for (unsigned k = 0; k < n && x != 0; ++k) {
    r |= x & (~x + 1);
    x &= x - 1;
  }
  return r;
}
}  // namespace

TEST(Bits, SelectAndLowestAgreeWithClearingBitsOneAtATime) {
  static_assert(toga::bits::select(0x50, 0) == 4 && toga::bits::select(0x50, 1) == 6 && toga::bits::select(0x50, 2) == 64);
  static_assert(toga::bits::lowest(0x50, 1) == 0x10 && toga::bits::lowest(0x50, 5) == 0x50 && toga::bits::lowest(0x50, 0) == 0);
  toga::sim::rng r(7);
  std::vector<std::uint64_t> xs = {0, 1, ~std::uint64_t{0}, std::uint64_t{1} << 63, 0xffffffffull, 0xffffffff00000000ull, 0x8000000000000001ull};
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t a = r.next(), b = r.next();
    xs.push_back(i % 3 == 0 ? a : i % 3 == 1 ? (a & b) : (a | b));  // dense, sparse and mixed words
  }
  for (const std::uint64_t x : xs)
    for (unsigned k = 0; k <= 65; ++k) {
      ASSERT_EQ(toga::bits::select(x, k), select_by_clearing(x, k)) << std::hex << "x=0x" << x << std::dec << " k=" << k;
      ASSERT_EQ(toga::bits::lowest(x, k), lowest_by_clearing(x, k)) << std::hex << "x=0x" << x << std::dec << " n=" << k;
    }
}
