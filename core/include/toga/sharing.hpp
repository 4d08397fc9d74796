//! @file toga/sharing.hpp
//! Heaps shared by processes (issue 32; docs/usage.md §13 "Sharing heaps", design.md §23):
//! what a process needs, besides the memory handles, to map a heap another process made, and
//! the checks an import makes before it trusts any of it. Backend-agnostic: the CUDA heap
//! (toga::cuda::heap with heap_options::shareable, memory from cuMemCreate exported as POSIX file
//! descriptors) and the CPU heap (toga::cpu::shared_heap, memfd files) both use it.
//!
//! A shared heap is two pieces of memory, each one exportable handle: the heap (the blocks) and
//! the metadata (buddy tree, arenas, statistics: toga::heap_layout). Nothing in either holds a
//! process's address: bins, chunks and lists are named by heap offsets (ualloc.hpp), so each
//! process maps both wherever its address space has room and builds its own view over them
//! (toga::allocator::make). The one address the metadata carries, the view's resident copy
//! (allocator::resident, design.md §8.8), is per process: an importer keeps its own copy in its
//! own memory and never reads the exporter's. Blocks travel between processes as heap offsets
//! (export_pointer / import_pointer), as cudaMemPoolExportPointer / ImportPointer do for pools.
//!
//! The descriptor is a fixed-size, trivially copyable record (send its bytes as they are; both
//! processes run the same toga build on one machine). An importer checks, in this order, before
//! it maps anything: the size of what it was given, the magic and version, the checksum, that
//! the geometry is one toga makes (the metadata layout recomputed from levels, arenas and
//! superbins must match the sizes the descriptor claims), and that the handles hold at least the
//! bytes claimed; after mapping the metadata, that the copy of the descriptor the exporter wrote
//! there is byte-for-byte the one given (a descriptor of another heap, or of an earlier heap
//! whose handles were reused, is refused). Each failure throws std::invalid_argument naming what
//! was wrong and what to do, and maps nothing.
//!
//! Growth: shared heaps do not grow (design.md §23.2 says why); their memory is mapped whole by
//! the exporter at construction and by each importer at import.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "toga/allocator.hpp"
#include "toga/budget.hpp"

