//! @file toga/cpu/platform.hpp
//! `toga::cpu::platform`: the `toga::Platform` contract (toga/platform.hpp) on native OS
//! threads, for stress tests of the core under ThreadSanitizer; and `toga::cpu::launch`, which
//! runs a body on N threads shaped as a CUDA grid.
//!
//! Header only; needs C++20 and the platform's thread library (`-pthread`). Unlike the
//! simulator it uses no fibers, so it is the place for TSan and ASan (docs: Boost.Context's
//! fcontext confuses both).
//!
//! ## Mapping
//!  * Atomics: `std::atomic_ref<T>` with the `std::memory_order` of the order tag, chosen at
//!    compile time. The scope tag is accepted and ignored: all threads of the process form one
//!    "device", so `block_scope` is simply executed as `device_scope` (stronger, hence a legal
//!    implementation). `compare_exchange` is `compare_exchange_strong` with failure order
//!    `toga::failure_order(O)`. `fence` is `std::atomic_thread_fence(order)`.
//!  * Identity: a `thread_local` record written by `toga::cpu::launch` before the body starts.
//!    `sm_id() == block_id() % num_sms()`.
//!  * Warps: **every OS thread is a warp of one lane** (see below).
//!  * `backoff`: `std::this_thread::yield()`, then short sleeps; `fail`: message on stderr,
//!    then `std::abort()`.
//!
//! ## Why a warp of one lane
//! The core may not assume that the lanes of a warp execute together: under independent thread
//! scheduling (sm_70+) any subset of a warp may reach a given point, and core code obtains its
//! group with `activemask()` / `match_any()` and then uses collectives with exactly that mask
//! (CUDA's coalesced groups). A group of one lane is a legal outcome on a GPU (e.g. a warp whose
//! other lanes diverged, exited or were never launched), so running every thread as a singleton
//! warp executes a subset of the real behaviours, never an impossible one: `activemask()` is 1,
//! `ballot(1, p)` is `p`, `shfl(1, v, 0)` is `v`, `match_any(1, k)` is 1, `lanemask_lt()` is 0
//! and `syncwarp(1)` has nothing to wait for. Consequences for core code: a warp holds one
//! thread, so `warp_id() == thread_id()` and a block of B threads has B warps (use the
//! platform's `warp_id()`, never `thread_id() / warp_size`). Collectives whose mask names any
//! lane other than lane 0 would wait forever on a GPU for lanes that do not exist; here they
//! `fail()` instead, as does `shfl` from a source lane other than 0.
//!
//! ## ThreadSanitizer
//! TSan models the acquire/release semantics of atomic operations, but it does **not** model
//! `std::atomic_thread_fence` (g++ says so with `-Wtsan` wherever `fence` is instantiated): an
//! ordering established only through fences and relaxed atomics is reported as a data race (a
//! false positive) if plain memory depends on it. Core code synchronising plain data should
//! put the acquire/release on the atomic operation itself.
//!
//! ## Thread-safety
//! Atomics are safe between any threads; the word must be naturally aligned (checked: a
//! misaligned word is a `fail()`). Identity functions read the calling thread's own record and
//! are always safe; they `fail()` on a thread not started by `toga::cpu::launch` (except
//! `lane_id()`, which is 0 on any thread). Collectives involve only the caller.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__linux__)
#include <unistd.h>  // gettid (glibc 2.30+), the id TSan reports and gdb shows
#endif

#include "toga/config.hpp"
#include "toga/platform.hpp"

