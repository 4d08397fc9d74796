//! @file toga/cuda/heap.cuh
//! toga on a CUDA GPU: the owning host object `toga::cuda::heap` and the trivially copyable
//! device handle `toga::cuda::heap_ref` (the shape of cuCollections' static_set / static_set_ref).
//!
//! @code
//!   toga::cuda::heap h(1ull << 30);                      // 1 GiB heap on the current device
//!   my_kernel<<<grid, block>>>(h.ref());                 // heap_ref by value
//!   // in the kernel: void* p = ref.allocate(48); ... ref.deallocate(p);
//!   toga::heap_statistics s = h.stats();
//! @endcode
//!
//! Algorithm: Gelado & Garland, "Throughput-oriented GPU memory allocation", PPoPP'19 (UAlloc for
//! <= 1 KiB, TBuddy above); see docs/allocator.md. Sizes are bytes; the heap is rounded up to a
//! power of two (at least 4 KiB). Every block is aligned to at least 16 B (min(size, 128) for
//! blocks <= 1 KiB, the block size above). Thread-safety: any number of device threads may use
//! a heap_ref concurrently; host members of `heap` are not thread-safe with respect to each other
//! and must not run while kernels use the heap (they synchronise the heap's stream).
//! Errors: device calls never trap or hang on exhaustion; they return nullptr. Host calls throw
//! toga::cuda_error (a CUDA call failed: its error name and the call) or toga::bad_alloc (the
//! upstream allocation of the heap failed).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "toga/allocator.hpp"
#include "toga/cuda/platform.cuh"

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

//! The heap's memory could not be obtained from upstream (cudaMalloc or the memory pool).
class bad_alloc : public std::bad_alloc {
 public:
  explicit bad_alloc(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

namespace cuda {

//! Options of a heap. All optional.
struct heap_options {
  int device = -1;                //!< CUDA device; -1: the current one
  std::uint64_t limit_bytes = 0;  //!< allocations fail past this many bytes of TBuddy blocks (chunks and
                                  //!< blocks > 1 KiB); 0: no limit
  cudaStream_t stream = nullptr;  //!< stream for initialisation, copies and pool allocations
  cudaMemPool_t pool = nullptr;   //!< upstream: nullptr = cudaMalloc; else cudaMallocFromPoolAsync on `stream`
  unsigned arenas = 0;            //!< UAlloc arenas (%smid modulo arenas picks one); 0: one per SM, at most
                                  //!< one per 2 MiB of heap (4 chunks), so that every arena can hold chunks
};

using device_allocator = toga::allocator<platform>;

//! Device handle: trivially copyable, pass it by value to kernels. Valid while its heap lives
//! (and until heap::reset, which invalidates the blocks, not the handle).
class heap_ref {
 public:
  //! At least `bytes` bytes, aligned to min(size, 128) / the block size (>= 16 B); nullptr when
  //! the heap (or its byte limit) is exhausted. bytes == 0 gives a unique 16 B block.
  __device__ void* allocate(std::size_t bytes) const noexcept { return a_.allocate(bytes); }
  //! At least `bytes` bytes aligned to `alignment` (a power of two); nullptr otherwise.
  __device__ void* allocate(std::size_t bytes, std::size_t alignment) const noexcept { return a_.allocate(bytes, alignment); }
  //! Frees a block of this heap (any thread, any later kernel). nullptr: nothing. In checked
  //! builds (TOGA_CHECKED) a pointer toga did not hand out, or a second free, is logged
  //! (heap::errors) and ignored.
  __device__ void deallocate(void* ptr) const noexcept { a_.deallocate(ptr); }
  //! Warp-cooperative allocate: every thread of `group` (a cooperative-groups group within one
  //! warp: coalesced_group or thread_block_tile<N <= 32>) calls it; threads asking for the same
  //! size class are served together (one semaphore operation, shared statistics update).
  template <class Group>
  __device__ void* allocate(const Group& group, std::size_t bytes) const noexcept {
    (void)group;  // the group is formed again from the active lanes by size class (match_any)
    return a_.allocate_coalesced(bytes);
  }
  //! Warp-cooperative deallocate (each thread frees its own block).
  template <class Group>
  __device__ void deallocate(const Group& group, void* ptr) const noexcept {
    (void)group;
    a_.deallocate_coalesced(ptr);
  }
  //! Whether `ptr` points into this heap.
  __host__ __device__ bool contains(const void* ptr) const noexcept { return a_.contains(ptr); }
  //! Bytes of the heap.
  __host__ __device__ std::uint64_t capacity() const noexcept { return a_.heap_bytes; }

  explicit heap_ref(const device_allocator& a) : a_(a) {}
  //! The core allocator view (host and device).
  __host__ __device__ const device_allocator& view() const noexcept { return a_; }

 private:
  device_allocator a_;
};
static_assert(std::is_trivially_copyable_v<heap_ref>, "heap_ref is passed by value to kernels");

//! One checked-mode error: what was wrong and where (device address).
struct heap_error {
  toga::heap_error_kind kind;
  std::uint64_t where;  //!< offset from the heap base, or the foreign address
};

//! Owning host object: the heap's memory and metadata on one device. Move-only.
class heap {
 public:
  //! A heap of at least `bytes` bytes (rounded up to a power of two, >= 4 KiB), initialised on the
  //! device by kernels. Throws toga::bad_alloc if upstream memory cannot be had, toga::cuda_error
  //! on any other CUDA failure, std::invalid_argument for bytes == 0 or > heap_layout::max_heap_bytes (128 GiB).
  explicit heap(std::uint64_t bytes, heap_options options = {});
  ~heap();
  heap(heap&& other) noexcept;
  heap& operator=(heap&& other) noexcept;
  heap(const heap&) = delete;
  heap& operator=(const heap&) = delete;

  //! The device handle.
  heap_ref ref() const { return heap_ref(view_); }
  //! Bytes of the heap (a power of two).
  std::uint64_t capacity() const noexcept { return view_.heap_bytes; }
  //! Statistics read from the device (synchronises the heap's stream). used_bytes and counts
  //! are exact at quiescence; peak_used_bytes is the sum of per-SM peaks (an upper bound).
  toga::heap_statistics stats() const;
  //! Sets the high-water marks to the current values (synchronises the stream).
  void reset_high_water();
  //! Frees every block at once: the heap is as new (synchronises the stream). Blocks handed out
  //! before are invalid afterwards.
  void reset();
  //! The checked-mode error log (empty in unchecked builds).
  std::vector<heap_error> errors() const;
  //! The device the heap lives on.
  int device() const noexcept { return device_; }
  //! Milliseconds the last initialisation (constructor or reset) took on the stream.
  float init_ms() const noexcept { return init_ms_; }

 private:
  void release() noexcept;
  void initialise();

  device_allocator view_{};
  toga::heap_layout layout_{};
  heap_options options_{};
  char* raw_heap_ = nullptr;  // as obtained upstream (before aligning to 4 KiB)
  char* meta_ = nullptr;
  int device_ = 0;
  float init_ms_ = 0;
};

}  // namespace cuda
}  // namespace toga
