//! @file toga/cuda/heap.cuh
//! toga on a CUDA GPU: the owning host object `toga::cuda::heap`, the trivially copyable device
//! handle `toga::cuda::heap_ref` (the shape of cuCollections' static_set / static_set_ref), and
//! a drop-in device API over a default heap (`toga::cuda::allocate` / `deallocate` without a
//! handle, in the style of CUDA's device malloc/free and Gallatin's global_malloc).
//!
//! @code
//!   toga::cuda::heap h(1ull << 30);                      // 1 GiB heap on the current device
//!   my_kernel<<<grid, block>>>(h.ref());                 // heap_ref by value
//!   // in the kernel: void* p = ref.allocate(48); ... ref.deallocate(p);
//!   toga::cuda::set_default_heap(h);                     // or: no handle at all
//!   // in any kernel on h's device: void* q = toga::cuda::allocate(48); toga::cuda::deallocate(q);
//!   toga::cuda::heap_attributes a = h.attributes();      // reserved / used, current / high
//! @endcode
//!
//! Algorithm: Gelado & Garland, "Throughput-oriented GPU memory allocation", PPoPP'19 (UAlloc for
//! <= 1 KiB, TBuddy above); see docs/design.md (§6.3: sizes and routing).
//!
//! Units and alignment: sizes are bytes. The heap is rounded up to a power of two (at least
//! 4 KiB). A request of n bytes is served with max(16, next power of two of n) bytes: up to 1 KiB
//! from UAlloc (classes 16 B .. 1 KiB, aligned to min(size, 128) B), above from TBuddy (blocks of
//! 4 KiB and up, aligned to their size); so every block is aligned to at least 16 B.
//!
//! Thread-safety: any number of device threads may use a heap_ref (or the default heap)
//! concurrently; a block may be freed by another thread, warp, SM or kernel than the one that
//! allocated it. Host members of `heap` are not thread-safe with respect to each other and must
//! not run while kernels use the heap (they synchronise the heap's stream). Every host member
//! leaves the calling thread's current CUDA device as it found it.
//!
//! Invalid frees: the default (unchecked) build trusts deallocate's argument. A pointer that is
//! not the start of a live block of this heap is undefined behaviour: an interior pointer of a
//! small block frees the block that contains it (its owner's block is later freed twice), a
//! page-aligned interior pointer of a large block or a foreign pointer corrupts the buddy tree
//! or faults (an illegal address); a second free of a block corrupts the counts. Configure with
//! -DTOGA_CHECKED=ON (preset `checked`) to have every such free recorded (heap::errors) and
//! ignored instead.
//!
//! Errors: device calls are noexcept and never trap or hang; exhaustion (or the byte limit)
//! returns nullptr. Host calls throw: toga::bad_alloc (derived from std::bad_alloc) when the
//! heap's memory cannot be obtained upstream or would pass its device's budget (see "budgets"
//! below); std::invalid_argument for an unparsable TOGA_DEVICE_MEMORY_LIMIT; toga::cuda_error (derived from std::runtime_error;
//! what() names the CUDA error, the call and the source line) for any other failed CUDA call;
//! std::invalid_argument for a size out of range; std::logic_error for a heap that was moved from.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "toga/allocator.hpp"
#include "toga/budget.hpp"  // toga::bad_alloc, budgets and the allocation registry
#include "toga/cuda/platform.cuh"
#include "toga/growth.hpp"
#include "toga/heap_walk.hpp"
#include "toga/sharing.hpp"
#include "toga/tenants.hpp"

