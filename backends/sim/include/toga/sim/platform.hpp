//! @file toga/sim/platform.hpp
//! `toga::sim::platform`: the Platform of the fiber simulator.
//!
//! Every atomic, fence, backoff and warp intrinsic first reaches a scheduling point of the
//! running world (which may switch to another lane), then takes effect in one indivisible step.
//! Under `--memory sc` (the default) memory is sequentially consistent at that granularity and
//! orders do not weaken anything; under `--memory weak` the world's memory model
//! (toga/sim/memory.hpp) lets relaxed loads read older stores and makes orders, fences and scopes
//! matter. Block-scope atomics are checked for scoped races under both (docs/simulator.md §4).
//! Only valid inside a lane of a running `toga::sim::world`.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <type_traits>

#include "toga/platform.hpp"
#include "toga/sim/coverage.hpp"
#include "toga/sim/ghost.hpp"
#include "toga/sim/world.hpp"

namespace toga::sim {

struct platform {
  //! Lanes of an aborted schedule are unwound by an exception: core code must not be noexcept.
  static constexpr bool noexcept_ops = false;

  // Atomics: a scheduling point, then the operation. Without memory tracking (the default,
  // sequentially consistent) the word is read and written directly; otherwise the world's
  // memory model decides what a load reads and records stores, views and scoped races.
  template <class T, memory_order O, scope S>
  static T load(T* p, order_tag<O>, scope_tag<S>, std::source_location loc = std::source_location::current()) {
    static_assert(O != memory_order::release && O != memory_order::acq_rel, "a load cannot be release");
    world& wd = w();
    wd.point(op::load, loc.file_name(), loc.line());
    cover(wd, p, false, loc);
    if (S == scope::block || (S == scope::device && wd.config().devices > 1)) wd.note_block_scope();
    if (memory_state* m = wd.memory()) return static_cast<T>(m->load(p, sizeof(T), O, model_scope(wd, S)));
    return *p;
  }
  template <class T, memory_order O, scope S>
  static void store(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>, std::source_location loc = std::source_location::current()) {
    static_assert(O != memory_order::acquire && O != memory_order::acq_rel, "a store cannot be acquire");
    world& wd = w();
    wd.point(op::store, loc.file_name(), loc.line());
    wd.note_write(p);
    cover(wd, p, true, loc);
    if (S == scope::block || (S == scope::device && wd.config().devices > 1)) wd.note_block_scope();
    if (memory_state* m = wd.memory()) return m->store(p, sizeof(T), v, O, model_scope(wd, S));
    *p = v;
  }
  template <class T, memory_order O, scope S>
  static T exchange(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>, std::source_location loc = std::source_location::current()) {
    return rmw<T, O, S>(op::exchange, p, [v](T) { return v; }, loc);
  }
  template <class T, memory_order O, scope S>
  static bool compare_exchange(T* p, T& expected, std::type_identity_t<T> desired, order_tag<O>, scope_tag<S>, std::source_location loc = std::source_location::current()) {
    world& wd = w();
    wd.point(op::cas, loc.file_name(), loc.line());
    wd.note_write(p);
    cover(wd, p, true, loc);
    if (S == scope::block || (S == scope::device && wd.config().devices > 1)) wd.note_block_scope();
    if (memory_state* m = wd.memory()) {
      const T cur = static_cast<T>(m->rmw_read(p, sizeof(T)));
      if (cur == expected) {
        m->rmw_write(p, sizeof(T), desired, O, model_scope(wd, S));
        return true;
      }
      m->rmw_fail(p, sizeof(T), failure_order(O), model_scope(wd, S));
      expected = cur;
      return false;
    }
    if (*p == expected) {
      *p = desired;
      return true;
    }
    expected = *p;
    return false;
  }
  template <class T, memory_order O, scope S>
  static T fetch_add(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>, std::source_location loc = std::source_location::current()) {
    return rmw<T, O, S>(op::fetch_add, p, [v](T old) { return static_cast<T>(old + v); }, loc);
  }
  template <class T, memory_order O, scope S>
  static T fetch_sub(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>, std::source_location loc = std::source_location::current()) {
    return rmw<T, O, S>(op::fetch_sub, p, [v](T old) { return static_cast<T>(old - v); }, loc);
  }
  template <class T, memory_order O, scope S>
  static T fetch_and(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>, std::source_location loc = std::source_location::current()) {
    return rmw<T, O, S>(op::fetch_and, p, [v](T old) { return static_cast<T>(old & v); }, loc);
  }
  template <class T, memory_order O, scope S>
  static T fetch_or(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>, std::source_location loc = std::source_location::current()) {
    return rmw<T, O, S>(op::fetch_or, p, [v](T old) { return static_cast<T>(old | v); }, loc);
  }
  //! An RMW even when v <= *p (atom.max writes max(old, v) back), as in PTX's model.
  template <class T, memory_order O, scope S>
  static T fetch_max(T* p, std::type_identity_t<T> v, order_tag<O>, scope_tag<S>, std::source_location loc = std::source_location::current()) {
    return rmw<T, O, S>(op::fetch_max, p, [v](T old) { return v > old ? v : old; }, loc);
  }
  template <memory_order O, scope S>
  static void fence(order_tag<O>, scope_tag<S>) {
    world& wd = w();
    wd.point(op::fence);
    wd.note_fence(O);
    if (memory_state* m = wd.memory()) m->fence(O, model_scope(wd, S));
  }

