// Unit tests of toga/geometry.hpp: sizes, size classes and the address arithmetic of the heap
// (design.md §7, §6.3). The checks are exhaustive: every request size 0..2^20 plus
// sizes near 2^31, 2^32, 2^40 and 2^63; every slot of every class in every regular bin of a
// chunk; every byte offset of a chunk for is_slot_start. Expected values come from independent
// reference computations (loops, bitmaps over the chunk) and from the spec's tables, not from
// the header's own formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "toga/geometry.hpp"

namespace {

namespace g = toga::geom;
using u64 = std::uint64_t;

// A broken header would otherwise print millions of failures: the loops below report the first
// kMaxFailures counterexamples of a test and then stop it.
constexpr int kMaxFailures = 10;

// GEO_EXPECT(cond, message-stream): non-fatal check that returns from the enclosing function
// (a TEST body) once kMaxFailures checks have failed. Needs a local `int failures = 0;`.
#define GEO_EXPECT(cond, msg)                                         \
  do {                                                                \
    if (!(cond)) {                                                    \
      ADD_FAILURE() << "expected: " #cond << "\n  where " << msg;     \
      if (++failures >= kMaxFailures) {                               \
        ADD_FAILURE() << "stopping this test after " << failures      \
                      << " failed checks";                            \
        return;                                                       \
      }                                                               \
    }                                                                 \
  } while (0)

constexpr u64 KiB = 1024;
constexpr u64 kPage = 4096;      // design.md §7.1: bin = TBuddy leaf
constexpr u64 kHeaderArea = 128; // design.md §7.2: bin header / chunk header / reserved area
constexpr u64 kTail = 128;
constexpr u64 kChunk = 512 * KiB;
constexpr unsigned kBins = 128;
constexpr unsigned kHeaderBins = 4;
constexpr unsigned kTailsPerHeaderBin = 31;

// Reference: the smallest power of two >= max(s, min class), by a plain loop.
u64 ref_round_up(u64 s) {
  u64 p = g::min_class_bytes;
  while (p < s) p <<= 1;
  return p;
}

// Reference: the smallest TBuddy order n with 4 KiB << n >= s.
unsigned ref_order(u64 s) {
  unsigned n = 0;
  while ((kPage << n) < s) ++n;
  return n;
}

// design.md §7.2: regular bin b's tail lives in header bin (b-S)/31, tail slot (b-S)%31, after the
// first 128 B of that header bin.
u64 spec_tail_offset(unsigned b) {
  const unsigned t = b - kHeaderBins;
  return (t / kTailsPerHeaderBin) * kPage + kHeaderArea + (t % kTailsPerHeaderBin) * kTail;
}

// design.md §7.3: slot i of class size s in bin b.
u64 spec_slot_offset(unsigned b, u64 s, unsigned i) {
  const unsigned d = static_cast<unsigned>((kPage - kHeaderArea) / s);
  return i < d ? b * kPage + kHeaderArea + i * s : spec_tail_offset(b) + (i - d) * s;
}

// ---------------------------------------------------------------------------------------------
// Constants and the spec tables
// ---------------------------------------------------------------------------------------------

TEST(GeometryConstants, MatchSpecSection5_1) {
  EXPECT_EQ(g::page_bytes, kPage);
  EXPECT_EQ(u64{1} << g::page_shift, kPage);
  EXPECT_EQ(g::bin_header_bytes, kHeaderArea);
  EXPECT_EQ(g::bin_data_bytes, 3968u);
  EXPECT_EQ(g::tail_bytes, kTail);
  EXPECT_EQ(g::tails_per_header_bin, kTailsPerHeaderBin);
  EXPECT_EQ(g::chunk_bytes, kChunk);
  EXPECT_EQ(kPage << g::chunk_order, kChunk);
  EXPECT_EQ(g::bins_per_chunk, kBins);
  EXPECT_EQ(g::header_bins, kHeaderBins);
  EXPECT_EQ(g::usable_bins, 124u);
  EXPECT_EQ(g::bitmap_words * 64u, 512u);
  EXPECT_LE(g::bitmap_words * 8u, g::bin_header_bytes);  // the bitmap fits the bin header
  EXPECT_EQ(g::max_class_bytes, 1024u);
#ifdef TOGA_MIN_CLASS_8
  EXPECT_EQ(g::min_class_bytes, 8u);
  EXPECT_EQ(g::num_classes, 8u);
#else
  EXPECT_EQ(g::min_class_bytes, 16u);  // [DECISION] 16 B alignment, as CUDA's malloc promises
  EXPECT_EQ(g::num_classes, 7u);
#endif
}

struct class_row {
  u64 size;
  unsigned data, tail, capacity;
};
// design.md §7.3's table.
constexpr class_row kSpecTable[] = {
#ifdef TOGA_MIN_CLASS_8
    {8, 496, 16, 512},
#endif
    {16, 248, 8, 256}, {32, 124, 4, 128}, {64, 62, 2, 64}, {128, 31, 1, 32},
    {256, 15, 0, 15},  {512, 7, 0, 7},    {1024, 3, 0, 3},
};

TEST(SizeClasses, CapacityTableOfSpec5_2) {
  ASSERT_EQ(std::size(kSpecTable), g::num_classes);
  for (unsigned c = 0; c < g::num_classes; ++c) {
    const class_row& row = kSpecTable[c];
    SCOPED_TRACE(testing::Message() << "class " << c << " (" << row.size << " B)");
    EXPECT_EQ(g::class_bytes(c), row.size);
    EXPECT_EQ(g::data_slots(c), row.data);
    EXPECT_EQ(g::tail_slots(c), row.tail);
    EXPECT_EQ(g::capacity(c), row.capacity);
    // Tail slots exactly for classes <= 128 B.
    EXPECT_EQ(g::tail_slots(c) != 0, row.size <= kTail);
    // Independent arithmetic: as many slots as fit, and no more.
    EXPECT_LE(g::data_slots(c) * row.size, kPage - kHeaderArea);
    EXPECT_GT((g::data_slots(c) + 1) * row.size, kPage - kHeaderArea);
    EXPECT_LE(g::tail_slots(c) * row.size, kTail);
    if (row.size <= kTail) {
      EXPECT_GT((g::tail_slots(c) + 1) * row.size, kTail);
    }
    // Every slot has a bit in the 512-bit bin bitmap.
    EXPECT_LE(g::capacity(c), g::bitmap_words * 64u);
  }
}

TEST(SizeClasses, ClassOfInvertsClassBytes) {
  for (unsigned c = 0; c < g::num_classes; ++c) {
    EXPECT_EQ(g::class_of(g::class_bytes(c)), c) << "class " << c;
    EXPECT_TRUE(std::has_single_bit(g::class_bytes(c)));
  }
  EXPECT_EQ(g::class_bytes(0), g::min_class_bytes);
  EXPECT_EQ(g::class_bytes(g::num_classes - 1), g::max_class_bytes);
}

// ---------------------------------------------------------------------------------------------
// round_up / class_of / order_of (design.md §7.3, §6.3)
// ---------------------------------------------------------------------------------------------

TEST(RoundUp, EverySizeUpTo1MiB) {
  int failures = 0;
  u64 prev = 0;
  for (u64 s = 0; s <= (u64{1} << 20); ++s) {
    const u64 r = g::round_up(s);
    const u64 m = std::max<u64>(s, g::min_class_bytes);
    GEO_EXPECT(std::has_single_bit(r), "s=" << s << " round_up=" << r);
    GEO_EXPECT(r >= m && r < 2 * m, "s=" << s << " round_up=" << r);
    GEO_EXPECT(r == ref_round_up(s), "s=" << s << " round_up=" << r << " ref=" << ref_round_up(s));
    GEO_EXPECT(r >= prev, "s=" << s << " round_up=" << r << " < round_up(s-1)=" << prev);
    prev = r;
    // design.md §6.3: rounded size <= 1 KiB -> UAlloc (class path), else TBuddy.
    const bool class_path = r <= g::max_class_bytes;
    GEO_EXPECT(class_path == (s <= 1024), "s=" << s << " round_up=" << r);
    if (class_path) {
      const unsigned c = g::class_of(r);
      GEO_EXPECT(c < g::num_classes, "s=" << s << " class_of=" << c);
      GEO_EXPECT(g::class_bytes(c) == r, "s=" << s << " class_of=" << c << " class_bytes=" << g::class_bytes(c));
    } else {
      const unsigned o = g::order_of(r);
      GEO_EXPECT(o < 64 - g::page_shift, "s=" << s << " order=" << o);
      GEO_EXPECT((kPage << o) >= s && (kPage << o) >= r, "s=" << s << " order=" << o);
      GEO_EXPECT(o == 0 || (kPage << (o - 1)) < s, "s=" << s << " order=" << o << " is not minimal");
      GEO_EXPECT(o == ref_order(s), "s=" << s << " order=" << o << " ref=" << ref_order(s));
    }
  }
}

TEST(RoundUp, BoundaryCases) {
  EXPECT_EQ(g::round_up(0), g::min_class_bytes);  // design.md §6.3: malloc(0) gets a minimal block
  EXPECT_EQ(g::round_up(1), g::min_class_bytes);
  EXPECT_EQ(g::round_up(8), g::min_class_bytes);
  EXPECT_EQ(g::round_up(17), 32u);
  EXPECT_EQ(g::round_up(1024), 1024u);
  EXPECT_EQ(g::round_up(1025), 2048u);
  // design.md §6.3 / P §5.3: a 2 KiB request is "rounded up to 4 KB" (TBuddy order 0).
  EXPECT_EQ(g::order_of(g::round_up(1025)), 0u);
  EXPECT_EQ(g::order_of(g::round_up(2048)), 0u);
  EXPECT_EQ(g::order_of(g::round_up(4096)), 0u);
  EXPECT_EQ(g::order_of(g::round_up(4097)), 1u);
  EXPECT_EQ(g::order_of(g::round_up(kChunk)), g::chunk_order);
  // Usable in constant expressions (they run in device code and static_asserts).
  constexpr u64 r = g::round_up(1000);
  constexpr unsigned c = g::class_of(r);
  constexpr unsigned o = g::order_of(g::round_up(u64{1} << 40));
  EXPECT_EQ(r, 1024u);
  EXPECT_EQ(c, g::num_classes - 1);
  EXPECT_EQ(o, 28u);
}

TEST(RoundUp, LargeSizesUse64BitArithmetic) {
  std::vector<u64> sizes;
  for (unsigned k : {20u, 30u, 31u, 32u, 33u, 40u, 48u, 62u}) {
    const u64 p = u64{1} << k;
    for (u64 s : {p - 1, p, p + 1, p + p / 2}) sizes.push_back(s);
  }
  sizes.push_back((u64{1} << 32) + 4096);
  sizes.push_back((u64{1} << 63) - 1);
  sizes.push_back(u64{1} << 63);
  for (u64 s : sizes) {
    SCOPED_TRACE(testing::Message() << "s=" << s);
    const u64 r = g::round_up(s);
    EXPECT_EQ(r, ref_round_up(s));
    EXPECT_TRUE(std::has_single_bit(r));
    EXPECT_GE(r, s);
    EXPECT_LT(r / 2, s);
    EXPECT_GT(r, g::max_class_bytes);
    const unsigned o = g::order_of(r);
    EXPECT_EQ(o, ref_order(s));
    EXPECT_EQ(o, static_cast<unsigned>(std::countr_zero(r)) - g::page_shift);
    EXPECT_EQ(kPage << o, r);
  }
  // The survey's `1 << int` overflows at 2^31; these must not.
  EXPECT_EQ(g::round_up((u64{1} << 31) + 1), u64{1} << 32);
  EXPECT_EQ(g::round_up((u64{1} << 32) + 1), u64{1} << 33);
  EXPECT_EQ(g::round_up((u64{1} << 40) + 1), u64{1} << 41);
  EXPECT_EQ(g::order_of(u64{1} << 31), 19u);
  EXPECT_EQ(g::order_of(u64{1} << 32), 20u);
  EXPECT_EQ(g::order_of(u64{1} << 40), 28u);
}

TEST(OrderOf, EveryPowerOfTwoAboveTheClasses) {
  for (unsigned k = g::max_class_shift + 1; k < 64; ++k) {
    const u64 r = u64{1} << k;
    EXPECT_EQ(g::order_of(r), k <= g::page_shift ? 0u : k - g::page_shift) << "2^" << k;
  }
}

// ---------------------------------------------------------------------------------------------
// Tails (design.md §7.2)
// ---------------------------------------------------------------------------------------------

TEST(Tails, AreDistinctAreasInsideTheHeaderBins) {
  int failures = 0;
  std::vector<int> owner(kChunk, -1);  // which bin's tail covers each byte of the chunk
  for (unsigned b = kHeaderBins; b < kBins; ++b) {
    const u64 t = g::tail_offset(b);
    GEO_EXPECT(t == spec_tail_offset(b), "bin " << b << " tail_offset=" << t << " spec=" << spec_tail_offset(b));
    GEO_EXPECT(t % kTail == 0, "bin " << b << " tail_offset=" << t);
    GEO_EXPECT(t + kTail <= kHeaderBins * kPage, "bin " << b << " tail_offset=" << t << " leaves the header bins");
    GEO_EXPECT(t % kPage >= kHeaderArea, "bin " << b << " tail_offset=" << t << " is in a header area");
    GEO_EXPECT(t / kPage == (t + kTail - 1) / kPage, "bin " << b << " tail_offset=" << t << " crosses a page");
    GEO_EXPECT(t >= kHeaderArea, "bin " << b << " tail_offset=" << t << " overlaps the chunk header");
    for (u64 k = 0; k < kTail && t + k < kChunk; ++k) {
      GEO_EXPECT(owner[t + k] == -1, "bin " << b << " tail byte " << t + k << " also in the tail of bin " << owner[t + k]);
      owner[t + k] = static_cast<int>(b);
      GEO_EXPECT(g::owner_bin(t + k) == b, "bin " << b << " tail byte " << t + k << " owner_bin=" << g::owner_bin(t + k));
    }
  }
  // 124 tails of 128 B fill exactly the non-header part of the 4 header bins.
  for (u64 off = 0; off < kHeaderBins * kPage; ++off) {
    const bool header_area = off % kPage < kHeaderArea;
    GEO_EXPECT((owner[off] == -1) == header_area, "offset " << off << " tail owner " << owner[off]);
  }
  for (u64 off = kHeaderBins * kPage; off < kChunk; ++off)
    GEO_EXPECT(owner[off] == -1, "offset " << off << " in a regular bin is in the tail of bin " << owner[off]);
}

// ---------------------------------------------------------------------------------------------
// Slots (design.md §7.3, §7.5, §6.3)
// ---------------------------------------------------------------------------------------------

// Every slot of every class in every regular bin: position, alignment, containment, ownership,
// disjointness (bitmap over the chunk, per class), and is_slot_start on every chunk offset.
TEST(Slots, EverySlotOfEveryClassInEveryRegularBin) {
  int failures = 0;
  for (unsigned c = 0; c < g::num_classes; ++c) {
    const u64 s = g::class_bytes(c);
    const unsigned d = g::data_slots(c);
    const u64 align = std::min<u64>(s, 128);
    std::vector<int> covered(kChunk, -1);   // bin whose slot covers each byte
    std::vector<bool> start(kChunk, false);  // slot starts
    u64 covered_bytes = 0;
    for (unsigned b = kHeaderBins; b < kBins; ++b) {
      for (unsigned i = 0; i < g::capacity(c); ++i) {
        const u64 off = g::slot_offset(b, c, i);
#define CTX "class " << s << " B, bin " << b << ", slot " << i << ", off " << off
        GEO_EXPECT(off == spec_slot_offset(b, s, i), CTX << " spec=" << spec_slot_offset(b, s, i));
        GEO_EXPECT(off + s <= kChunk, CTX);
        // design.md §7.5: UAlloc slots are never 4 KiB aligned: >= 128 B into their page.
        GEO_EXPECT(off % kPage >= kHeaderArea, CTX);
        GEO_EXPECT(off % align == 0, CTX << " not aligned to " << align);
        // Within one area: bin b's data area, or bin b's tail.
        const u64 lo = i < d ? b * kPage + kHeaderArea : spec_tail_offset(b);
        const u64 hi = i < d ? (b + 1) * kPage : spec_tail_offset(b) + kTail;
        GEO_EXPECT(off >= lo && off + s <= hi, CTX << " outside [" << lo << ", " << hi << ")");
        // design.md §7.5: the owner from the address alone.
        GEO_EXPECT(g::owner_bin(off) == b, CTX << " owner_bin=" << g::owner_bin(off));
        GEO_EXPECT(g::owner_slot(off, c) == i, CTX << " owner_slot=" << g::owner_slot(off, c));
        GEO_EXPECT(g::is_slot_start(off, c), CTX);
        GEO_EXPECT(!g::is_slot_start(off + 1, c), CTX << " +1");
        if (s > 8) GEO_EXPECT(!g::is_slot_start(off + 8, c), CTX << " +8");
        if (off + s > kChunk) continue;  // reported above; keep the bitmaps in range
        start[off] = true;
        for (u64 k = 0; k < s; ++k) {
          GEO_EXPECT(covered[off + k] == -1, CTX << " byte " << off + k << " already in a slot of bin " << covered[off + k]);
          GEO_EXPECT((off + k) % kPage >= kHeaderArea, CTX << " byte " << off + k << " in a header area");
          covered[off + k] = static_cast<int>(b);
          // Interior bytes map to the same bin and slot.
          GEO_EXPECT(g::owner_bin(off + k) == b, CTX << " byte " << off + k << " owner_bin=" << g::owner_bin(off + k));
          GEO_EXPECT(g::owner_slot(off + k, c) == i, CTX << " byte " << off + k << " owner_slot=" << g::owner_slot(off + k, c));
        }
        covered_bytes += s;
#undef CTX
      }
    }
    GEO_EXPECT(covered_bytes == u64{g::usable_bins} * g::capacity(c) * s, "class " << s << " B covers " << covered_bytes);
    // is_slot_start is true exactly at slot starts: never inside a slot, in a header area or
    // in unused space (e.g. the last 384 B of a 512 B-class bin).
    for (u64 off = 0; off < kChunk; ++off) {
      GEO_EXPECT(g::is_slot_start(off, c) == start[off],
                 "class " << s << " B, off " << off << " is_slot_start=" << g::is_slot_start(off, c) << " slot start=" << start[off]);
      if (off % kPage < kHeaderArea) GEO_EXPECT(!g::is_slot_start(off, c), "class " << s << " B, header offset " << off);
    }
    // Offsets past the chunk are not slot starts of it.
    for (u64 off : {kChunk, kChunk + kHeaderArea, kChunk + 5 * kPage + kHeaderArea, 2 * kChunk + kHeaderArea})
      GEO_EXPECT(!g::is_slot_start(off, c), "class " << s << " B, off " << off);
  }
}

// design.md §7.5 from a heap offset: chunks are 512 KiB aligned (TBuddy), so masking a slot's heap
// offset finds its chunk, and the in-chunk arithmetic finds its bin and slot. design.md §7.5: no
// UAlloc slot shares a 4 KiB aligned address with a TBuddy block.
TEST(Slots, OwnershipFromHeapOffsets) {
  int failures = 0;
  for (u64 base : {u64{0}, kChunk, 7 * kChunk, (u64{1} << 33) - kChunk, u64{1} << 40}) {
    for (unsigned c = 0; c < g::num_classes; ++c) {
      for (unsigned b = kHeaderBins; b < kBins; ++b) {
        for (unsigned i = 0; i < g::capacity(c); ++i) {
          const u64 p = base + g::slot_offset(b, c, i);
          GEO_EXPECT(p % kPage != 0, "heap offset " << p << " is 4 KiB aligned");
          const u64 chunk = p & ~(g::chunk_bytes - 1);
          GEO_EXPECT(chunk == base, "heap offset " << p << " masks to chunk " << chunk);
          GEO_EXPECT(g::owner_bin(p - chunk) == b && g::owner_slot(p - chunk, c) == i,
                     "heap offset " << p << " class " << c << " bin " << b << " slot " << i);
        }
      }
    }
  }
}

}  // namespace