namespace toga {

//! A CUDA runtime call failed. `what()` names the call, the error and where.
class cuda_error : public std::runtime_error {
 public:
  cuda_error(cudaError_t code, const std::string& call)
      : std::runtime_error(std::string(cudaGetErrorName(code)) + " (" + cudaGetErrorString(code) + ") from " + call),
        code_(code) {}
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

namespace cuda {

//! Options of a heap. All optional.
struct heap_options {
  int device = -1;                //!< CUDA device; -1: the current one
  std::uint64_t limit_bytes = 0;  //!< allocations fail past this many bytes of TBuddy blocks (chunks,
                                  //!< superbins and larger blocks); 0: no limit
  cudaStream_t stream = nullptr;  //!< stream for initialisation, copies and pool allocations
  cudaMemPool_t pool = nullptr;   //!< upstream: nullptr = cudaMalloc; else cudaMallocFromPoolAsync on `stream`
  unsigned arenas = 0;            //!< UAlloc arenas (%smid modulo arenas picks one); 0: one per SM, at most
                                  //!< one per 2 MiB of heap (4 chunks), so that every arena can hold chunks
  std::uint64_t superbin_bytes = 0;  //!< bytes of one superbin (E6, design.md §11.1: the TBuddy block that
                                     //!< serves 64 B - 64 KiB slots): a power of two in [8 KiB, 2 MiB] below the heap
                                     //!< size; classes with fewer than 4 slots per superbin go to TBuddy.
                                     //!< Smaller ones waste less address range per (arena, class), larger ones
                                     //!< grow less often (docs/usage.md §6). 0: toga's choice (2 MiB, less on
                                     //!< heaps too small for four superbins per arena and class).
  unsigned superbin_sharing = 0;  //!< SMs (arenas) that share one superbin arena, 0 .. 1024: arena a allocates
                                  //!< superbin slots (64 B - 64 KiB) from superbin arena a % ceil(arenas / k).
                                  //!< 0 or 1: one per arena (toga's choice: the fastest). Larger values leave
                                  //!< fewer partly used superbins (a more compact address range: T9's range
                                  //!< ratio at 4 KiB 1.35 -> 1.16 with 4 on an H100) at the price of more
                                  //!< contention (T1 4 KiB +24-53 %, 64 KiB 10x slower with 4): docs/usage.md §6.
  //! Bytes of a fixed heap split at construction (and reset) into superbin-sized blocks, the
  //! pre-split reserve (design.md §10.5): the first kernel's chunks and superbins then come with
  //! one atomic each instead of a climb through the buddy tree from its root. The blocks no
  //! kernel took are merged back into the tree the first time a request finds the rest of the heap
  //! empty (a block larger than the rest, or exhaustion): once, costing one free per block.
  //! At most half the heap, rounded down to whole blocks: two 512 KiB chunks per arena first
  //! (16 B - 32 B slots), then superbins (at most 2^14).
  //! ~0 (the default): half the heap; 0: none. Growable heaps have none.
  std::uint64_t presplit_bytes = ~std::uint64_t{0};
  //! Tenants (docs/usage.md §12.4, toga/tenants.hpp): up to 64 tenants share the heap, each with a
  //! quota; heap::tenant(id, quota_bytes) returns a tenant's handle (toga::cuda::tenant_ref), and
  //! such a heap has no heap_ref (ref() and set_default_heap refuse it). Every block carries a 16 B
  //! tenant header (a request of n bytes takes a block of n + 16) and pointers are aligned to 16 B
  //! (or to the alignment asked for). Off (the default): no header, and heap_ref's code is as it was.
  bool tenants = false;
  // ---- growable heaps (issue 14; docs/usage.md §9): used by heap(heap_options) ----
  //! The most memory a growable heap maps (rounded up to granules); its reserved address range
  //! and capacity are max_bytes rounded up to a power of two (at most 128 GiB). Required by
  //! heap(heap_options), refused by heap(bytes, options). The metadata (about max_bytes / 256 for
  //! the buddy tree, max_bytes / 1,928 of superbin side table with 2 MiB superbins, and 6.75 KiB per
  //! SM: design.md §6.1) is allocated up front.
  std::uint64_t max_bytes = 0;
  //! Mapped at construction (rounded up to granules); 0 is allowed: the first allocations then
  //! fail with nullptr and record their demand for grow_if_needed().
  std::uint64_t initial_bytes = 0;
  //! Mapped beyond the recorded demand at each grow_if_needed() (plus a quarter of the demand).
  std::uint64_t headroom_bytes = 0;
  //! Mapped bytes kept at the heap's synchronising calls (synchronize, trim, grow_if_needed and
  //! reset): wholly free granules above it are unmapped, highest address first. Default: keep
  //! everything (cudaMemPoolAttrReleaseThreshold's default is 0, which releases at every sync).
  std::uint64_t release_threshold = ~std::uint64_t{0};
  //! Bytes of one granule, the unit adopted by the buddy tree and the finest unit mapped and
  //! given back: a power of two and a multiple of the device's VMM granularity (2 MiB on an
  //! H100/H200). 0: toga's choice, 2 MiB (the device's granularity if larger; less on a smaller
  //! max_bytes).
  std::uint64_t granule_bytes = 0;
  //! Granules sized by demand (design.md §12.8): consecutive granules are mapped in runs of up to
  //! this many bytes, each run one cuMemCreate handle (its calls cost about the same at 2 and 32
  //! MiB: docs/benchmarks.md "What the CUDA VMM API costs"), and a run is unmapped only once
  //! every granule of it is free. A small demand maps single granules; a block larger than this
  //! maps one run of its own size. A power of two, a multiple of granule_bytes. 0: toga's choice,
  //! 32 MiB with toga's granule; one granule (a handle each) when granule_bytes is set.
  std::uint64_t max_run_bytes = 0;
  //! Growth while kernels run (docs/usage.md §9.1, design.md §12.6): a host thread, started by the
  //! constructor and joined by the destructor, maps granules (cuMemCreate/cuMemMap) for requests
  //! that wait for them in running kernels; one waiting thread adopts each granule, then the
  //! requests retry. A request returns nullptr only when every granule is mapped, when the driver
  //! or the device budget refuses a granule, or after growth_wait_us. Off by default.
  bool growth_service = false;
  //! The longest a request waits for the growth service, in microseconds: 1 .. 60,000,000.
  std::uint64_t growth_wait_us = 1'000'000;
  //! The host tier (docs/usage.md §9.2): `when_device_full` backs a granule that the driver or the
  //! device budget refuses with host memory (cuMemCreate with a host location, mapped into the
  //! same range: kernels see no difference but its bandwidth). `never` (default). Growable heaps
  //! only; std::invalid_argument where the driver cannot make host VMM allocations.
  toga::spill_policy spill = toga::spill_policy::never;
  //! With growth_service: a round of the service maps at least this percent of the bytes mapped
  //! already (geometric growth; 100: doubling; 0: only what the waiting requests posted), so that
  //! a kernel filling a heap from empty waits a few rounds, not one per granule. The part ahead of
  //! demand is device memory only and is given back by trims like the rest. 0 .. 1,000.
  std::uint64_t growth_ahead_percent = 100;
  // ---- heaps shared by processes (issue 32; docs/usage.md §13) ----
  //! A fixed heap that other processes on this machine can import (heap::export_shareable,
  //! heap::import): its memory and its metadata are two cuMemCreate allocations exportable as
  //! POSIX file descriptors, each rounded up to the device's VMM granularity (2 MiB on an
  //! H100/H200), mapped whole at construction. Fixed heaps only (shared heaps do not grow:
  //! design.md §23.2); not with a memory pool or tenants (std::invalid_argument). Kernels and
  //! heap_ref are the same as a private heap's.
  bool shareable = false;
  //! Every atomic of the heap at system scope (cuda::thread_scope_system) instead of device
  //! scope, for heaps whose words kernels of several GPUs touch (design.md §23.5): kernels then
  //! take heap::system_ref() (a system_heap_ref, the core on toga::system_scoped) and ref()
  //! refuses. Fixed heaps, shareable or not; not with tenants (std::invalid_argument). What it
  //! costs on one GPU: docs/benchmarks.md "Shared heaps". heap::grant_access(d) lets GPU d's
  //! kernels in (not yet run on two GPUs).
  bool system_scope = false;
};

//! What another process needs to import a shareable heap (heap::export_shareable): the
//! descriptor's bytes and two POSIX file descriptors (the heap's memory, its metadata), which the
//! caller owns: send them (a Unix socket with SCM_RIGHTS: tools/examples/fd_passing.hpp), then
//! close them. Valid while the exporting heap, or any process that imported it, holds the memory.
struct shareable_heap {
  toga::share_descriptor descriptor{};
  int heap_fd = -1;
  int meta_fd = -1;
};

using device_allocator = toga::allocator<platform>;
//! The core at system scope (heap_options::system_scope).
using system_device_allocator = toga::allocator<toga::system_scoped<platform>>;

//! Device handle: trivially copyable, pass it by value to kernels. Valid while its heap lives
//! (and until heap::reset, which invalidates the blocks, not the handle). Every member may be
//! called by any number of device threads at once. `A`: the core's view, device_allocator
//! (heap_ref, from heap::ref()) or system_device_allocator (system_heap_ref, heap::system_ref()).
template <class A>
class basic_heap_ref {
 public:
  //! At least `bytes` bytes: max(16, next power of two of `bytes`), aligned to min(that, 128) B
  //! up to 1 KiB and to the block size above (so >= 16 B). nullptr when the heap, or its byte
  //! limit, is exhausted, or `bytes` exceeds the capacity. bytes == 0 gives a unique 16 B block.
  //! Never traps, never hangs.
  __device__ void* allocate(std::size_t bytes) const noexcept { return a_.allocate(bytes); }
  //! At least `bytes` bytes aligned to `alignment` (a power of two; any value up to the
  //! capacity); nullptr as above, or when `alignment` is not a power of two.
  __device__ void* allocate(std::size_t bytes, std::size_t alignment) const noexcept { return a_.allocate(bytes, alignment); }
  //! Frees a block of this heap: `ptr` must be what allocate returned and not yet freed (any
  //! thread, any later kernel). nullptr: nothing. Anything else: see "Invalid frees" at the top
  //! of this file (undefined in the default build; logged and ignored in checked builds).
  __device__ void deallocate(void* ptr) const noexcept { a_.deallocate(ptr); }
  //! Heap offset of `p` (a block of this heap), the same in every process that maps the heap
  //! (heaps shared by processes, docs/usage.md §13); ~0 for a pointer outside the heap.
  __host__ __device__ std::uint64_t export_pointer(const void* p) const noexcept { return toga::share_offset(a_.small.base, a_.heap_bytes, p); }
  //! This process's address of heap offset `offset` (export_pointer's result in any process);
  //! nullptr for an offset not below the capacity.
  __host__ __device__ void* import_pointer(std::uint64_t offset) const noexcept { return offset < a_.heap_bytes ? a_.small.base + offset : nullptr; }
  //! Warp-cooperative allocate: every thread of `group` (a cooperative-groups group within one
  //! warp: coalesced_group or thread_block_tile<N <= 32>) calls it; threads asking for the same
  //! size class are served together (one semaphore operation, shared statistics update). Sizes,
  //! alignment and results as allocate(bytes).
  template <class Group>
  __device__ void* allocate(const Group& group, std::size_t bytes) const noexcept {
    (void)group;  // the group is formed again from the active lanes by size class (match_any)
    return a_.allocate_coalesced(bytes);
  }
  //! Warp-cooperative deallocate (each thread frees its own block; the rules of deallocate).
  template <class Group>
  __device__ void deallocate(const Group& group, void* ptr) const noexcept {
    (void)group;
    a_.deallocate_coalesced(ptr);
  }
  //! Whether `ptr` points into this heap's blocks (any byte of the capacity).
  __host__ __device__ bool contains(const void* ptr) const noexcept { return a_.contains(ptr); }
  //! Bytes of the heap (a power of two).
  __host__ __device__ std::uint64_t capacity() const noexcept { return a_.heap_bytes; }
  explicit basic_heap_ref(const A& a) : a_(a) {}
  //! The core allocator view (host and device).
  __host__ __device__ const A& view() const noexcept { return a_; }