namespace toga::cpu {

namespace detail {

//! The std::memory_order for a toga order (compile time).
template <memory_order O>
inline constexpr std::memory_order std_order =
    O == memory_order::relaxed   ? std::memory_order_relaxed
    : O == memory_order::acquire ? std::memory_order_acquire
    : O == memory_order::release ? std::memory_order_release
    : O == memory_order::acq_rel ? std::memory_order_acq_rel
                                 : std::memory_order_seq_cst;

//! The word types the platform supports atomics on.
template <class T>
concept word = std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::uint64_t>;

//! Valid orders for a load / a store (C++ rules: a load has no release part, a store no
//! acquire part; C++ makes the others undefined, we reject them at compile time).
template <memory_order O>
inline constexpr bool load_order_ok = O != memory_order::release && O != memory_order::acq_rel;
template <memory_order O>
inline constexpr bool store_order_ok = O != memory_order::acquire && O != memory_order::acq_rel;

static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free &&
                  std::atomic_ref<std::uint64_t>::is_always_lock_free,
              "toga::cpu::platform needs lock-free 32- and 64-bit atomics");

//! Identity of the calling thread, written by `launch` before the body runs. All 0-based.
struct thread_record {
  bool launched = false;   //!< set only on threads started by toga::cpu::launch
  unsigned global = 0;     //!< block * block_dim + thread: the index among all launched threads
  unsigned thread = 0;     //!< linear thread index within the block
  unsigned block = 0;      //!< block index within the grid
  unsigned block_dim = 0;  //!< threads per block
  unsigned grid_dim = 0;   //!< blocks
  unsigned num_sms = 0;    //!< simulated SMs; blocks are placed round-robin
};

//! The calling thread's record (one per OS thread; default: not launched).
inline thread_local thread_record current{};

//! OS-level id of the calling thread, for messages (the kernel tid on Linux).
inline unsigned long long os_thread_id() noexcept {
#if defined(__linux__)
  return static_cast<unsigned long long>(::gettid());
#else
  return static_cast<unsigned long long>(std::hash<std::thread::id>{}(std::this_thread::get_id()));
#endif
}

}  // namespace detail

//! The native-threads platform. Stateless; all members are static.
//!
//! Atomic operations deduce the word type `T` (std::uint32_t or std::uint64_t) from the
//! pointer only; value arguments convert to `T` (so `fetch_add(p64, 1u, ...)` works). Return
//! types are spelled out (never `auto`), so that checking `toga::Platform` does not
//! instantiate the bodies.
struct platform {
  //! Nothing here throws; a failed check aborts the process. Core functions declared
  //! TOGA_NOEXCEPT(P) are `noexcept`.
  static constexpr bool noexcept_ops = true;

  // ---------------------------------------------------------------------------------------
  // Atomics. Scope tags are accepted and ignored (one device: block scope runs as device
  // scope, which is stronger).
  // ---------------------------------------------------------------------------------------

  //! Atomic load: `std::atomic_ref<T>(*p).load(order)`. Order must be relaxed, acquire or
  //! seq_cst (checked at compile time).
  template <detail::word T, memory_order O, scope S>
  static T load(T* p, order_tag<O>, scope_tag<S>) noexcept {
    static_assert(detail::load_order_ok<O>, "toga::cpu::platform::load: release/acq_rel "
                                            "is not a valid order for a load");
    return ref(p).load(detail::std_order<O>);
  }

  //! Atomic store: `std::atomic_ref<T>(*p).store(v, order)`. Order must be relaxed, release
  //! or seq_cst (checked at compile time).
  template <detail::word T, memory_order O, scope S>
  static void store(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>) noexcept {
    static_assert(detail::store_order_ok<O>, "toga::cpu::platform::store: acquire/acq_rel "
                                             "is not a valid order for a store");
    ref(p).store(v, detail::std_order<O>);
  }

  //! Atomic exchange; returns the previous value.
  template <detail::word T, memory_order O, scope S>
  static T exchange(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>) noexcept {
    return ref(p).exchange(v, detail::std_order<O>);
  }

  //! Strong compare-exchange (`compare_exchange_strong`: never fails spuriously, like CUDA's
  //! atom.cas). Success order O, failure order `toga::failure_order(O)`. On failure `expected`
  //! receives the current value. Returns whether the swap happened.
  template <detail::word T, memory_order O, scope S>
  static bool compare_exchange(T* p, T& expected, std::type_identity_t<T> desired, order_tag<O>,
                               scope_tag<S>) noexcept {
    return ref(p).compare_exchange_strong(expected, desired, detail::std_order<O>,
                                          detail::std_order<failure_order(O)>);
  }

