//! @file toga/cuda/platform.cuh
//! `toga::cuda::platform`: the `toga::Platform` contract (toga/platform.hpp) for real CUDA
//! kernels.
//!
//! Every member is `static __device__ __forceinline__`: the platform exists only inside
//! device code. It needs sm_70 or newer (`__nanosleep`, `__match_any_sync`, `fence.*`
//! scoped fences, independent thread scheduling); CUDA 13's oldest target, sm_75, qualifies.
//!
//! ## Mapping
//!  * Atomics: `cuda::atomic_ref<T, cuda::thread_scope_block | _device | _system>` (from
//!    the scope tag) with `cuda::std::memory_order_*` (from the order tag), both chosen at
//!    compile time. `compare_exchange` is `compare_exchange_strong` with failure order
//!    `toga::failure_order(O)`. `fence` is `cuda::atomic_thread_fence(order, scope)`.
//!  * Identity: PTX special registers (`%laneid`, `%smid`, `%nsmid`, `%lanemask_lt`) and
//!    linearised `threadIdx` / `blockIdx` / `blockDim` / `gridDim`.
//!  * Warp collectives: the `*_sync` intrinsics with the caller's mask, unchanged.
//!  * `backoff`: `__nanosleep`; `fail`: device `printf` + `__trap()`.
//!
//! ## Thread-safety
//! Atomics are safe between any threads inside the given scope (the threads of the calling
//! block for `block_scope`, every thread of the device for `device_scope`); the pointer must
//! be naturally aligned (4 or 8 bytes) and, for `block_scope`, only threads of one block may
//! access the word concurrently. Identity functions read per-thread registers and are always
//! safe. Warp collectives follow CUDA's Volta+ rules: the calling lane must be in `mask`, and
//! every lane named in `mask` must execute the same collective (otherwise: undefined
//! behaviour/hang, exactly as with the raw intrinsics).
#pragma once

#include <cstdint>
#include <cstdio>
#include <type_traits>

#include <cuda/atomic>

#include "toga/config.hpp"
#include "toga/platform.hpp"

namespace toga::cuda {

namespace detail {

//! The libcu++ memory order for a toga order (compile time).
template <memory_order O>
inline constexpr ::cuda::std::memory_order cuda_order =
    O == memory_order::relaxed   ? ::cuda::std::memory_order_relaxed
    : O == memory_order::acquire ? ::cuda::std::memory_order_acquire
    : O == memory_order::release ? ::cuda::std::memory_order_release
    : O == memory_order::acq_rel ? ::cuda::std::memory_order_acq_rel
                                 : ::cuda::std::memory_order_seq_cst;

//! The libcu++ thread scope for a toga scope (compile time).
template <scope S>
inline constexpr ::cuda::thread_scope cuda_scope =
    S == scope::block ? ::cuda::thread_scope_block : S == scope::device ? ::cuda::thread_scope_device : ::cuda::thread_scope_system;

//! `toga::failure_order(O)` as a namespace-scope constant. nvcc (13.0) rejects a call of the
//! constexpr __host__ function `failure_order` inside a __device__ function even where it is
//! a template argument (it asks for --expt-relaxed-constexpr); a variable template's
//! initialiser is not in device code, so the call is fine here.
template <memory_order O>
inline constexpr memory_order failure_order_v = failure_order(O);

//! The atomic reference type for word type T under toga scope S.
template <class T, scope S>
using atomic_ref = ::cuda::atomic_ref<T, cuda_scope<S>>;

//! The word types the platform supports atomics on.
template <class T>
concept word = std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::uint64_t>;

//! Valid orders for a load / a store (C++ and libcu++ rules: a load has no release part, a
//! store no acquire part; libcu++ asserts at run time on the others, we reject them at
//! compile time).
template <memory_order O>
inline constexpr bool load_order_ok = O != memory_order::release && O != memory_order::acq_rel;
template <memory_order O>
inline constexpr bool store_order_ok = O != memory_order::acquire && O != memory_order::acq_rel;

}  // namespace detail

//! The CUDA platform. Stateless; all members are static device functions.
//!
//! Atomic operations deduce the word type `T` (std::uint32_t or std::uint64_t) from the
//! pointer only; value arguments convert to `T` (so `fetch_add(p64, 1u, ...)` works).
//! Return types are spelled out (never `auto`), so that checking `toga::Platform` does not
//! instantiate the bodies.
struct platform {
  //! Device code never throws: core functions declared TOGA_NOEXCEPT(P) are `noexcept`.
  static constexpr bool noexcept_ops = true;