 private:
  A a_;
};
//! The handle of a heap (device scope).
using heap_ref = basic_heap_ref<device_allocator>;
//! The handle of a heap made with heap_options::system_scope.
using system_heap_ref = basic_heap_ref<system_device_allocator>;
static_assert(std::is_trivially_copyable_v<heap_ref> && std::is_trivially_copyable_v<system_heap_ref>, "handles are passed by value to kernels");

//! A tenant's device handle on a heap made with heap_options::tenants (heap::tenant; docs/usage.md
//! §12.4, toga/tenants.hpp): trivially copyable, passed by value like heap_ref. Every block it
//! hands out is charged to its tenant at the block's served size and carries a 16 B tenant header
//! below the pointer; a free through any tenant_ref of the heap credits the block's own tenant.
//! Such a heap has no heap_ref (heap::ref() refuses it): a heap without tenants keeps a handle whose
//! code knows nothing of them. Every member may be called by any number of device threads at once.
class tenant_ref {
 public:
  //! At least `bytes` bytes, aligned to 16 B, served with the block of bytes + 16 (its power of
  //! two: 16 B from 32 B slots, 4 KiB from an 8 KiB block), charged to this tenant; nullptr at the
  //! tenant's quota (failed_quota), when the heap has no block (failed_heap) or when `bytes`
  //! exceeds the capacity. Never traps, never hangs.
  __device__ void* allocate(std::size_t bytes) const noexcept { return toga::tenant_allocate<platform>(a_, tenants_, tenant_, bytes, 0); }
  //! At least `bytes` bytes aligned to `alignment` (a power of two; the block is bytes + alignment
  //! when that is above 16 B); nullptr as above, or when `alignment` is not a power of two.
  __device__ void* allocate(std::size_t bytes, std::size_t alignment) const noexcept {
    if (alignment == 0) return nullptr;
    return toga::tenant_allocate<platform>(a_, tenants_, tenant_, bytes, alignment);
  }
  //! Warp-cooperative form (every allocate aggregates per warp; the group is formed again).
  template <class Group>
  __device__ void* allocate(const Group& group, std::size_t bytes) const noexcept {
    (void)group;
    return allocate(bytes);
  }
  //! Frees a block any tenant_ref of this heap returned (any thread, any later kernel); the
  //! block's tenant is credited. nullptr: nothing. Anything else: undefined, as heap_ref's.
  __device__ void deallocate(void* ptr) const noexcept { toga::tenant_deallocate<platform>(a_, tenants_, tenant_, ptr); }
  template <class Group>
  __device__ void deallocate(const Group& group, void* ptr) const noexcept {
    (void)group;
    deallocate(ptr);
  }
  __host__ __device__ bool contains(const void* ptr) const noexcept { return a_.contains(ptr); }
  __host__ __device__ std::uint64_t capacity() const noexcept { return a_.heap_bytes; }
  //! This handle's tenant, 0 .. 63.
  __host__ __device__ std::uint32_t tenant() const noexcept { return tenant_; }