namespace toga {

//! What an importer needs besides the two memory handles (see the file comment). All sizes in
//! bytes. Made by the exporter (make_share_descriptor); checked by check_share_descriptor.
struct share_descriptor {
  static constexpr char magic_text[8] = {'t', 'o', 'g', 'a', 's', 'h', 'r', '\0'};
  static constexpr std::uint32_t current_version = 1;
  char magic[8];
  std::uint32_t version;
  std::uint32_t backend;            //!< memory_backend of the exporter (cuda, cpu)
  std::uint64_t heap_id;            //!< random at the heap's construction: tells heaps apart
  std::uint64_t heap_bytes;         //!< capacity: 4 KiB x 2^(levels-1)
  std::uint64_t heap_alloc_bytes;   //!< the heap handle's size: share_heap_alloc_bytes (the capacity, then the descriptor's copy)
  std::uint64_t meta_bytes;         //!< heap_layout::bytes
  std::uint64_t meta_alloc_bytes;   //!< the metadata handle's size (header included)
  std::uint64_t header_off;         //!< offset of the descriptor's copy in the metadata handle
  std::uint64_t limit_bytes;        //!< the byte limit (0: none), informative
  std::uint32_t levels, arenas, pins, sb_shift, sb_arenas;
  std::uint32_t flags;              //!< share_flag_system_scope: kernels use the system-scoped core
  std::uint8_t device_uuid[16];     //!< CUDA: the exporter's device (cudaDeviceProp::uuid); CPU: zero
  std::uint64_t reserved;           //!< 0
  std::uint64_t checksum;           //!< FNV-1a 64 of every byte before it
};
static_assert(std::is_trivially_copyable_v<share_descriptor> && sizeof(share_descriptor) == 128);

//! share_descriptor::flags: the heap's words are at system scope (toga::system_scoped; the CUDA
//! heap's heap_options::system_scope): every process's kernels must use the system-scoped core.
inline constexpr std::uint32_t share_flag_system_scope = 1;

//! FNV-1a 64 over a descriptor's bytes before its checksum.
inline std::uint64_t share_checksum(const share_descriptor& d) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(&d);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < offsetof(share_descriptor, checksum); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

//! Bytes of the heap handle of a heap of `heap_bytes`: the heap, then a 4 KiB page whose first
//! bytes hold a copy of the descriptor (at offset heap_bytes), rounded up to `granularity`. The
//! copy lets an import tell a heap handle of this heap from any other (check_share_header).
inline std::uint64_t share_heap_alloc_bytes(std::uint64_t heap_bytes, std::uint64_t granularity) {
  return (heap_bytes + 4096 + granularity - 1) & ~(granularity - 1);
}

//! Bytes of the metadata handle for `layout`, with the descriptor's copy at header_off (the
//! layout rounded up to 4 KiB), rounded up to `granularity` (a power of two).
inline std::uint64_t share_meta_alloc_bytes(const heap_layout& layout, std::uint64_t granularity, std::uint64_t* header_off = nullptr) {
  const std::uint64_t off = (layout.bytes + 4095) & ~std::uint64_t{4095};
  if (header_off) *header_off = off;
  const std::uint64_t need = off + sizeof(share_descriptor);
  return (need + granularity - 1) & ~(granularity - 1);
}

//! The descriptor of a heap with `layout` whose handles have `heap_alloc_bytes` and
//! `meta_alloc_bytes` bytes; checksum filled in.
inline share_descriptor make_share_descriptor(memory_backend backend, std::uint64_t heap_id, const heap_layout& layout,
                                              std::uint64_t heap_alloc_bytes, std::uint64_t meta_alloc_bytes, std::uint64_t header_off,
                                              std::uint64_t limit_bytes, const std::uint8_t* uuid16 = nullptr, std::uint32_t flags = 0) {
  share_descriptor d{};
  std::memcpy(d.magic, share_descriptor::magic_text, sizeof d.magic);
  d.version = share_descriptor::current_version;
  d.backend = static_cast<std::uint32_t>(backend);
  d.heap_id = heap_id;
  d.heap_bytes = geom::page_bytes << (layout.levels - 1);
  d.heap_alloc_bytes = heap_alloc_bytes;
  d.meta_bytes = layout.bytes;
  d.meta_alloc_bytes = meta_alloc_bytes;
  d.header_off = header_off;
  d.limit_bytes = limit_bytes;
  d.levels = layout.levels;
  d.arenas = layout.arenas;
  d.pins = layout.pins;
  d.sb_shift = layout.sb_shift;
  d.sb_arenas = layout.sb_arenas;
  d.flags = flags;
  if (uuid16) std::memcpy(d.device_uuid, uuid16, 16);
  d.checksum = share_checksum(d);
  return d;
}

//! How an importer checks a descriptor (tests plant one missing check each; none in real use).
enum class share_check_bug : unsigned {
  none,
  trust_geometry,  //!< skips recomputing the layout: sizes the metadata does not have are believed
};

//! Checks what an importer of backend `backend` on platform P was given (`bytes`, `n` bytes) and
//! returns the descriptor, or throws std::invalid_argument naming the first thing wrong and what
//! to do; `who` prefixes the message. Nothing is mapped by this check. `granularity`: the handle
//! granularity of the importer (the sizes must be multiples of it).
template <class P, share_check_bug Bug = share_check_bug::none>
share_descriptor check_share_descriptor(const void* bytes, std::size_t n, memory_backend backend, std::uint64_t granularity, const std::string& who) {
  const std::string fix = "; pass the descriptor and handles exactly as export_shareable() of the exporting heap returned them";
  if (bytes == nullptr || n != sizeof(share_descriptor))
    throw std::invalid_argument(who + ": the descriptor has " + std::to_string(bytes ? n : 0) + " B, a toga share descriptor has " +
                                std::to_string(sizeof(share_descriptor)) + " B (truncated or not a descriptor)" + fix);
  share_descriptor d;
  std::memcpy(&d, bytes, sizeof d);
  if (std::memcmp(d.magic, share_descriptor::magic_text, sizeof d.magic) != 0)
    throw std::invalid_argument(who + ": the descriptor does not start with toga's magic (not a toga share descriptor)" + fix);
  if (d.version != share_descriptor::current_version)
    throw std::invalid_argument(who + ": descriptor version " + std::to_string(d.version) + ", this toga reads version " +
                                std::to_string(share_descriptor::current_version) + "; build both processes from the same toga");
  if (d.checksum != share_checksum(d)) throw std::invalid_argument(who + ": the descriptor's checksum does not match its bytes (corrupted)" + fix);
  if (d.backend != static_cast<std::uint32_t>(backend))
    throw std::invalid_argument(who + ": the descriptor comes from " +
                                (d.backend <= 1 ? std::string("a ") + to_string(static_cast<memory_backend>(d.backend)) + " heap"
                                                : "backend " + std::to_string(d.backend) + ", which toga does not have") +
                                ", this importer maps " + to_string(backend) + " memory; import it with the backend that made it");
  if constexpr (Bug != share_check_bug::trust_geometry) {
    if (d.levels == 0 || d.levels > heap_layout::max_levels || d.arenas == 0 || d.arenas > 65536 || d.pins == 0 || d.pins > max_pin_slots ||
        d.sb_shift > geom::sb_max_shift || d.sb_arenas == 0 || d.sb_arenas > d.arenas || (d.flags & ~share_flag_system_scope) != 0)
      throw std::invalid_argument(who + ": the descriptor's geometry (levels " + std::to_string(d.levels) + ", arenas " + std::to_string(d.arenas) +
                                  ", pins " + std::to_string(d.pins) + ", superbin shift " + std::to_string(d.sb_shift) +
                                  ") is not one toga makes" + fix);
    heap_layout l = heap_layout::make<P>(d.levels, d.arenas, static_cast<int>(d.sb_shift), d.sb_arenas);
    l.pins = d.pins;
    std::uint64_t header_off = 0;
    const std::uint64_t meta_alloc = share_meta_alloc_bytes(l, granularity, &header_off);
    const std::uint64_t heap_bytes = geom::page_bytes << (d.levels - 1);
    if (l.sb_shift != d.sb_shift || l.bytes != d.meta_bytes || header_off != d.header_off || d.heap_bytes != heap_bytes ||
        d.heap_alloc_bytes != share_heap_alloc_bytes(heap_bytes, granularity) || d.meta_alloc_bytes != meta_alloc)
      throw std::invalid_argument(who + ": the descriptor's sizes (heap " + std::to_string(d.heap_bytes) + " B in a handle of " +
                                  std::to_string(d.heap_alloc_bytes) + " B, metadata " + std::to_string(d.meta_bytes) + " B in " +
                                  std::to_string(d.meta_alloc_bytes) + " B) do not follow from its geometry (a heap of " + std::to_string(heap_bytes) +
                                  " B has " + std::to_string(l.bytes) + " B of metadata in " + std::to_string(meta_alloc) +
                                  " B here): another toga build, or a forged or damaged descriptor; build both processes from the same toga");
  }
  return d;
}

//! After a handle is mapped: the exporter's copy of the descriptor in it (the metadata's at
//! header_off, the heap's at heap_bytes) must be `d`, byte for byte; otherwise
//! std::invalid_argument naming `what` ("heap", "metadata"): a handle of another heap.
inline void check_share_header(const share_descriptor& d, const void* mapped_copy, const char* what, const std::string& who) {
  if (std::memcmp(mapped_copy, &d, sizeof d) != 0)
    throw std::invalid_argument(who + ": the " + what + " handle belongs to another heap than the descriptor (heap id " + std::to_string(d.heap_id) +
                                "): a stale descriptor, or handles of another export; pass the descriptor and the handles of one export_shareable() call");
}

//! A block's heap offset (what travels between processes), or ~0 for a pointer outside the heap.
TOGA_HOST_DEVICE inline std::uint64_t share_offset(const char* base, std::uint64_t heap_bytes, const void* p) noexcept {
  const auto* c = static_cast<const char*>(p);
  if (c < base || static_cast<std::uint64_t>(c - base) >= heap_bytes) return ~std::uint64_t{0};
  return static_cast<std::uint64_t>(c - base);
}

//! The Platform P with every atomic operation and fence at system scope: the allocator for a
//! heap whose words are touched by kernels of several devices (issue 32; design.md §23.5), where
//! a device-scope atomic is atomic only among one device's threads (PTX: not morally strong
//! across devices). `toga::allocator<system_scoped<P>>` is the core with that scope; the
//! simulator's `two-devices` scenario runs it (and, as its planted bug, the device-scoped core)
//! on lanes of two devices. Identity, warp collectives, backoff and fault sites are P's.
template <class P>
struct system_scoped : P {
  template <class T, memory_order O, scope S>
  TOGA_DEVICE TOGA_FORCEINLINE static T load(T* p, order_tag<O> o, scope_tag<S>) TOGA_NOEXCEPT(P) {
    return P::load(p, o, system_scope);
  }
  template <class T, memory_order O, scope S>
  TOGA_DEVICE TOGA_FORCEINLINE static void store(T* p, std::type_identity_t<T> v, order_tag<O> o, scope_tag<S>) TOGA_NOEXCEPT(P) {
    P::store(p, v, o, system_scope);
  }
  template <class T, memory_order O, scope S>
  TOGA_DEVICE TOGA_FORCEINLINE static T exchange(T* p, std::type_identity_t<T> v, order_tag<O> o, scope_tag<S>) TOGA_NOEXCEPT(P) {
    return P::exchange(p, v, o, system_scope);
  }
  template <class T, memory_order O, scope S>
  TOGA_DEVICE TOGA_FORCEINLINE static bool compare_exchange(T* p, T& expected, std::type_identity_t<T> desired, order_tag<O> o,
                                                                 scope_tag<S>) TOGA_NOEXCEPT(P) {
    return P::compare_exchange(p, expected, desired, o, system_scope);
  }
  template <class T, memory_order O, scope S>
  TOGA_DEVICE TOGA_FORCEINLINE static T fetch_add(T* p, std::type_identity_t<T> v, order_tag<O> o, scope_tag<S>) TOGA_NOEXCEPT(P) {
    return P::fetch_add(p, v, o, system_scope);
  }
  template <class T, memory_order O, scope S>
  TOGA_DEVICE TOGA_FORCEINLINE static T fetch_sub(T* p, std::type_identity_t<T> v, order_tag<O> o, scope_tag<S>) TOGA_NOEXCEPT(P) {
    return P::fetch_sub(p, v, o, system_scope);
  }
  template <class T, memory_order O, scope S>
  TOGA_DEVICE TOGA_FORCEINLINE static T fetch_and(T* p, std::type_identity_t<T> v, order_tag<O> o, scope_tag<S>) TOGA_NOEXCEPT(P) {
    return P::fetch_and(p, v, o, system_scope);
  }
  template <class T, memory_order O, scope S>
  TOGA_DEVICE TOGA_FORCEINLINE static T fetch_or(T* p, std::type_identity_t<T> v, order_tag<O> o, scope_tag<S>) TOGA_NOEXCEPT(P) {
    return P::fetch_or(p, v, o, system_scope);
  }
  template <class T, memory_order O, scope S>
  TOGA_DEVICE TOGA_FORCEINLINE static T fetch_max(T* p, std::type_identity_t<T> v, order_tag<O> o, scope_tag<S>) TOGA_NOEXCEPT(P) {
    return P::fetch_max(p, v, o, system_scope);
  }
  template <memory_order O, scope S>
  TOGA_DEVICE TOGA_FORCEINLINE static void fence(order_tag<O> o, scope_tag<S>) TOGA_NOEXCEPT(P) {
    P::fence(o, system_scope);
  }
};

}  // namespace toga
