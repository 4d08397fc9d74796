//! @file toga/geometry.hpp
//! Sizes, size classes and address arithmetic of toga's heap (Gelado & Garland, PPoPP'19, §4.2
//! and Fig. 3; design.md §7, §6.3). Everything here is constexpr and
//! checked by static_assert; the tests check every size 0..2^20 and every slot of every class.
//!
//! Heap: H = 4 KiB x 2^(levels-1) bytes, addressed by offsets from the heap base.
//!  - TBuddy hands out blocks of 4 KiB x 2^order, aligned to their size (relative to the base).
//!  - UAlloc takes 512 KiB chunks from TBuddy. A chunk is 128 bins of 4 KiB; bins 0..3 are
//!    header bins (bin 0 starts with the chunk header; the first 128 B of bins 1..3 are reserved)
//!    whose other 31 x 128 B hold the 124 tails; bins 4..127 are regular bins: a 128 B bin header
//!    and 3968 B of slots, plus one 128 B tail in a header bin. [DECISION design.md §7.2]
//!  - Size classes 16, 32, ..., 1024 B. [DECISION design.md §7.3, §7.4] toga serves 8 B requests from the
//!    16 B class: every block is 16 B aligned, as CUDA's device malloc promises (the paper's 8 B
//!    class would align only to 8). Building with TOGA_MIN_CLASS_8 restores it.
//!  - Ownership from the address alone: TBuddy blocks start on 4 KiB boundaries, UAlloc slots
//!    never do (they sit at >= 128 B into a bin or a header bin).
#pragma once

#include <cstdint>

#include "toga/bits.hpp"
#include "toga/config.hpp"