  tenant_ref(const device_allocator& a, toga::tenant_table* tenants, std::uint32_t tenant) : a_(a), tenants_(tenants), tenant_(tenant) {}

 private:
  device_allocator a_;
  toga::tenant_table* tenants_;
  std::uint32_t tenant_;
};
static_assert(std::is_trivially_copyable_v<tenant_ref>, "tenant_ref is passed by value to kernels");

//! One checked-mode error: what was wrong and where (device address).
struct heap_error {
  toga::heap_error_kind kind;
  std::uint64_t where;  //!< offset from the heap base, or the foreign address
};

//! A heap's statistics in the terms of CUDA's stream-ordered allocator (cudaMemPoolGetAttribute),
//! read at quiescence by heap::attributes. All byte figures are bytes; every high-water mark is
//! at most the capacity. A toga heap obtains all its device memory at construction
//! (`device_bytes`, constant); what grows and shrinks inside it is which part is carved into
//! blocks (reserved) and which part the application holds (used):
struct heap_attributes {
  std::uint64_t capacity = 0;      //!< bytes of the heap (a power of two)
  std::uint64_t device_bytes = 0;  //!< device memory the heap holds from upstream: capacity, 4 KiB of
                                   //!< alignment room and the metadata (what the upstream pool's own
                                   //!< cudaMemPoolAttrReservedMemCurrent grew by)
  std::uint64_t limit_bytes = 0;   //!< heap_options::limit_bytes (0: none); it caps reserved_mem_current
  //! cudaMemPoolAttrReservedMemCurrent: bytes of the heap taken out of the buddy tree, i.e. TBuddy
  //! blocks handed out: the 512 KiB chunks that hold the blocks of 1 KiB and less, and every
  //! block above 1 KiB. Exact at quiescence.
  std::uint64_t reserved_mem_current = 0;
  //! cudaMemPoolAttrReservedMemHigh: the highest reserved_mem_current since construction, reset()
  //! or reset_high_water(). Exact.
  std::uint64_t reserved_mem_high = 0;
  //! cudaMemPoolAttrUsedMemCurrent: bytes of live blocks, each counted at its served size (the
  //! size class, or the TBuddy block). Exact at quiescence.
  std::uint64_t used_mem_current = 0;
  //! cudaMemPoolAttrUsedMemHigh: high-water mark of used_mem_current: the sum of per-SM peaks
  //! clipped to reserved_mem_high, an upper bound of the true peak, exact when one SM allocates;
  //! never above reserved_mem_high, hence never above the capacity.
  std::uint64_t used_mem_high = 0;
  std::uint64_t allocations = 0;       //!< successful allocations since construction or reset()
  std::uint64_t deallocations = 0;     //!< frees of live blocks
  std::uint64_t failed_exhausted = 0;  //!< nullptr: the heap had no block for the request
  std::uint64_t failed_limit = 0;      //!< nullptr: limit_bytes refused the TBuddy block it needed
  std::uint64_t failed_too_large = 0;  //!< nullptr: larger than the capacity
  //! nullptr: a tenant's quota refused it (heaps with tenants: the sum over tenants; see heap::tenant_stats)
  std::uint64_t failed_quota = 0;
  std::uint64_t failed() const noexcept { return failed_exhausted + failed_limit + failed_too_large + failed_growable + failed_quota; }
  // ---- growable heaps (0 on a fixed heap) ----
  bool growable = false;                 //!< heap(heap_options) with max_bytes
  std::uint64_t granule_bytes = 0;       //!< the unit adopted, and the finest unit mapped and unmapped
  std::uint64_t max_run_bytes = 0;       //!< the largest run of granules mapped as one handle for small blocks
  std::uint64_t mapped_runs = 0;         //!< physical handles (runs of granules) mapped now
  //! Physical memory mapped into the range now: what cudaMemPoolAttrReservedMemCurrent measures
  //! for a pool (its backing memory). Whole granules; every one adopted by the buddy tree.
  std::uint64_t mapped_mem_current = 0;
  std::uint64_t mapped_mem_high = 0;     //!< the highest mapped_mem_current (reset_high_water resets it)
  std::uint64_t metadata_bytes = 0;      //!< device memory of the buddy tree, arenas and statistics
  // ---- heaps shared by processes ----
  bool shared = false;                   //!< heap_options::shareable, or imported
  bool imported = false;                 //!< made by heap::import
  bool system_scope = false;             //!< heap_options::system_scope (kernels use heap::system_ref())
  std::uint64_t failed_growable = 0;     //!< nullptr that growth can serve: a granule was unmapped (demand)
  std::uint64_t growth_requests = 0;     //!< grow_if_needed calls that found demand
  std::uint64_t growth_failures = 0;     //!< granules whose mapping failed (rolled back, nothing half mapped)
  std::uint64_t grown_bytes = 0;         //!< bytes mapped by grow_if_needed
  std::uint64_t trims = 0;               //!< trims that gave memory back or tried to (trim_to, the threshold)
  std::uint64_t trimmed_bytes = 0;       //!< bytes they unmapped
  std::uint64_t growth_budget_refusals = 0;  //!< granules the device budget refused (set_device_budget; also in growth_failures)
  // ---- the host tier (heap_options::spill) ----
  std::uint64_t mapped_host_mem_current = 0;  //!< of mapped_mem_current, bytes backed by host memory
  std::uint64_t mapped_host_mem_high = 0;     //!< its high-water mark
  std::uint64_t spilled_granules = 0;         //!< granules the device could not back that went to the host tier
  // ---- the growth service (heap_options::growth_service; 0 without it) ----
  bool growth_service = false;           //!< a service thread maps granules while kernels run
  std::uint64_t service_rounds = 0;      //!< rounds that answered waiting requests
  std::uint64_t service_refusals = 0;    //!< rounds that could map nothing (their waiters got nullptr)
  std::uint64_t service_waits = 0;       //!< requests that waited for the service
  std::uint64_t service_served = 0;      //!< ... and then got a block
  std::uint64_t service_timeouts = 0;    //!< ... and gave up after growth_wait_us (nullptr)
  std::uint64_t service_gave_up = 0;     //!< ... and gave up because a round refused or the service stopped (nullptr)
  std::uint64_t service_round_ns = 0;    //!< time the service spent in rounds that answered
  std::uint64_t service_map_ns = 0;      //!< ... of it in mapping granules (the VMM calls and the budget)
};

struct growth_impl;

//! Owning host object: the heap's memory and metadata on one device. Move-only. No member is
//! thread-safe with respect to another, and none may run while a kernel uses the heap. Every
//! member restores the calling thread's current device before it returns or throws.
class heap {
 public:
  //! A heap of at least `bytes` bytes (rounded up to a power of two, >= 4 KiB) on
  //! `options.device` (default: the current device), initialised by a memset and one kernel on
  //! `options.stream`; returns when it is ready. Throws std::invalid_argument for bytes == 0 or
  //! bytes > heap_layout::max_heap_bytes (128 GiB), toga::bad_alloc when upstream memory (the heap
  //! or its metadata: about 16 B per 4 KiB of heap plus 6.75 KiB per SM, design.md §6.1) cannot be had,
  //! toga::cuda_error on any other CUDA failure (an invalid device, a failed launch).
  explicit heap(std::uint64_t bytes, heap_options options = {});
  //! A growable heap (docs/usage.md §9): reserves an address range of
  //! `options.max_bytes` (its capacity) with the CUDA VMM API and maps `options.initial_bytes`
  //! of it, granule by granule. Kernels get nullptr when the mapped part cannot serve them (the
  //! device never waits for the host); the heap records what they asked for, and
  //! grow_if_needed() maps it. Throws std::invalid_argument (max_bytes 0 or above 128 GiB, a bad
  //! granule size, initial_bytes above max_bytes, a memory pool given: VMM memory comes from no
  //! pool), toga::bad_alloc (metadata or initial granules), toga::cuda_error.
  explicit heap(heap_options options);
  //! Frees the memory (upstream: cudaFree, or cudaFreeAsync on the stream and a synchronisation);
  //! clears the default heap of its device if it is this one. Never throws.
  ~heap();
  //! Takes over `other`'s memory; `other` is left moved-from: capacity() 0, and ref(), stats(),
  //! attributes(), reset_high_water(), reset() and errors() throw std::logic_error.
  heap(heap&& other) noexcept;
  //! Frees this heap's memory (as the destructor), then takes over `other`'s.
  heap& operator=(heap&& other) noexcept;
  heap(const heap&) = delete;
  heap& operator=(const heap&) = delete;

