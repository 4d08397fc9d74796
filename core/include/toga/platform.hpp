//! @file toga/platform.hpp
//! The Platform contract: everything toga's allocator core may use from a machine, and
//! nothing else.
//!
//! The core (`toga/...` headers other than backends) is a set of templates over a type `P`
//! that models the `toga::Platform` concept below. Three backends implement it:
//!
//!  * `toga::cuda::platform` (backends/cuda): `cuda::atomic_ref`, `__threadfence*`, `%smid`,
//!    warp intrinsics, `__nanosleep`; runs inside real kernels.
//!  * `toga::sim::platform` (backends/sim): every operation is a *scheduling point* of the
//!    fiber simulator, which may switch to another simulated lane before it; warp intrinsics
//!    follow CUDA's rules and violations become verdicts.
//!  * `toga::cpu::platform` (backends/cpu): `std::atomic_ref` on native threads, for stress
//!    tests under ThreadSanitizer; each thread is a warp of one lane.
//!
//! Rule for core code: **shared metadata is touched only through these operations.** No
//! plain loads or stores of shared words, no `std::atomic`, no `thread_local`, no clocks. This
//! is what makes the simulator's scheduling points complete: every interleaving the GPU can
//! produce at the level of these operations is one the simulator can produce.
//!
//! ## Operations (all static member functions of P)
//!
//! Atomics on `std::uint32_t` and `std::uint64_t` (T below). `o` is a memory-order tag
//! (`toga::relaxed`, `acquire`, `release`, `acq_rel`, `seq_cst`) and `s` a scope tag
//! (`toga::block_scope`, `device_scope`, `system_scope`), both compile-time values. System scope
//! is for words the host (or another device) reads or writes while kernels run: the growth
//! service's mailbox (toga/growth_service.hpp) in mapped pinned memory.
//!   - `T load(T* p, o, s)`, `void store(T* p, T v, o, s)`, `T exchange(T* p, T v, o, s)`
//!   - `bool compare_exchange(T* p, T& expected, T desired, o, s)`: **strong** (CUDA's
//!     atomicCAS never fails spuriously). On failure `expected` receives the current value.
//!     The failure order is the success order with its release part removed.
//!   - `T fetch_add / fetch_sub / fetch_and / fetch_or (T* p, T v, o, s)`: return the old value.
//!   - `T fetch_max(T* p, T v, o, s)`: `*p = max(*p, v)` (unsigned); returns the old value. One
//!     RMW on CUDA (`atom.max`); with the result unused it is a fire-and-forget reduction.
//!   - `void fence(o, s)`
//! Identity (CUDA's meaning; all ids 0-based):
//!   - `lane_id()` in [0,32), `warp_id()` (warp index within the block), `thread_id()` (linear
//!     thread index within the block), `block_id()` (linear block index in the grid),
//!     `block_dim()` (threads per block), `grid_dim()` (blocks), `sm_id()` in [0, num_sms()).
//!   - `warp_slot()`: a hint, the slot the calling warp occupies on its SM among the warps
//!     resident there at once (CUDA: PTX `%warpid`, which may change if the warp is preempted),
//!     the same in every lane of a converged warp. Only to spread warps over per-SM structures
//!     (UAlloc's pin slots); correctness never depends on it.
//! Warp collectives, with explicit 32-bit lane masks (Volta+ rules: the caller must be in the
//! mask; the call waits for exactly the lanes named in it):
//!   - `activemask()`, `ballot(mask, bool)`, `shfl(mask, T value, src_lane)` for 32- and 64-bit
//!     T, `match_any(mask, T key)`, `syncwarp(mask)`, `lanemask_lt()`.
//!   - `reduce_or(mask, std::uint32_t v)`: the bitwise OR of `v` over the lanes of `mask`, in
//!     every one of them (`__reduce_or_sync`; one REDUX instruction on sm_80+).
//! Fault injection (toga/fault.hpp):
//!   - `bool inject(fault_site s)`: a named fault site; false (and nothing else) on CUDA and
//!     native threads, where it compiles away; the simulator may stall the lane here or, at a
//!     failure site, return true.
//!   - `void poison(void* p, std::uint64_t bytes)`: memory the core just gave back; a test
//!     platform may overwrite it. No-op on CUDA and native threads.
//! Progress and failure:
//!   - `backoff(attempt)`: **every spin loop must call it** once per iteration (`attempt`
//!     counts from 0). CUDA sleeps; the simulator yields and may switch lanes.
//!   - `std::uint64_t clock_ns()`: a monotonic clock in nanoseconds, for bounded waits only
//!     (never for a decision that correctness depends on). CUDA's `%globaltimer`; native
//!     threads' steady_clock; the simulator's scheduling points so far x 100 ns (deterministic).
//!   - `fail(const char* what)`: an assertion failed inside the core. CUDA traps; the
//!     simulator turns it into a verdict; native threads abort with the message.
//!   - `static constexpr bool noexcept_ops`: see TOGA_NOEXCEPT in toga/config.hpp.
#pragma once

#include <concepts>
#include <cstdint>

#include "toga/config.hpp"
#include "toga/fault.hpp"