  //! Atomic `*p += v` (wrapping); returns the previous value.
  template <detail::word T, memory_order O, scope S>
  static T fetch_add(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>) noexcept {
    return ref(p).fetch_add(v, detail::std_order<O>);
  }

  //! Atomic `*p -= v` (wrapping); returns the previous value.
  template <detail::word T, memory_order O, scope S>
  static T fetch_sub(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>) noexcept {
    return ref(p).fetch_sub(v, detail::std_order<O>);
  }

  //! Atomic `*p &= v`; returns the previous value.
  template <detail::word T, memory_order O, scope S>
  static T fetch_and(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>) noexcept {
    return ref(p).fetch_and(v, detail::std_order<O>);
  }

  //! Atomic `*p |= v`; returns the previous value.
  template <detail::word T, memory_order O, scope S>
  static T fetch_or(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>) noexcept {
    return ref(p).fetch_or(v, detail::std_order<O>);
  }

  //! Atomic `*p = max(*p, v)`; returns the previous value. C++20's atomic_ref has no
  //! fetch_max: a compare-exchange loop (lock-free; at most one retry per concurrent change).
  template <detail::word T, memory_order O, scope S>
  static T fetch_max(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>) noexcept {
    std::atomic_ref<T> r = ref(p);
    T cur = r.load(std::memory_order_relaxed);
    while (cur < v && !r.compare_exchange_weak(cur, v, detail::std_order<O>, std::memory_order_relaxed)) {
    }
    return cur;
  }

  //! Fence: `std::atomic_thread_fence(order)` (relaxed: no effect). Not modelled by TSan; see
  //! the file comment.
  template <memory_order O, scope S>
  static void fence(order_tag<O>, scope_tag<S>) noexcept {
    std::atomic_thread_fence(detail::std_order<O>);
  }

  // ---------------------------------------------------------------------------------------
  // Identity, from the record written by toga::cpu::launch. All 0-based, all `unsigned`.
  // ---------------------------------------------------------------------------------------

  //! Always 0: each thread is lane 0 of its own warp.
  static unsigned lane_id() noexcept { return 0; }
  //! Warp index within the block; a warp is one thread, so this is `thread_id()`.
  static unsigned warp_id() noexcept { return self().thread; }
  //! Linear thread index within the block.
  static unsigned thread_id() noexcept { return self().thread; }
  //! Block index within the grid.
  static unsigned block_id() noexcept { return self().block; }
  //! A distinct value per thread of a launch (`block_id() * 8 + thread_id()`, the mapping the
  //! pin slots used before `warp_slot()`): native threads have no hardware warp slots.
  static unsigned warp_slot() noexcept { return self().block * 8u + self().thread; }
  //! Threads per block (the launch's `threads_per_block`).
  static unsigned block_dim() noexcept { return self().block_dim; }
  //! Blocks in the grid (`threads / threads_per_block`).
  static unsigned grid_dim() noexcept { return self().grid_dim; }
  //! Simulated SM of the caller: `block_id() % num_sms()` (fixed for the thread's lifetime).
  static unsigned sm_id() noexcept {
    const detail::thread_record& r = self();
    return r.block % r.num_sms;
  }
  //! Simulated SMs (the launch's `sms`).
  static unsigned num_sms() noexcept { return self().num_sms; }

  // ---------------------------------------------------------------------------------------
  // Warp collectives of a one-lane warp. The only valid mask is 1 (the caller, lane 0); any
  // other lane named in a mask does not exist, so the call would never complete on a GPU.
  // ---------------------------------------------------------------------------------------

  //! The lanes executing with the caller: just itself.
  static std::uint32_t activemask() noexcept { return 1u; }

  //! `__ballot_sync(1, pred)`: bit 0 iff `pred`.
  static std::uint32_t ballot(std::uint32_t mask, bool pred) noexcept {
    check_mask(mask, "toga::cpu::platform::ballot: mask must be 1 (a warp of one lane)");
    return pred ? 1u : 0u;
  }