  //! The device handle (valid until this heap is destroyed). Throws std::logic_error for a
  //! moved-from heap (a handle to memory it no longer owns would be a dangling one), for a heap
  //! with tenants (its blocks carry tenant headers: use tenant(id)) and for one made with
  //! heap_options::system_scope (use system_ref()).
  heap_ref ref() const;
  //! The device handle of a heap made with heap_options::system_scope (every atomic at system
  //! scope). Throws std::logic_error for any other heap (use ref()) and for a moved-from heap.
  system_heap_ref system_ref() const;
  //! Bytes of the heap (a power of two); 0 when moved from.
  std::uint64_t capacity() const noexcept { return meta_ ? view_.heap_bytes : 0; }
  //! Bytes of one superbin (heap_options::superbin_bytes, or toga's choice); 0: this heap has
  //! none (every request above 1 KiB is a TBuddy block) or was moved from.
  std::uint64_t superbin_bytes() const noexcept { return meta_ && layout_.sb_shift ? std::uint64_t{1} << layout_.sb_shift : 0; }
  //! Superbin arenas in use (heap_options::superbin_sharing): arena a takes superbin slots from
  //! superbin arena a % superbin_arenas(); arenas() when every arena has its own. 0 without superbins.
  unsigned superbin_arenas() const noexcept { return meta_ && layout_.sb_shift ? layout_.sb_arenas : 0; }
  //! UAlloc arenas (heap_options::arenas, or one per SM as toga chooses).
  unsigned arenas() const noexcept { return meta_ ? layout_.arenas : 0; }
  //! Every statistic the core keeps (toga::heap_statistics: used and peak bytes, TBuddy block
  //! bytes and their exact high-water mark, per-class bins, chunks, failures split by cause),
  //! read from the device (copies the arenas and globals, synchronises the heap's stream). Exact
  //! at quiescence. Throws toga::cuda_error, std::logic_error (moved from).
  toga::heap_statistics stats() const;
  //! The statistics as CUDA's memory-pool attributes (see heap_attributes); as stats().
  heap_attributes attributes() const;
  //! Sets both high-water marks (reserved_mem_high, used_mem_high) to their current values, as
  //! setting cudaMemPoolAttrReservedMemHigh / UsedMemHigh to 0 does for a pool. Synchronises the
  //! stream. Throws toga::cuda_error, std::logic_error (moved from).
  void reset_high_water();
  //! Gives back what the allocator keeps for speed (E11, design.md §9.4): empty bins of the classes
  //! of 16 B and 32 B (at least 32 slots per bin; 16-128 B on heaps without superbins), the one cached empty chunk per SM, and bins waiting
  //! for an RCU grace period, so that stats().buddy_bytes and chunk_bytes count live blocks
  //! only. Live blocks are untouched. Allocation never needs it (a request that would fail runs
  //! the same reclamation first); call it at quiescence, e.g. before reading statistics or
  //! handing the memory to something else. One thread on the device, on the heap's stream;
  //! synchronises it. Throws toga::cuda_error, std::logic_error (moved from).
  void trim();
  //! Frees every block at once: the heap is as new (counts and marks too, tenants' counters as
  //! well; their quotas stay; synchronises the stream). Blocks handed out before are invalid
  //! afterwards; handles stay valid. Throws toga::cuda_error, std::logic_error (moved from).
  void reset();
  // ---- tenants (heap_options::tenants; docs/usage.md §12.4) ----
  //! Whether the heap was made with tenants.
  bool has_tenants() const noexcept { return tenants_ != nullptr; }
  //! Sets tenant `id`'s quota to `quota_bytes` (served bytes of its live blocks; allocations that
  //! would pass it return nullptr and count as failed_quota) and returns its handle (valid until
  //! the heap is destroyed). Call at
  //! quiescence (synchronises the stream); a quota below what the tenant holds now is allowed: its
  //! allocations fail until frees bring it below. Throws std::invalid_argument (the heap has no
  //! tenants, id not in [0, 63], quota_bytes not in [1, capacity()]: nothing changes),
  //! toga::cuda_error, std::logic_error (moved from).
  tenant_ref tenant(unsigned id, std::uint64_t quota_bytes);
  //! Tenant `id`'s handle without changing its quota (none: unlimited until tenant(id, q)).
  //! Throws as tenant(id, quota_bytes).
  tenant_ref tenant(unsigned id) const;
  //! Tenant `id`'s quota and counters (toga::tenant_counters: used and high bytes, allocations,
  //! deallocations credited to it, failed_quota, failed_heap), exact at quiescence; synchronises
  //! the stream. Throws as tenant().
  toga::tenant_counters tenant_stats(unsigned id) const;
  //! The checked-mode error log: the first heap_globals::max_errors invalid frees, in order
  //! (empty in unchecked builds). Throws toga::cuda_error, std::logic_error (moved from).
  std::vector<heap_error> errors() const;
  // ---- growable heaps (heap(heap_options)); on a fixed heap these do nothing and return 0 ----
  //! Whether this heap grows (made by heap(heap_options)).
  bool growable() const noexcept { return growth_ != nullptr; }
  //! Bytes mapped now (whole granules); capacity() for a fixed heap.
  std::uint64_t mapped_bytes() const noexcept;
  //! Which tier backs the memory at `p` (docs/usage.md §9.2): `host` for a host-tier granule of a
  //! growable heap with spill, `device` otherwise (also for addresses outside the heap). Host
  //! call; the answer holds until the next trim.
  toga::memory_tier tier_of(const void* p) const noexcept;
  //! Maps what kernels asked for and did not get since the last call (their requests at their
  //! served sizes, a quarter more, headroom_bytes; the largest block as one aligned run) and
  //! adopts it into the heap with a small kernel; then applies the release threshold if there
  //! was no demand. Returns the bytes newly mapped: 0 when nothing failed for want of mapped
  //! memory, or when nothing more could be mapped (max_bytes reached, or the driver refused:
  //! attributes().growth_failures counts it; the granule that failed is rolled back and the heap
  //! works on). The retry protocol: a kernel's allocation returns nullptr; the host calls
  //! grow_if_needed() and, when it returned more than 0, launches the failed work again.
  //! Synchronises the heap's stream. Throws toga::cuda_error.
  std::uint64_t grow_if_needed();
  //! Gives back mapped memory: UAlloc's caches are reclaimed (as trim()), then wholly free
  //! granules are unmapped from the highest address down until at most `min_bytes_to_keep`
  //! (rounded up to granules) stay mapped, or no more granule is wholly free. Returns the bytes
  //! unmapped (cudaMemGetInfo's free memory rises by them). Synchronises the stream; call at
  //! quiescence (no kernel uses the heap). Throws toga::cuda_error.
  std::uint64_t trim_to(std::uint64_t min_bytes_to_keep);
  //! Waits for the heap's stream, then applies the release threshold (trim_to(release_threshold)
  //! when more is mapped). Throws toga::cuda_error.
  void synchronize();
  //! Tests of the rollback: the k-th (1-based, from now) cuMemCreate / cuMemMap / cuMemSetAccess
  //! of this heap fails as if the driver had refused it. No effect on a fixed heap.
  void inject_growth_failure(toga::growth_step step, std::uint64_t k) noexcept;