  // ---------------------------------------------------------------------------------------
  // Atomics
  // ---------------------------------------------------------------------------------------

  //! Atomic load: `atomic_ref<T, scope>(*p).load(order)`. Order must be relaxed, acquire or
  //! seq_cst (checked at compile time).
  template <detail::word T, memory_order O, scope S>
  static TOGA_DEVICE TOGA_FORCEINLINE T load(T* p, order_tag<O>, scope_tag<S>) noexcept {
    static_assert(detail::load_order_ok<O>, "toga::cuda::platform::load: release/acq_rel "
                                            "is not a valid order for a load");
    return detail::atomic_ref<T, S>(*p).load(detail::cuda_order<O>);
  }

  //! Atomic store: `atomic_ref<T, scope>(*p).store(v, order)`. Order must be relaxed,
  //! release or seq_cst (checked at compile time).
  template <detail::word T, memory_order O, scope S>
  static TOGA_DEVICE TOGA_FORCEINLINE void store(T* p, std::type_identity_t<T> v, order_tag<O>,
                                                 scope_tag<S>) noexcept {
    static_assert(detail::store_order_ok<O>, "toga::cuda::platform::store: acquire/acq_rel "
                                             "is not a valid order for a store");
    detail::atomic_ref<T, S>(*p).store(v, detail::cuda_order<O>);
  }

  //! Atomic exchange; returns the previous value.
  template <detail::word T, memory_order O, scope S>
  static TOGA_DEVICE TOGA_FORCEINLINE T exchange(T* p, std::type_identity_t<T> v, order_tag<O>,
                                                 scope_tag<S>) noexcept {
    return detail::atomic_ref<T, S>(*p).exchange(v, detail::cuda_order<O>);
  }

  //! Strong compare-exchange (`compare_exchange_strong`, i.e. atom.cas: never fails
  //! spuriously). Success order O, failure order `toga::failure_order(O)`. On failure
  //! `expected` receives the current value. Returns whether the swap happened.
  template <detail::word T, memory_order O, scope S>
  static TOGA_DEVICE TOGA_FORCEINLINE bool compare_exchange(T* p, T& expected,
                                                            std::type_identity_t<T> desired,
                                                            order_tag<O>, scope_tag<S>) noexcept {
    return detail::atomic_ref<T, S>(*p).compare_exchange_strong(
        expected, desired, detail::cuda_order<O>, detail::cuda_order<detail::failure_order_v<O>>);
  }

  //! Atomic `*p += v` (wrapping); returns the previous value.
  template <detail::word T, memory_order O, scope S>
  static TOGA_DEVICE TOGA_FORCEINLINE T fetch_add(T* p, std::type_identity_t<T> v, order_tag<O>,
                                                  scope_tag<S>) noexcept {
    return detail::atomic_ref<T, S>(*p).fetch_add(v, detail::cuda_order<O>);
  }

  //! Atomic `*p -= v` (wrapping); returns the previous value.
  template <detail::word T, memory_order O, scope S>
  static TOGA_DEVICE TOGA_FORCEINLINE T fetch_sub(T* p, std::type_identity_t<T> v, order_tag<O>,
                                                  scope_tag<S>) noexcept {
    return detail::atomic_ref<T, S>(*p).fetch_sub(v, detail::cuda_order<O>);
  }