  //! `__shfl_sync(1, v, 0)`: the caller's own value. `src` must be 0 (stricter than CUDA,
  //! which reduces `src` modulo 32).
  static std::uint32_t shfl(std::uint32_t mask, std::uint32_t v, int src) noexcept {
    check_shfl(mask, src);
    return v;
  }
  //! 64-bit shuffle; same rules.
  static std::uint64_t shfl(std::uint32_t mask, std::uint64_t v, int src) noexcept {
    check_shfl(mask, src);
    return v;
  }

  //! `__match_any_sync(1, key)`: only the caller has its key.
  static std::uint32_t match_any(std::uint32_t mask, std::uint32_t) noexcept {
    check_mask(mask, "toga::cpu::platform::match_any: mask must be 1 (a warp of one lane)");
    return 1u;
  }
  //! 64-bit match; same rules.
  static std::uint32_t match_any(std::uint32_t mask, std::uint64_t) noexcept {
    check_mask(mask, "toga::cpu::platform::match_any: mask must be 1 (a warp of one lane)");
    return 1u;
  }

  //! `__syncwarp(1)`: nothing to wait for. (It also orders nothing for other threads: those
  //! are other warps.)
  static void syncwarp(std::uint32_t mask) noexcept {
    check_mask(mask, "toga::cpu::platform::syncwarp: mask must be 1 (a warp of one lane)");
  }

  //! `__reduce_or_sync(1, v)`: the caller's own value.
  static std::uint32_t reduce_or(std::uint32_t mask, std::uint32_t v) noexcept {
    check_mask(mask, "toga::cpu::platform::reduce_or: mask must be 1 (a warp of one lane)");
    return v;
  }

  //! No lane is below lane 0.
  static std::uint32_t lanemask_lt() noexcept { return 0u; }

  // ---------------------------------------------------------------------------------------
  // Progress and failure
  // ---------------------------------------------------------------------------------------

  //! Fault sites (toga/fault.hpp) are not used on native threads.
  static constexpr bool inject(fault_site) noexcept { return false; }
  static void poison(void*, std::uint64_t) noexcept {}

  //! Attempts that only yield the processor before backoff starts sleeping.
  static constexpr unsigned backoff_yield_attempts = 8;
  //! Longest backoff sleep, in microseconds.
  static constexpr unsigned backoff_cap_us = 64;