  //! Copies the heap's metadata and its (mapped) memory back to the host and runs the heap walk
  //! (toga/heap_walk.hpp: the quiescent invariants of design.md §16.2, G7 included);
  //! returns the first one violated, or nothing. Fills `quality` (live blocks, bins, chunks,
  //! unmapped and wholly free granules) when given. Call at quiescence: it synchronises the
  //! device; it needs host address space for the capacity (reserved, only mapped granules are
  //! touched) and takes about a second per 8 GiB. Throws toga::cuda_error, std::logic_error (moved from).
  std::optional<std::string> check(toga::heap_quality* quality = nullptr) const;

  // ---- heaps shared by processes (heap_options::shareable; docs/usage.md §13) ----
  //! What another process needs to import this heap: the descriptor and two new POSIX file
  //! descriptors (cuMemExportToShareableHandle), which the caller owns and closes after sending.
  //! Throws std::logic_error (a heap made without heap_options::shareable, or moved from),
  //! toga::cuda_error (the driver refused the export).
  shareable_heap export_shareable() const;
  //! Maps a heap another process exported (export_shareable's descriptor bytes and the two file
  //! descriptors, received by this process; the caller keeps and closes its descriptors) on
  //! `device` (-1: the device whose UUID the descriptor names, as this process numbers it). The
  //! heap's memory lives until the last process unmaps it; kernels of every process then
  //! allocate and free in it at once through ref(), and blocks travel between the processes as
  //! heap offsets (export_pointer / import_pointer). Before mapping, the descriptor is checked
  //! (toga::check_share_descriptor: size, magic, version, checksum, geometry); after mapping, the
  //! copy of it the exporter wrote in the metadata must match. Throws std::invalid_argument for a
  //! truncated, corrupted, forged or stale descriptor, for descriptors that are not CUDA memory
  //! handles or are smaller than the descriptor says, for a device that is not the exporter's:
  //! the message names what was wrong, and nothing stays mapped; toga::cuda_error otherwise.
  static heap import(const void* descriptor, std::size_t descriptor_bytes, int heap_fd, int meta_fd, int device = -1);
  //! Lets kernels of `device` (another GPU) use this heap: enables peer access from that device
  //! (cudaDeviceEnablePeerAccess) and, for a shareable or imported heap, grants it read-write
  //! access to the heap's mappings (cuMemSetAccess). Those kernels take system_ref(), as this
  //! device's must. Throws std::logic_error for a heap made without heap_options::system_scope
  //! (its device-scope atomics are not atomic across GPUs), std::invalid_argument for a device
  //! CUDA does not see or one that cannot access this heap's device (no NVLink or PCIe P2P
  //! path), toga::cuda_error otherwise. Nothing for the heap's own device.
  void grant_access(int device);
  //! Whether this heap can be exported (heap_options::shareable) or was imported.
  bool shared() const noexcept { return share_ != nullptr; }
  //! Whether this heap object was made by import (its process is not the exporter).
  bool imported() const noexcept;
  //! The heap offset of block `p` (what another process passes to import_pointer); as
  //! heap_ref::export_pointer, but throws std::invalid_argument for a pointer outside the heap.
  std::uint64_t export_pointer(const void* p) const;
  //! This process's address of heap offset `offset`; std::invalid_argument for an offset not
  //! below the capacity.
  void* import_pointer(std::uint64_t offset) const;