  //! Atomic `*p &= v`; returns the previous value.
  template <detail::word T, memory_order O, scope S>
  static TOGA_DEVICE TOGA_FORCEINLINE T fetch_and(T* p, std::type_identity_t<T> v, order_tag<O>,
                                                  scope_tag<S>) noexcept {
    return detail::atomic_ref<T, S>(*p).fetch_and(v, detail::cuda_order<O>);
  }

  //! Atomic `*p |= v`; returns the previous value.
  template <detail::word T, memory_order O, scope S>
  static TOGA_DEVICE TOGA_FORCEINLINE T fetch_or(T* p, std::type_identity_t<T> v, order_tag<O>,
                                                 scope_tag<S>) noexcept {
    return detail::atomic_ref<T, S>(*p).fetch_or(v, detail::cuda_order<O>);
  }

  //! Atomic `*p = max(*p, v)` (unsigned); returns the previous value (`atom.max`; ptxas turns
  //! it into a fire-and-forget `RED.MAX` when the result is unused).
  template <detail::word T, memory_order O, scope S>
  static TOGA_DEVICE TOGA_FORCEINLINE T fetch_max(T* p, std::type_identity_t<T> v, order_tag<O>,
                                                  scope_tag<S>) noexcept {
    return detail::atomic_ref<T, S>(*p).fetch_max(v, detail::cuda_order<O>);
  }

  //! Fence: `cuda::atomic_thread_fence(order, scope)`. On sm_70+ that is `fence.sc.{cta,gpu}`
  //! for seq_cst, `fence.acq_rel.{cta,gpu}` for acquire/release/acq_rel, nothing for relaxed.
  template <memory_order O, scope S>
  static TOGA_DEVICE TOGA_FORCEINLINE void fence(order_tag<O>, scope_tag<S>) noexcept {
    ::cuda::atomic_thread_fence(detail::cuda_order<O>, detail::cuda_scope<S>);
  }

  // ---------------------------------------------------------------------------------------
  // Identity. All 0-based, all `unsigned`. Linear indices follow CUDA's own linearisation
  // (x fastest, then y, then z), the one that forms warps from a block's threads.
  // ---------------------------------------------------------------------------------------

  //! Lane of the calling thread in its warp, [0, 32): PTX `%laneid`.
  static TOGA_DEVICE TOGA_FORCEINLINE unsigned lane_id() noexcept {
    unsigned r;
    asm("mov.u32 %0, %%laneid;" : "=r"(r));
    return r;
  }

  //! Warp index within the block: `thread_id() / 32` (not PTX `%warpid`, which is a
  //! hardware slot that may change during execution).
  static TOGA_DEVICE TOGA_FORCEINLINE unsigned warp_id() noexcept {
    return thread_id() / warp_size;
  }

  //! The warp's hardware slot on its SM: PTX `%warpid` (`volatile`: it may change when the warp
  //! is preempted and resumed elsewhere). A hint for spreading warps over per-SM structures:
  //! warps resident on one SM at once have different slots, and the blocks that follow one
  //! another on an SM reuse them, so each slot sees about the same number of warps per launch.
  static TOGA_DEVICE TOGA_FORCEINLINE unsigned warp_slot() noexcept {
    unsigned r;
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(r));
    return r;
  }

  //! Linear thread index within the block: `x + y*dim.x + z*dim.x*dim.y`.
  static TOGA_DEVICE TOGA_FORCEINLINE unsigned thread_id() noexcept {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  }

  //! Linear block index within the grid: `x + y*grid.x + z*grid.x*grid.y`. Assumes the grid
  //! has fewer than 2^32 blocks (the product wraps otherwise).
  static TOGA_DEVICE TOGA_FORCEINLINE unsigned block_id() noexcept {
    return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  }

  //! Threads per block: `blockDim.x * blockDim.y * blockDim.z` (at most 1024).
  static TOGA_DEVICE TOGA_FORCEINLINE unsigned block_dim() noexcept {
    return blockDim.x * blockDim.y * blockDim.z;
  }