namespace toga::geom {

inline constexpr std::uint64_t page_bytes = 4096;        //!< bin = TBuddy leaf
inline constexpr unsigned page_shift = 12;
inline constexpr std::uint64_t bin_header_bytes = 128;
inline constexpr std::uint64_t bin_data_bytes = page_bytes - bin_header_bytes;  //!< 3968
inline constexpr std::uint64_t tail_bytes = 128;
inline constexpr unsigned tails_per_header_bin = static_cast<unsigned>(bin_data_bytes / tail_bytes);  //!< 31

inline constexpr std::uint64_t chunk_bytes = 512 * 1024;
inline constexpr unsigned chunk_order = 7;  //!< TBuddy order of a chunk (4 KiB x 2^7)
inline constexpr unsigned bins_per_chunk = static_cast<unsigned>(chunk_bytes / page_bytes);  //!< 128
inline constexpr unsigned header_bins = bins_per_chunk / 32;                                 //!< 4
inline constexpr unsigned usable_bins = bins_per_chunk - header_bins;                        //!< 124

#ifdef TOGA_MIN_CLASS_8
inline constexpr unsigned min_class_shift = 3;
#else
inline constexpr unsigned min_class_shift = 4;
#endif
inline constexpr std::uint64_t min_class_bytes = std::uint64_t{1} << min_class_shift;
inline constexpr unsigned max_class_shift = 10;
inline constexpr std::uint64_t max_class_bytes = std::uint64_t{1} << max_class_shift;  //!< 1 KiB
inline constexpr unsigned num_classes = max_class_shift - min_class_shift + 1;
inline constexpr unsigned bitmap_words = 8;  //!< 512 bits per bin

static_assert(chunk_bytes == page_bytes << chunk_order);
static_assert(bins_per_chunk % 32 == 0 && header_bins * tails_per_header_bin == usable_bins,
              "one header bin holds the tails of 31 regular bins");
static_assert(bin_header_bytes * 8 >= bitmap_words * 64, "bitmap fits the bin header");

//! Bytes of size class c.
TOGA_HOST_DEVICE constexpr std::uint64_t class_bytes(unsigned c) { return min_class_bytes << c; }
//! Slots of class c in a bin's data area, in its tail, and in all.
TOGA_HOST_DEVICE constexpr unsigned data_slots(unsigned c) { return static_cast<unsigned>(bin_data_bytes / class_bytes(c)); }
TOGA_HOST_DEVICE constexpr unsigned tail_slots(unsigned c) {
  return class_bytes(c) <= tail_bytes ? static_cast<unsigned>(tail_bytes / class_bytes(c)) : 0u;
}
TOGA_HOST_DEVICE constexpr unsigned capacity(unsigned c) { return data_slots(c) + tail_slots(c); }

static_assert(capacity(0) <= bitmap_words * 64);
#ifndef TOGA_MIN_CLASS_8
static_assert(num_classes == 7 && capacity(0) == 256 && capacity(3) == 32 && capacity(4) == 15 && capacity(5) == 7 && capacity(6) == 3,
              "spec §5.2 table");
#endif

//! Rounded size served for a request of `bytes` (>= 1): the next power of two, at least the
//! smallest class. 64-bit arithmetic (no overflow below 2^63).
TOGA_HOST_DEVICE constexpr std::uint64_t round_up(std::uint64_t bytes) {
  if (bytes <= min_class_bytes) return min_class_bytes;
  return std::uint64_t{1} << (64 - bits::clz(bytes - 1));
}
//! Size class of a rounded size <= 1 KiB.
TOGA_HOST_DEVICE constexpr unsigned class_of(std::uint64_t rounded) {
  return bits::ctz(rounded) - min_class_shift;
}
//! TBuddy order for a rounded size > 1 KiB (blocks of at least 4 KiB).
TOGA_HOST_DEVICE constexpr unsigned order_of(std::uint64_t rounded) {
  const unsigned s = bits::ctz(rounded);
  return s <= page_shift ? 0u : s - page_shift;
}

//! Offset (from the chunk start) of regular bin b's tail (b >= header_bins).
TOGA_HOST_DEVICE constexpr std::uint64_t tail_offset(unsigned b) {
  const unsigned t = b - header_bins;
  return (t / tails_per_header_bin) * page_bytes + bin_header_bytes + (t % tails_per_header_bin) * tail_bytes;
}
//! Offset (from the chunk start) of slot i of class c in regular bin b.
TOGA_HOST_DEVICE constexpr std::uint64_t slot_offset(unsigned b, unsigned c, unsigned i) {
  const unsigned d = data_slots(c);
  return i < d ? b * page_bytes + bin_header_bytes + i * class_bytes(c)
               : tail_offset(b) + (i - d) * class_bytes(c);
}

//! Where a UAlloc address lives: its bin (index in the chunk) and, given the class, its slot.
struct slot_ref {
  unsigned bin;
  unsigned slot;
};
//! The bin that owns chunk offset `off` (not 4 KiB aligned; in a data area or a tail).
TOGA_HOST_DEVICE constexpr unsigned owner_bin(std::uint64_t off) {
  const unsigned b = static_cast<unsigned>(off / page_bytes);
  if (b >= header_bins) return b;
  const unsigned in = static_cast<unsigned>(off % page_bytes);
  return header_bins + b * tails_per_header_bin + (in - static_cast<unsigned>(bin_header_bytes)) / static_cast<unsigned>(tail_bytes);
}
//! The slot of class c at chunk offset `off` in bin `owner_bin(off)`.
TOGA_HOST_DEVICE constexpr unsigned owner_slot(std::uint64_t off, unsigned c) {
  const unsigned b = static_cast<unsigned>(off / page_bytes);
  const unsigned in = static_cast<unsigned>(off % page_bytes);
  if (b >= header_bins) return (in - static_cast<unsigned>(bin_header_bytes)) / static_cast<unsigned>(class_bytes(c));
  return data_slots(c) + ((in - static_cast<unsigned>(bin_header_bytes)) % static_cast<unsigned>(tail_bytes)) /
                             static_cast<unsigned>(class_bytes(c));
}
//! Whether chunk offset `off` lies where a slot of class c could start in its owner bin
//! (checked builds use it to reject pointers that toga did not hand out).
TOGA_HOST_DEVICE constexpr bool is_slot_start(std::uint64_t off, unsigned c) {
  const unsigned in = static_cast<unsigned>(off % page_bytes);
  if (in < bin_header_bytes) return false;
  const unsigned b = static_cast<unsigned>(off / page_bytes);
  if (b >= bins_per_chunk) return false;
  const std::uint64_t s = class_bytes(c);
  if (b >= header_bins) return (in - bin_header_bytes) % s == 0 && (in - bin_header_bytes) / s < data_slots(c);
  return tail_slots(c) != 0 && ((in - bin_header_bytes) % tail_bytes) % s == 0;
}

static_assert(slot_offset(header_bins, 0, 0) == header_bins * page_bytes + bin_header_bytes);
static_assert(owner_bin(tail_offset(bins_per_chunk - 1)) == bins_per_chunk - 1);
static_assert(tail_offset(bins_per_chunk - 1) + tail_bytes <= header_bins * page_bytes, "tails fit the header bins");

// ---- superbins (E6, design.md §11) --------------------------------------------------------------
// A superbin is one TBuddy block of 2^sb_shift bytes (2 MiB on large heaps; heap_layout::make picks
// a smaller one for small heaps) carved into equal slots of one class: 64 B, 128 B, 256 B, 512 B, 1,
// 2, 4, 8, 16, 32 or 64 KiB. Its header lives in a side table indexed by (offset >> sb_shift), so that
// slots stay aligned to their size and whole. A class is served by superbins when a superbin holds at
// least sb_min_slots of its slots; larger requests go to TBuddy directly. 64 B .. 1 KiB are served by
// superbins when the heap has them (a 4 KiB bin holds only 62, 31, 15, 7 or 3 of their slots, fewer
// than two warps' worth: design.md §7.3, §11.9), else by UAlloc's classes [DECISION changed:
// design.md §11.6]; 16 B and 32 B are always UAlloc's.
inline constexpr unsigned sb_min_class_shift = 6;                  //!< 64 B
inline constexpr std::uint64_t sb_min_class_bytes = std::uint64_t{1} << sb_min_class_shift;
inline constexpr unsigned sb_max_classes = 11;                     //!< 64 B .. 64 KiB
inline constexpr unsigned sb_max_shift = 21;                       //!< superbins of at most 2 MiB
inline constexpr unsigned sb_min_shift = 12;                       //!< superbins of at least one TBuddy leaf (4 KiB)
inline constexpr unsigned sb_bitmap_words = 512;                   //!< 32,768 slots: 64 B in 2 MiB
inline constexpr unsigned sb_min_slots = 4;
inline constexpr std::uint64_t sb_header_fixed_bytes = 64;         //!< a superbin header's fields before its bitmap
//! Largest request size UAlloc always serves (64 B .. 1 KiB move to superbins when there are some).
inline constexpr std::uint64_t ualloc_always_max_bytes = 32;
static_assert(sb_min_class_shift < max_class_shift, "superbins serve UAlloc's largest classes too, and everything above them");
static_assert((std::uint64_t{1} << (sb_max_shift - sb_min_class_shift)) <= sb_bitmap_words * 64);
static_assert(ualloc_always_max_bytes * 2 == sb_min_class_bytes);

//! Bitmap words a superbin of 2^shift bytes needs (its smallest class's slots, at least one word).
TOGA_HOST_DEVICE constexpr unsigned sb_bitmap_words_for(unsigned shift) {
  return shift >= sb_min_class_shift + 6 ? 1u << (shift - sb_min_class_shift - 6) : 1u;
}
//! Bytes of a side-table entry for superbins of 2^shift bytes: the header's fields and the words its
//! smallest class needs, in whole 64 B lines (128 B for 4-16 KiB superbins, 4,160 B for 2 MiB ones;
//! 0.05 % - 3 % of the superbin). A header reaches no further than its entry: only the words below
//! the capacity of its class are ever read or written.
TOGA_HOST_DEVICE constexpr std::uint64_t sb_header_stride(unsigned shift) {
  return (sb_header_fixed_bytes + 8 * std::uint64_t{sb_bitmap_words_for(shift)} + 63) & ~std::uint64_t{63};
}
static_assert(sb_header_stride(21) == 4160 && sb_header_stride(13) == 128 && sb_header_stride(18) == 576);

//! Bytes of superbin class c (0 .. sb_max_classes - 1).
TOGA_HOST_DEVICE constexpr std::uint64_t sb_class_bytes(unsigned c) { return sb_min_class_bytes << c; }
//! Superbin class of a rounded size in [256 B, 64 KiB].
TOGA_HOST_DEVICE constexpr unsigned sb_class_of(std::uint64_t rounded) { return bits::ctz(rounded) - sb_min_class_shift; }
//! Superbin classes served with superbins of 2^shift bytes (0 for shift 0: no superbins).
TOGA_HOST_DEVICE constexpr unsigned sb_classes_for(unsigned shift) {
  if (shift < sb_min_shift) return 0;
  const unsigned n = shift - sb_min_class_shift - 1;  // (sb_min_slots = 4 = 2^2 slots of the largest)
  return n < sb_max_classes ? n : sb_max_classes;
}
static_assert(sb_classes_for(21) == 11 && sb_classes_for(16) == 9 && sb_classes_for(13) == 6 && sb_classes_for(12) == 5 &&
              sb_classes_for(11) == 0);

}  // namespace toga::geom