  //! The device the heap lives on.
  int device() const noexcept { return device_; }
  //! Milliseconds the last initialisation (constructor or reset) took on the stream.
  float init_ms() const noexcept { return init_ms_; }

 private:
  friend void set_default_heap(const heap& h);
  void release() noexcept;
  void initialise();
  void allocate_metadata();
  void adopt(const std::vector<std::uint64_t>& offsets);
  std::uint64_t trim_granules(std::uint64_t keep_bytes);
  void apply_threshold();
  void open_account(const std::string& kind);
  std::uint64_t charge_or_throw(const char* what, std::uint64_t bytes);

  device_allocator view_{};
  toga::heap_layout layout_{};
  heap_options options_{};
  char* raw_heap_ = nullptr;  // as obtained upstream (before aligning to 4 KiB)
  char* meta_ = nullptr;
  int device_ = 0;
  float init_ms_ = 0;
  std::unique_ptr<growth_impl> growth_;  // growable heaps: the VMM range and its granules
  toga::ledger_account account_{};       // where its memory is recorded (toga::process_memory_ledger())
  toga::tenant_table* tenants_ = nullptr;  // heap_options::tenants: device memory
  std::vector<std::uint64_t> quotas_;      // tenants: each tenant's quota (host copy, restored by reset)
  void check_tenant(const char* call, unsigned id) const;
  struct share_impl;
  struct import_tag {};
  explicit heap(import_tag) noexcept;
  void make_shareable(std::uint64_t heap_bytes);
  std::unique_ptr<share_impl> share_;  // shareable or imported heaps: the VMM handles and mappings
  void* sys_resident_ = nullptr;       // heap_options::system_scope: the system-scoped view's resident copy (256 B)
  void make_system_view();
};

// ---- budgets and the allocation registry (toga/budget.hpp; docs/usage.md §12) ---------------------
//
// Every heap records what it obtains from the device (a fixed heap's memory and metadata; a
// growable heap's metadata, granule list and each granule) in the process's ledger before the
// CUDA call, and is refused past its device's budget: a constructor throws toga::bad_alloc whose
// message names the budget, the usage, the request and the largest holders; a growth maps the
// granules that fit and counts the rest as growth failures (heap_attributes::growth_budget_refusals).
// Only toga's heaps are counted (not the application's own cudaMalloc). The budget comes from
// set_device_budget, else from TOGA_DEVICE_MEMORY_LIMIT_<device> or TOGA_DEVICE_MEMORY_LIMIT (read
// the first time the device is used; HAMi's forms: 4g, 512m, bytes).

//! Sets the budget of `device` (-1: the current one) to `bytes` (0: none), for every toga heap
//! of this process, overriding the environment. Thread-safe. Throws std::invalid_argument (a
//! device CUDA does not see; a budget below what toga's heaps hold there now: nothing changes),
//! toga::cuda_error.
void set_device_budget(int device, std::uint64_t bytes);
//! The budget of `device` (-1: the current one) and what toga's heaps hold there (bytes, high
//! mark, refusals). Thread-safe. Throws std::invalid_argument (no such device, or an unparsable
//! TOGA_DEVICE_MEMORY_LIMIT[_n]), toga::cuda_error.
toga::budget_state device_budget(int device = -1);
//! Every piece of device memory toga's heaps hold (address, bytes, device, tier, owning heap,
//! time of creation) and per device the budget and the bytes of each heap; print it with
//! toga::to_string(report). Thread-safe; no device call.
toga::memory_report memory_report();

// ---- the default heap: allocate / deallocate without a handle ---------------------------------
//
// After `set_default_heap(h)`, any kernel on h's device may call toga::cuda::allocate(bytes) and
// toga::cuda::deallocate(p), which behave exactly as h.ref().allocate / deallocate. Each device
// has its own default (none at first: allocate returns nullptr and deallocate does nothing).
//
// Build requirements: none beyond including this header; no relocatable device code (-rdc) and
// no device link step. A __device__ variable defined in a header would break with several
// translation units, so each .cu that includes this header gets its own copy of the slot
// (internal linkage) and registers it with toga at static initialisation; set_default_heap
// writes the handle into every registered copy on the heap's device. Call set_default_heap after
// loading any shared library with toga kernels (dlopen): a library loaded later starts without a
// default. Works the same with -rdc=true.

namespace detail {
//! The bytes of a heap_ref and whether one was set (a __device__ variable must be trivially
//! constructible, which heap_ref, without a default constructor, is not).
struct default_heap_slot {
  alignas(heap_ref) unsigned char ref[sizeof(heap_ref)];
  std::uint32_t set;
};
//! This translation unit's copy (zero-initialised: no default heap).
static __device__ default_heap_slot default_heap;
//! Records the host shadow of one translation unit's slot (heap.cu; thread-safe).
void register_default_heap_slot(const void* symbol) noexcept;
namespace {
//! Registers this translation unit's slot at static initialisation (no CUDA call is made then).
struct default_heap_registrar {
  default_heap_registrar() noexcept { register_default_heap_slot(&default_heap); }
};
[[maybe_unused]] const default_heap_registrar default_heap_registrar_v;
}  // namespace
}  // namespace detail

//! Names `h` the default heap of its device, for every kernel that calls toga::cuda::allocate /
//! deallocate on that device (replacing an earlier default there). Synchronises the device.
//! Host only; not thread-safe with respect to kernels that allocate from the default heap or
//! to other calls of set_default_heap / clear_default_heap. Throws std::logic_error (h was moved
//! from, or has tenants), toga::cuda_error.
void set_default_heap(const heap& h);
//! Removes the default heap of `device` (-1: the current device); the heap's destructor does
//! this for its own device. Throws toga::cuda_error.
void clear_default_heap(int device = -1);

//! Whether the calling kernel's device has a default heap.
__device__ inline bool has_default_heap() noexcept { return detail::default_heap.set != 0; }
//! allocate(bytes) of the default heap (see heap_ref::allocate); nullptr when none is set.
__device__ inline void* allocate(std::size_t bytes) noexcept {
  if (detail::default_heap.set == 0) return nullptr;
  return reinterpret_cast<const heap_ref*>(detail::default_heap.ref)->allocate(bytes);
}
//! allocate(bytes, alignment) of the default heap; nullptr when none is set.
__device__ inline void* allocate(std::size_t bytes, std::size_t alignment) noexcept {
  if (detail::default_heap.set == 0) return nullptr;
  return reinterpret_cast<const heap_ref*>(detail::default_heap.ref)->allocate(bytes, alignment);
}
//! deallocate(ptr) of the default heap (see heap_ref::deallocate); nothing when none is set.
__device__ inline void deallocate(void* ptr) noexcept {
  if (detail::default_heap.set == 0) return;
  reinterpret_cast<const heap_ref*>(detail::default_heap.ref)->deallocate(ptr);
}

}  // namespace cuda
}  // namespace toga