  //! Blocks in the grid: `gridDim.x * gridDim.y * gridDim.z` (same 2^32 assumption as
  //! block_id()).
  static TOGA_DEVICE TOGA_FORCEINLINE unsigned grid_dim() noexcept {
    return gridDim.x * gridDim.y * gridDim.z;
  }

  //! SM the calling thread runs on: PTX `%smid`, in [0, num_sms()). `volatile`: the PTX
  //! manual allows the value to change during execution (e.g. after preemption), so it is
  //! re-read each call and is only a hint (e.g. for choosing a per-SM arena).
  static TOGA_DEVICE TOGA_FORCEINLINE unsigned sm_id() noexcept {
    unsigned r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
  }

  //! Number of SM identifiers: PTX `%nsmid`. SM ids need not be contiguous, so this may be
  //! larger than `cudaDevAttrMultiProcessorCount`; every sm_id() is below it. Size per-SM
  //! tables with this value, not with the SM count.
  static TOGA_DEVICE TOGA_FORCEINLINE unsigned num_sms() noexcept {
    unsigned r;
    asm("mov.u32 %0, %%nsmid;" : "=r"(r));
    return r;
  }

  // ---------------------------------------------------------------------------------------
  // Warp collectives (Volta+ rules: the caller is in `mask`; the call waits for exactly the
  // lanes named in it).
  // ---------------------------------------------------------------------------------------

  //! Lanes currently executing together with the caller: `__activemask()`. Not a
  //! synchronisation; the result is only a snapshot.
  static TOGA_DEVICE TOGA_FORCEINLINE std::uint32_t activemask() noexcept {
    return __activemask();
  }

  //! `__ballot_sync(mask, pred)`: bit i set iff lane i is in `mask` and its `pred` is true.
  static TOGA_DEVICE TOGA_FORCEINLINE std::uint32_t ballot(std::uint32_t mask, bool pred) noexcept {
    return __ballot_sync(mask, pred);
  }

  //! `__shfl_sync(mask, v, src)` (width 32): the value `v` of lane `src`, which must be in
  //! `mask`.
  static TOGA_DEVICE TOGA_FORCEINLINE std::uint32_t shfl(std::uint32_t mask, std::uint32_t v,
                                                         int src) noexcept {
    return __shfl_sync(mask, v, src);
  }

  //! 64-bit shuffle: the native `unsigned long long` overload of `__shfl_sync` (two 32-bit
  //! SHFL instructions).
  static TOGA_DEVICE TOGA_FORCEINLINE std::uint64_t shfl(std::uint32_t mask, std::uint64_t v,
                                                         int src) noexcept {
    return static_cast<std::uint64_t>(
        __shfl_sync(mask, static_cast<unsigned long long>(v), src));
  }

  //! `__match_any_sync(mask, key)`: the lanes of `mask` whose key equals the caller's.
  static TOGA_DEVICE TOGA_FORCEINLINE std::uint32_t match_any(std::uint32_t mask,
                                                              std::uint32_t key) noexcept {
    return __match_any_sync(mask, key);
  }

  //! 64-bit `__match_any_sync` (compares all 64 bits).
  static TOGA_DEVICE TOGA_FORCEINLINE std::uint32_t match_any(std::uint32_t mask,
                                                              std::uint64_t key) noexcept {
    return __match_any_sync(mask, static_cast<unsigned long long>(key));
  }

  //! `__syncwarp(mask)`: waits for the lanes of `mask`; also orders their memory accesses
  //! (as a block-scope fence among them).
  static TOGA_DEVICE TOGA_FORCEINLINE void syncwarp(std::uint32_t mask) noexcept {
    __syncwarp(mask);
  }