  // identity
  static unsigned lane_id() { return w().self().lane; }
  static unsigned warp_id() { return w().self().warp; }
  static unsigned thread_id() { return w().self().thread; }
  static unsigned block_id() { return w().self().block; }
  // (no hardware warp slots are modelled: every simulated block is resident for the whole
  // launch, so the block's and the warp's index name a distinct resident warp)
  static unsigned warp_slot() { return w().self().block * 8u + w().self().warp; }
  static unsigned block_dim() { return w().config().threads_per_block; }
  static unsigned grid_dim() { return w().config().blocks; }
  // (each device numbers its own SMs from 0)
  static unsigned sm_id() {
    const world& wd = w();
    return wd.config().devices > 1 ? wd.self().sm / wd.config().devices : wd.self().sm;
  }
  static unsigned num_sms() { return w().config().sms / (w().config().devices > 1 ? w().config().devices : 1); }

  // warp collectives
  //! The lanes grouped with the caller at this call site (a scheduling choice; see world.hpp).
  static std::uint32_t activemask(std::source_location loc = std::source_location::current()) {
    const std::uint64_t site = (reinterpret_cast<std::uintptr_t>(loc.file_name()) << 20) ^
                               (std::uint64_t{loc.line()} << 8) ^ loc.column();
    return w().activemask(site);
  }
  static std::uint32_t ballot(std::uint32_t mask, bool pred) {
    return static_cast<std::uint32_t>(w().collective(op::ballot, mask, pred ? 1 : 0, 0, "__ballot_sync"));
  }
  static std::uint32_t shfl(std::uint32_t mask, std::uint32_t v, int src) {
    return static_cast<std::uint32_t>(w().collective(op::shfl, mask, v, static_cast<unsigned>(src), "__shfl_sync"));
  }
  static std::uint64_t shfl(std::uint32_t mask, std::uint64_t v, int src) {
    return w().collective(op::shfl, mask, v, static_cast<unsigned>(src), "__shfl_sync");
  }
  static std::uint32_t match_any(std::uint32_t mask, std::uint32_t key) {
    return static_cast<std::uint32_t>(w().collective(op::match_any, mask, key, 0, "__match_any_sync"));
  }
  static std::uint32_t match_any(std::uint32_t mask, std::uint64_t key) {
    return static_cast<std::uint32_t>(w().collective(op::match_any, mask, key, 0, "__match_any_sync"));
  }
  static void syncwarp(std::uint32_t mask) { w().collective(op::syncwarp, mask, 0, 0, "__syncwarp"); }
  static std::uint32_t reduce_or(std::uint32_t mask, std::uint32_t v) {
    return static_cast<std::uint32_t>(w().collective(op::reduce_or, mask, v, 0, "__reduce_or_sync"));
  }
  static std::uint32_t lanemask_lt() { return (1u << w().self().lane) - 1u; }

  // fault injection (toga/fault.hpp, toga/sim/faults.hpp): sites enabled by run_limits::faults
  // fire by choices of the schedule; otherwise nothing happens and nothing is recorded. Outside a
  // running world (host code between launches) they do nothing.
  static bool inject(fault_site s) {
    world* wd = world::current();
    return wd ? wd->inject(s) : false;
  }
  static void poison(void* p, std::uint64_t bytes) {
    if (world* wd = world::current()) wd->poison(p, bytes);
  }