namespace toga {

//! Memory orders, a closed set (C++'s names, without consume).
enum class memory_order : std::uint8_t { relaxed, acquire, release, acq_rel, seq_cst };

//! Scopes, a closed set: the threads of one block, all threads of the device, or every thread
//! of the system (the host and other devices included).
enum class scope : std::uint8_t { block, device, system };

//! Compile-time tag for a memory order, passed by value: `P::load(p, toga::acquire, ...)`.
template <memory_order O>
struct order_tag {
  static constexpr memory_order value = O;
};
//! Compile-time tag for a scope.
template <scope S>
struct scope_tag {
  static constexpr scope value = S;
};

inline constexpr order_tag<memory_order::relaxed> relaxed{};
inline constexpr order_tag<memory_order::acquire> acquire{};
inline constexpr order_tag<memory_order::release> release{};
inline constexpr order_tag<memory_order::acq_rel> acq_rel{};
inline constexpr order_tag<memory_order::seq_cst> seq_cst{};
inline constexpr scope_tag<scope::block> block_scope{};
inline constexpr scope_tag<scope::device> device_scope{};
inline constexpr scope_tag<scope::system> system_scope{};

//! Lanes in a warp, on every platform.
inline constexpr unsigned warp_size = 32;
//! Mask with every lane of a warp.
inline constexpr std::uint32_t full_mask = 0xffffffffu;

//! The order a failed compare-exchange uses, given the success order (C++ rules: the failure
//! order may not contain a release part).
constexpr memory_order failure_order(memory_order o) {
  return o == memory_order::acq_rel ? memory_order::acquire
         : o == memory_order::release ? memory_order::relaxed
                                      : o;
}

constexpr const char* to_string(memory_order o) {
  switch (o) {
    case memory_order::relaxed: return "relaxed";
    case memory_order::acquire: return "acquire";
    case memory_order::release: return "release";
    case memory_order::acq_rel: return "acq_rel";
    case memory_order::seq_cst: return "seq_cst";
  }
  return "?";
}
constexpr const char* to_string(scope s) { return s == scope::block ? "block" : s == scope::device ? "device" : "system"; }

namespace detail {
// Atomics of one word type T, checked for one order and one scope; every order and scope tag
// is a distinct type, so the concept below instantiates each combination the core may name.
template <class P, class T, class O, class S>
concept platform_atomics_for = requires(T* p, T v, T& expected, O o, S s) {
  { P::load(p, o, s) } -> std::same_as<T>;
  { P::store(p, v, o, s) } -> std::same_as<void>;
  { P::exchange(p, v, o, s) } -> std::same_as<T>;
  { P::compare_exchange(p, expected, v, o, s) } -> std::same_as<bool>;
  { P::fetch_add(p, v, o, s) } -> std::same_as<T>;
  { P::fetch_sub(p, v, o, s) } -> std::same_as<T>;
  { P::fetch_and(p, v, o, s) } -> std::same_as<T>;
  { P::fetch_or(p, v, o, s) } -> std::same_as<T>;
  { P::fetch_max(p, v, o, s) } -> std::same_as<T>;
  { P::fence(o, s) } -> std::same_as<void>;
};

template <class P, class T, class S>
concept platform_atomics_all_orders =
    platform_atomics_for<P, T, order_tag<memory_order::relaxed>, S> &&
    platform_atomics_for<P, T, order_tag<memory_order::acquire>, S> &&
    platform_atomics_for<P, T, order_tag<memory_order::release>, S> &&
    platform_atomics_for<P, T, order_tag<memory_order::acq_rel>, S> &&
    platform_atomics_for<P, T, order_tag<memory_order::seq_cst>, S>;

template <class P, class T>
concept platform_atomics = platform_atomics_all_orders<P, T, scope_tag<scope::block>> &&
                           platform_atomics_all_orders<P, T, scope_tag<scope::device>> &&
                           platform_atomics_all_orders<P, T, scope_tag<scope::system>>;
}  // namespace detail

//! The Platform concept. See the file comment for the meaning of each operation.
template <class P>
concept Platform =
    detail::platform_atomics<P, std::uint32_t> && detail::platform_atomics<P, std::uint64_t> &&
    requires(std::uint32_t mask, std::uint32_t v32, std::uint64_t v64, bool pred,
             unsigned attempt, int src, const char* what, fault_site site, void* mem) {
      { P::noexcept_ops } -> std::convertible_to<bool>;
      // identity
      { P::lane_id() } -> std::same_as<unsigned>;
      { P::warp_id() } -> std::same_as<unsigned>;
      { P::thread_id() } -> std::same_as<unsigned>;
      { P::block_id() } -> std::same_as<unsigned>;
      { P::block_dim() } -> std::same_as<unsigned>;
      { P::grid_dim() } -> std::same_as<unsigned>;
      { P::sm_id() } -> std::same_as<unsigned>;
      { P::num_sms() } -> std::same_as<unsigned>;
      { P::warp_slot() } -> std::same_as<unsigned>;
      // warp collectives
      { P::activemask() } -> std::same_as<std::uint32_t>;
      { P::ballot(mask, pred) } -> std::same_as<std::uint32_t>;
      { P::shfl(mask, v32, src) } -> std::same_as<std::uint32_t>;
      { P::shfl(mask, v64, src) } -> std::same_as<std::uint64_t>;
      { P::match_any(mask, v32) } -> std::same_as<std::uint32_t>;
      { P::match_any(mask, v64) } -> std::same_as<std::uint32_t>;
      { P::syncwarp(mask) } -> std::same_as<void>;
      { P::reduce_or(mask, v32) } -> std::same_as<std::uint32_t>;
      { P::lanemask_lt() } -> std::same_as<std::uint32_t>;
      // fault injection
      { P::inject(site) } -> std::same_as<bool>;
      { P::poison(mem, v64) } -> std::same_as<void>;
      // progress and failure
      { P::backoff(attempt) } -> std::same_as<void>;
      { P::clock_ns() } -> std::same_as<std::uint64_t>;
      { P::fail(what) } -> std::same_as<void>;
    };

//! Asserts a core invariant through the platform's failure hook. Kept in every build: the
//! checks that cost more than a comparison belong behind TOGA_CHECKED instead.
#define TOGA_REQUIRE(P, cond, what)     \
  do {                                  \
    if (!(cond)) P::fail(what);         \
  } while (0)

}  // namespace toga