  //! `__reduce_or_sync(mask, v)` on sm_80+ (one REDUX instruction); a shuffle loop over the
  //! lanes of `mask` on older parts. Every lane of `mask` gets the OR of all their values.
  static TOGA_DEVICE TOGA_FORCEINLINE std::uint32_t reduce_or(std::uint32_t mask, std::uint32_t v) noexcept {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_or_sync(mask, v);
#else
    std::uint32_t r = 0;
    for (std::uint32_t m = mask; m; m &= m - 1) r |= __shfl_sync(mask, v, __ffs(static_cast<int>(m)) - 1);
    return r;
#endif
  }

  //! Lanes below the caller: PTX `%lanemask_lt` (== `(1u << lane_id()) - 1`).
  static TOGA_DEVICE TOGA_FORCEINLINE std::uint32_t lanemask_lt() noexcept {
    std::uint32_t r;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(r));
    return r;
  }

  // ---------------------------------------------------------------------------------------
  // Progress and failure
  // ---------------------------------------------------------------------------------------

  //! Fault sites (toga/fault.hpp) compile to nothing on the GPU.
  static TOGA_DEVICE TOGA_FORCEINLINE constexpr bool inject(fault_site) noexcept { return false; }
  static TOGA_DEVICE TOGA_FORCEINLINE void poison(void*, std::uint64_t) noexcept {}

  //! Maximum backoff sleep, in nanoseconds (256; the build option TOGA_CUDA_BACKOFF_CAP_NS
  //! overrides it). 2048 until 2026-11-27: on an H100, 256 made warm T1 allocation 1.1-2.6x
  //! faster (8 KiB 1.21 -> 0.46 ms at 2^20 threads) and first kernels on a fresh heap 1.2-1.9x,
  //! with churn and frees unchanged: waiters slept past the units they waited for (docs/devlog.md,
  //! "the backoff cap").
#ifdef TOGA_CUDA_BACKOFF_CAP_NS
  static constexpr unsigned backoff_cap_ns = TOGA_CUDA_BACKOFF_CAP_NS;
#else
  static constexpr unsigned backoff_cap_ns = 256;
#endif
  //! Backoff growth per attempt, in nanoseconds.
  static constexpr unsigned backoff_step_ns = 32;

  //! Sleeps `min(32 * (attempt + 1), backoff_cap_ns)` ns with `__nanosleep` (linear growth,
  //! capped at 256 ns from attempt 7 on). `__nanosleep` only guarantees a duration in [0, 2t], so
  //! this is a scheduling hint that frees issue slots for the lanes being waited on, not a
  //! timing guarantee. Per-thread; no shared state.
  static TOGA_DEVICE TOGA_FORCEINLINE void backoff(unsigned attempt) noexcept {
    const unsigned ns = attempt >= backoff_cap_ns / backoff_step_ns - 1
                            ? backoff_cap_ns
                            : backoff_step_ns * (attempt + 1);
    __nanosleep(ns);
  }
  //! Nanoseconds from PTX `%globaltimer` (a monotonic clock of the GPU; its resolution is about
  //! a microsecond on current GPUs). Bounded waits only.
  static TOGA_DEVICE TOGA_FORCEINLINE std::uint64_t clock_ns() noexcept {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }


  //! An invariant of the core failed: prints `toga: <what> (block B, thread T)` with device
  //! `printf`, then `__trap()`s, which aborts the kernel; the host sees
  //! `cudaErrorLaunchFailure` (the context is unusable afterwards). `what` must point to a
  //! string readable from the device (a literal is).
  static TOGA_DEVICE TOGA_FORCEINLINE void fail(const char* what) noexcept {
    printf("toga: %s (block %u, thread %u)\n", what, block_id(), thread_id());
    __trap();
  }
};

}  // namespace toga::cuda

// nvcc checks the concept in both passes (host and device). In the requires-expressions the
// calls to the __device__ members are unevaluated operands, for which nvcc does not apply
// its host/device call-space check, so the plain static_assert is accepted by the host pass
// too (checked with nvcc 13.0, -std=c++20; the g++ host compiler sees the same
// declarations). Nothing needs guarding.
static_assert(toga::Platform<toga::cuda::platform>);