  // progress and failure
  static void backoff(unsigned) { w().point(op::backoff); }
  //! The schedule's scheduling points so far x ns_per_step: deterministic, so a bounded wait
  //! times out at the same point when the schedule is replayed. Not a scheduling point.
  static std::uint64_t clock_ns() { return w().steps() * ns_per_step; }
  static constexpr std::uint64_t ns_per_step = 100;
  [[noreturn]] static void fail(const char* what) {
    throw lane_failure{verdict_kind::crash, std::string("assertion failed: ") + what};
  }

  // simulator extras (not part of the Platform concept)
  //! Ghost state (toga/ghost.hpp): not a scheduling point.
  //! The step observer sees it as a write of the counter's word (ghost_table::word).
  static void ghost_add(ghost_kind k, const void* key, std::int64_t delta) {
    if (world* wd = world::current()) wd->plain_access(ghost_table::word(k, key), true);
    ghost_table::current().add(k, key, delta);
  }
  //! A data choice in [0, n) from the schedule: use it for fault injection and test data, so
  //! that replay and shrinking cover it.
  static std::uint32_t choose(std::uint32_t n) { return w().choose(n); }
  //! As choose(n), with the values from distinct - 1 up declared one outcome (world::choose):
  //! `choose(4, 2) == 0` happens with probability 1/4, and dpor explores 2 branches, not 4.
  static std::uint32_t choose(std::uint32_t n, std::uint32_t distinct) { return w().choose(n, distinct); }
  //! Under `--memory weak`: the running lane's current point in happens-before
  //! (toga/sim/memory.hpp); the default mark otherwise. Not a scheduling point. With hb_before,
  //! scenarios check that plain data is handed over along a happens-before chain.
  static hb_mark hb_here() {
    memory_state* m = weak_state();
    return m ? m->mark_here() : hb_mark{};
  }
  //! True when `x` happens before the running lane's current point; always true without weak
  //! memory (there every access is ordered by the schedule).
  static bool hb_before(const hb_mark& x) {
    memory_state* m = weak_state();
    return !m || m->happened_before(x);
  }
  //! True when this schedule runs under `--memory weak`.
  static bool weak_memory() { return weak_state() != nullptr; }
  //! Reports a failed property of the code under test as an invariant verdict.
  [[noreturn]] static void violated(const std::string& what) {
    throw lane_failure{verdict_kind::invariant, what};
  }

 private:
  // The memory model knows two scopes, its groups' (scope::block) and everyone's (scope::device).
  // One device (the host one more of its threads): block scope the block, device and system
  // scope everyone. Several devices (launch_config::devices, issue 32): the groups are devices,
  // so device scope covers one device and system scope everyone; block scope is checked as
  // device scope there (a block-scope race inside one device is not reported).
  static scope model_scope(world& wd, scope s) {
    if (wd.config().devices > 1) return s == scope::system ? scope::device : scope::block;
    return s == scope::system ? scope::device : s;
  }
  static world& w() { return *world::current(); }
  // Coverage of the core's races (toga/sim/coverage.hpp): the access, when a recorder is installed.
  static void cover(world& wd, const void* p, bool write, const std::source_location& loc) {
    if (coverage_recorder* c = coverage_recorder::current()) c->access(p, write, loc, wd.self().index);
  }
  // The memory model's state when this schedule runs under --memory weak, else nullptr.
  static memory_state* weak_state() {
    memory_state* m = w().memory();
    return m && m->weak() ? m : nullptr;
  }
  template <class T, memory_order O, scope S, class F>
  static T rmw(op k, T* p, F f, const std::source_location& loc) {
    world& wd = w();
    wd.point(k, loc.file_name(), loc.line());
    wd.note_write(p);
    cover(wd, p, true, loc);
    if (S == scope::block || (S == scope::device && wd.config().devices > 1)) wd.note_block_scope();
    if (memory_state* m = wd.memory()) {
      const T old = static_cast<T>(m->rmw_read(p, sizeof(T)));
      m->rmw_write(p, sizeof(T), f(old), O, model_scope(wd, S));
      return old;
    }
    const T old = *p;
    *p = f(old);
    return old;
  }
};

static_assert(toga::Platform<platform>);

}  // namespace toga::sim