  //! Attempts 0 to 7: `std::this_thread::yield()`. From attempt 8 on: sleeps
  //! `min(2^(attempt - 8), 64)` microseconds (1, 2, 4, ..., 64; capped from attempt 14 on).
  //! With 16 threads on 2 cores the thread being waited for is often not running, and a yield
  //! (or a sleep) is what lets it run. On Linux a sleep lasts at least the request plus the
  //! timer slack (50 us by default), so the sleeps are really 50 to 120 us. Per-thread; no
  //! shared state.
  static void backoff(unsigned attempt) noexcept {
    if (attempt < backoff_yield_attempts) {
      std::this_thread::yield();
      return;
    }
    const unsigned k = attempt - backoff_yield_attempts;
    const unsigned us = k >= 6 ? backoff_cap_us : 1u << k;
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
  //! Nanoseconds of std::chrono::steady_clock (bounded waits only).
  static std::uint64_t clock_ns() noexcept {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  }

  //! An invariant of the core failed: prints `toga: <what> (...)` with the launch identity
  //! (when the caller was started by toga::cpu::launch) and the OS thread id to stderr, then
  //! `std::abort()`s (so a TSan or ASan build, a debugger and a core dump all see the stack).
  [[noreturn]] static void fail(const char* what) noexcept {
    const detail::thread_record& r = detail::current;
    if (r.launched) {
      std::fprintf(stderr,
                   "toga: %s (cpu thread %u: block %u, thread %u of %u; os thread %llu)\n",
                   what, r.global, r.block, r.thread, r.block_dim, detail::os_thread_id());
    } else {
      std::fprintf(stderr, "toga: %s (os thread %llu, not started by toga::cpu::launch)\n", what,
                   detail::os_thread_id());
    }
    std::fflush(stderr);
    std::abort();
  }

  // ---------------------------------------------------------------------------------------
  // Extras (not part of the Platform concept)
  // ---------------------------------------------------------------------------------------

  //! Whether the calling thread was started by toga::cpu::launch (identity is available).
  static bool in_launch() noexcept { return detail::current.launched; }
  //! `block_id() * block_dim() + thread_id()`: the caller's index among all launched threads.
  static unsigned global_thread_id() noexcept { return self().global; }

 private:
  template <class T>
  static std::atomic_ref<T> ref(T* p) noexcept {
    if (reinterpret_cast<std::uintptr_t>(p) % std::atomic_ref<T>::required_alignment != 0)
      fail("toga::cpu::platform: atomic on a misaligned word");
    return std::atomic_ref<T>(*p);
  }

  static const detail::thread_record& self() noexcept {
    const detail::thread_record& r = detail::current;
    if (!r.launched) fail("toga::cpu::platform: identity queried on a thread not started by toga::cpu::launch");
    return r;
  }

  static void check_mask(std::uint32_t mask, const char* what) noexcept {
    if (mask != 1u) fail(what);
  }
  static void check_shfl(std::uint32_t mask, int src) noexcept {
    check_mask(mask, "toga::cpu::platform::shfl: mask must be 1 (a warp of one lane)");
    if (src != 0) fail("toga::cpu::platform::shfl: source lane must be 0 (a warp of one lane)");
  }
};

static_assert(toga::Platform<platform>);

//! Runs `body()` on `threads` new OS threads shaped as a grid of `threads / threads_per_block`
//! blocks of `threads_per_block` threads, the blocks placed round-robin on `sms` simulated SMs,
//! and returns when all have finished.
//!
//! Thread `i` (0-based, the creation order) is thread `i % threads_per_block` of block
//! `i / threads_per_block`; its identity record is written before it calls `body`, so every
//! `toga::cpu::platform` identity function works inside. All threads wait on a start latch
//! until the last one is created, so the bodies begin together (as far as the OS schedules
//! them). `body` is called concurrently through one shared reference: it must be safe to call
//! from many threads at once (e.g. a lambda whose captures are only read, or are atomics).
//!
//! Errors: `std::invalid_argument` (before any thread starts) unless `threads`,
//! `threads_per_block` and `sms` are positive and `threads` is a multiple of
//! `threads_per_block`. An exception that escapes `body` on a thread is captured; after all
//! threads have been joined, the one from the lowest-numbered thread is rethrown (the others
//! are dropped). The launcher does not stop the other threads: a body that waits for a thread
//! that threw waits forever. If creating a thread fails, the threads already created are
//! released without running `body`, joined, and the `std::system_error` is rethrown.
//! Launches may be nested (a body may call launch) and may run concurrently.
template <class F>
  requires std::invocable<F&>
void launch(unsigned threads, unsigned threads_per_block, unsigned sms, F&& body) {
  if (threads == 0 || threads_per_block == 0 || sms == 0 || threads % threads_per_block != 0)
    throw std::invalid_argument(
        "toga::cpu::launch: threads (" + std::to_string(threads) +
        ") must be a positive multiple of threads_per_block (" +
        std::to_string(threads_per_block) + "), and sms (" + std::to_string(sms) +
        ") positive");
  const unsigned blocks = threads / threads_per_block;

  std::vector<std::exception_ptr> errors(threads);  // slot i: written by thread i only
  std::latch start(static_cast<std::ptrdiff_t>(threads) + 1);  // + 1: the caller
  bool cancelled = false;  // written before the caller's count_down, read after the wait
  std::vector<std::thread> pool;
  pool.reserve(threads);

  auto run = [&](unsigned i) {
    detail::current = detail::thread_record{true,
                                            i,
                                            i % threads_per_block,
                                            i / threads_per_block,
                                            threads_per_block,
                                            blocks,
                                            sms};
    start.arrive_and_wait();
    if (!cancelled) {
      try {
        std::invoke(body);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
    detail::current = detail::thread_record{};
  };

  try {
    for (unsigned i = 0; i < threads; ++i) pool.emplace_back(run, i);
  } catch (...) {
    cancelled = true;
    start.count_down(static_cast<std::ptrdiff_t>(threads - pool.size()) + 1);
    for (std::thread& t : pool) t.join();
    throw;
  }
  start.count_down();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace toga::cpu
