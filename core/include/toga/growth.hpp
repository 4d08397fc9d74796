//! @file toga/growth.hpp
//! Host side of a growable heap (design.md §12.5, docs/usage.md §9 "Growable
//! heaps"): one reserved address range of `max_bytes`, physical memory mapped into it granule by
//! granule on demand, and given back at quiescence. Backend-agnostic: the physical memory comes
//! from a *provider* (the CUDA virtual memory management API in toga::cuda::heap; `mmap` and
//! `memfd_create` in toga::cpu::growable_heap, so that this policy runs in CI without a GPU).
//!
//! What lives here:
//!  * `growth_options`: the knobs (max_bytes, initial_bytes, headroom_bytes, release_threshold,
//!    granule_bytes) and their validation;
//!  * `granule_map<Provider>`: the reserved range and which granules have memory behind them.
//!    A granule is mapped by three provider calls (create a handle, map it, grant read-write
//!    access) and counts as mapped only when all three succeeded; a failure undoes exactly the
//!    calls that succeeded, so no granule is ever half mapped. Failures can be injected at the
//!    k-th call of each step (tests);
//!  * `plan_growth`: which granules a growth maps, from the demand the device recorded;
//!  * `growth_counters`: what the policy did (statistics).
//!
//! The device side (adopting mapped granules into the buddy tree, withdrawing free ones) is
//! toga::allocator's `adopt_granule` / `trim_granules`; the heaps of each backend run those
//! and this policy in the order the protocol needs: map, then adopt; withdraw, then unmap.
//!
//! A *provider* is a class with
//!  * `using handle_type = ...;` (what create returns: a CUDA allocation handle, a file descriptor),
//!  * `std::uint64_t granularity() const` (bytes every granule must be a multiple of),
//!  * `char* reserve(std::uint64_t bytes, std::uint64_t alignment, std::string& error)`
//!    (an address range with no access; nullptr and a message on failure),
//!  * `void unreserve(char* base, std::uint64_t bytes) noexcept`,
//!  * `bool create(std::uint64_t bytes, handle_type& h, std::string& error, memory_tier tier)`
//!    (memory of the device, or host memory the device can access: the host tier),
//!  * `bool supports(memory_tier tier, std::string& why)` (whether create can make that tier),
//!  * `bool map(char* at, std::uint64_t bytes, const handle_type& h, std::string& error)`,
//!  * `bool set_access(char* at, std::uint64_t bytes, std::string& error)`,
//!  * `void unmap(char* at, std::uint64_t bytes) noexcept` (back to reserved, no access; also
//!    called after a failed map, so it must accept a range that is not mapped),
//!  * `void release(const handle_type& h) noexcept`.
//!
//! Thread-safety: none; a granule_map belongs to one heap object, whose host calls are not
//! thread-safe with respect to each other. Units: bytes throughout.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "toga/bits.hpp"
#include "toga/budget.hpp"
#include "toga/geometry.hpp"
#include "toga/growth_service.hpp"

namespace toga {

//! When a growable heap backs a granule with host memory (the host tier, design.md §12.7).
enum class spill_policy : std::uint8_t {
  never = 0,             //!< device memory only: a granule the device cannot back is a growth failure
  when_device_full = 1,  //!< a granule the driver or the device budget refuses is backed by host memory
};
inline const char* to_string(spill_policy p) noexcept { return p == spill_policy::never ? "never" : "when_device_full"; }

//! The options of a growable heap. Sizes in bytes.
struct growth_options {
  //! The reserved address range and the heap's capacity (rounded up to a power of two, at most
  //! heap_layout::max_heap_bytes). Required: the buddy tree's metadata (about max_bytes / 256 B
  //! on a GPU heap, 2 x 4 B per 4 KiB page) is allocated for it up front.
  std::uint64_t max_bytes = 0;
  //! Mapped (and adopted) at construction, rounded up to granules; may be 0.
  std::uint64_t initial_bytes = 0;
  //! Mapped beyond the recorded demand at each growth (rounded up to granules with it). Toga adds
  //! a quarter of the demand on its own, for the blocks the demand's failed requests did not
  //! count (each arena's own chunks and superbins).
  std::uint64_t headroom_bytes = 0;
  //! Mapped bytes a synchronising call keeps: above it, wholly free granules are given back
  //! (highest address first) until at most max(release_threshold, the granules that hold live
  //! blocks) stay mapped. The default keeps everything (CUDA's pools: cudaMemPoolAttrReleaseThreshold).
  std::uint64_t release_threshold = std::numeric_limits<std::uint64_t>::max();
  //! Bytes of one granule: the unit mapped, adopted and given back, each granule one physical
  //! handle. A power of two, a multiple of the provider's granularity (2 MiB on current NVIDIA
  //! GPUs), at most max_bytes. 0: toga's choice, 32 MiB (docs/benchmarks.md "What the
  //! CUDA VMM API costs": a handle's calls cost about 30 us from 2 to 32 MiB) or less on a small range.
  std::uint64_t granule_bytes = 0;
  //! Growth while kernels run (design.md §12.6, toga/growth_service.hpp): a host thread, started
  //! with the heap and joined by its destructor, maps granules for requests that wait for them;
  //! such a request returns nullptr only after `service_wait_us`, or when the service could map
  //! nothing. Off by default (requests fail at once and record demand for grow_if_needed).
  bool service = false;
  //! The longest a request waits for the service, in microseconds: 1 .. 60,000,000 (60 s).
  std::uint64_t service_wait_us = 1'000'000;
  //! When a granule is backed by host memory instead (design.md §12.7, the host tier).
  spill_policy spill = spill_policy::never;
  //! Growth service only: a round that maps anything maps at least this percent of the bytes
  //! mapped already (geometric growth, like a vector's capacity; 100: doubling), so that a
  //! kernel that fills a heap from empty waits for a few rounds, not one per granule (design.md
  //! §12.6). The part beyond the posted demand is device memory only (it never spills) and is
  //! given back by trims and the release threshold like the rest. 0: the demand only. At most 1,000.
  std::uint64_t service_ahead_percent = 100;
};

//! The largest service_ahead_percent toga accepts.
inline constexpr std::uint64_t max_service_ahead_percent = 1000;

//! The longest service_wait_us toga accepts (60 s).
inline constexpr std::uint64_t max_service_wait_us = 60'000'000;

//! Planted bugs of the host growth policy (tests/unit/growable_cpu_test.cpp kills each; the
//! simulator's mutant suite holds the device side's: bugs 34-38). `none` in every real build.
enum class growth_bug : unsigned {
  none = 0,
  rollback_leaks_handle,   //!< a granule whose map or set-access failed keeps its handle
  counted_before_access,   //!< a granule counts as mapped once map succeeded, before set-access
  plan_ignores_alignment,  //!< a block larger than a granule gets the lowest unmapped granules, not an aligned run
  threshold_releases_all,  //!< the release threshold trims to 0 instead of to the threshold
  charge_kept_on_failed_map,  //!< a granule whose mapping failed stays charged to the budget (charged again when retried)
  host_placed_in_plan,        //!< a host-tier granule takes the planned (low) granule, not the top: trims give device granules back first
  host_charged_as_device,     //!< a host-tier granule is charged to the device budget (which then refuses it)
};

//! The provider calls that map a granule, in their order; failures can be injected at each.
enum class growth_step : unsigned { create = 0, map = 1, set_access = 2 };
inline constexpr unsigned growth_step_count = 3;
inline const char* to_string(growth_step s) noexcept {
  switch (s) {
    case growth_step::create: return "create";
    case growth_step::map: return "map";
    case growth_step::set_access: return "set_access";
  }
  return "?";
}

//! What a growable heap's host side did (statistics; all monotonic but the mapped figures).
struct growth_counters {
  std::uint64_t mapped_bytes = 0;       //!< bytes mapped now (whole granules)
  std::uint64_t mapped_high_bytes = 0;  //!< the highest mapped_bytes since construction or reset_high_water
  std::uint64_t growth_requests = 0;    //!< growths that found demand and tried to map
  std::uint64_t growth_failures = 0;    //!< granules whose mapping failed (each rolled back)
  std::uint64_t grown_bytes = 0;        //!< bytes mapped by growths (initial_bytes excluded)
  std::uint64_t trims = 0;              //!< trims that ran (trim_to and the release threshold)
  std::uint64_t trimmed_bytes = 0;      //!< bytes given back by them
  std::uint64_t demand_requests = 0;    //!< failed requests that growth could serve (nullptr, then grow)
  std::uint64_t budget_refusals = 0;    //!< granules the device budget refused (toga/budget.hpp; also in growth_failures)
  // ---- tiers (growth_options::spill) ----
  std::uint64_t host_mapped_bytes = 0;       //!< bytes of mapped_bytes backed by host memory now
  std::uint64_t host_mapped_high_bytes = 0;  //!< their highest value
  std::uint64_t spilled_granules = 0;        //!< granules the device could not back that went to the host tier
  // ---- the growth service (growth_options::service; 0 without it) ----
  std::uint64_t service_rounds = 0;     //!< rounds that answered waiting requests
  std::uint64_t service_refusals = 0;   //!< rounds that could map nothing (the waiters got nullptr)
  std::uint64_t service_waits = 0;      //!< requests that waited (read from the mailbox)
  std::uint64_t service_served = 0;     //!< ... and got a block
  std::uint64_t service_timeouts = 0;   //!< ... and gave up at service_wait_us
  std::uint64_t service_gave_up = 0;    //!< ... and gave up because a round refused or the service stopped
  std::uint64_t service_round_ns = 0;   //!< time the service spent in rounds that answered (steady clock)
  std::uint64_t service_map_ns = 0;     //!< ... of it in mapping granules (charge, create, map, set access)
};

//! Nanoseconds of std::chrono::steady_clock (the service's own timing).
inline std::uint64_t steady_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

//! The granule size for `o` on a provider of `granularity` bytes, after validating `o`;
//! std::invalid_argument (naming the option and what to do) if anything is out of range.
//! `capacity` is max_bytes rounded up to a power of two (see growth_capacity).
inline std::uint64_t growth_granule_bytes(const growth_options& o, std::uint64_t capacity, std::uint64_t granularity) {
  if (o.granule_bytes != 0) {
    const std::uint64_t g = o.granule_bytes;
    if ((g & (g - 1)) != 0 || g % granularity != 0 || g > capacity || g < geom::page_bytes)
      throw std::invalid_argument("toga: granule_bytes " + std::to_string(g) + " is not a power of two, a multiple of " +
                                  std::to_string(granularity) + " B (the memory provider's granularity), at most the capacity " +
                                  std::to_string(capacity) + " B; use 0 for toga's choice");
    return g;
  }
  std::uint64_t g = std::uint64_t{32} << 20;
  while (g > capacity && g > granularity) g >>= 1;
  if (g > capacity || g < granularity || g % granularity != 0 || g < geom::page_bytes) {
    const std::uint64_t least = std::max<std::uint64_t>(granularity, geom::page_bytes);
    throw std::invalid_argument("toga: max_bytes " + std::to_string(o.max_bytes) + " is smaller than one granule of the memory provider (" +
                                std::to_string(granularity) + " B); the smallest valid max_bytes is " + std::to_string(least) + " B");
  }
  return g;
}

//! max_bytes rounded up to a power of two (>= 4 KiB), after validating it against `max_capacity`.
inline std::uint64_t growth_capacity(const growth_options& o, std::uint64_t max_capacity) {
  if (o.max_bytes == 0 || o.max_bytes > max_capacity)
    throw std::invalid_argument("toga: max_bytes " + std::to_string(o.max_bytes) + " is not in [1, " + std::to_string(max_capacity) +
                                "]; a growable heap needs max_bytes (its reserved range and capacity)");
  std::uint64_t c = geom::page_bytes;
  while (c < o.max_bytes) c <<= 1;
  if (o.service && (o.service_wait_us == 0 || o.service_wait_us > max_service_wait_us))
    throw std::invalid_argument("toga: service_wait_us " + std::to_string(o.service_wait_us) + " is not in [1, " +
                                std::to_string(max_service_wait_us) + "] (microseconds a request waits for the growth service)");
  if (o.service_ahead_percent > max_service_ahead_percent)
    throw std::invalid_argument("toga: service_ahead_percent " + std::to_string(o.service_ahead_percent) + " is not in [0, " +
                                std::to_string(max_service_ahead_percent) + "] (percent of the mapped bytes a growth service round maps at least)");
  if (o.initial_bytes > o.max_bytes)
    throw std::invalid_argument("toga: initial_bytes " + std::to_string(o.initial_bytes) + " exceeds max_bytes " + std::to_string(o.max_bytes) +
                                "; lower initial_bytes or raise max_bytes");
  return c;
}

//! A reserved range of `granules` x `granule_bytes` bytes and the granules mapped in it.
//! Move-only; the destructor unmaps and releases every granule, then the range (never throws).
template <class Provider, growth_bug Bug = growth_bug::none>
class granule_map {
 public:
  using handle_type = typename Provider::handle_type;

  //! Reserves the range (aligned to `alignment`, a power of two); std::runtime_error naming the
  //! provider's message when it cannot.
  granule_map(Provider provider, std::uint64_t granule_bytes, std::uint64_t granules, std::uint64_t alignment)
      : provider_(std::move(provider)), granule_(granule_bytes), slots_(granules) {
    std::string err;
    base_ = provider_.reserve(granule_bytes * granules, alignment, err);
    if (base_ == nullptr)
      throw std::runtime_error("toga: cannot reserve " + std::to_string(granule_bytes * granules) + " B of address space: " + err);
  }
  granule_map(granule_map&& o) noexcept
      : provider_(std::move(o.provider_)), granule_(o.granule_), slots_(std::move(o.slots_)), base_(std::exchange(o.base_, nullptr)),
        mapped_(o.mapped_), host_(o.host_), refused_tier_(o.refused_tier_), inject_(o.inject_), calls_(o.calls_), error_(std::move(o.error_)) {}
  granule_map& operator=(granule_map&&) = delete;
  granule_map(const granule_map&) = delete;
  granule_map& operator=(const granule_map&) = delete;
  ~granule_map() {
    if (base_ == nullptr) return;
    for (std::uint64_t i = 0; i < slots_.size(); ++i) unmap(i);
    provider_.unreserve(base_, granule_ * slots_.size());
  }

  char* base() const noexcept { return base_; }
  std::uint64_t granule_bytes() const noexcept { return granule_; }
  std::uint64_t granules() const noexcept { return slots_.size(); }
  std::uint64_t mapped_granules() const noexcept { return mapped_; }
  bool is_mapped(std::uint64_t i) const noexcept { return slots_[i].mapped; }
  //! The message of the last failed provider call (empty if none failed).
  const std::string& last_error() const noexcept { return error_; }
  Provider& provider() noexcept { return provider_; }

  //! Maps granule i (create, map, set access). True when all three succeeded; otherwise the
  //! calls that did succeed are undone (unmap, release), the granule stays unmapped, last_error()
  //! says which call failed and why, and false is returned. True at once if already mapped.
  bool map(std::uint64_t i, memory_tier tier = memory_tier::device) {
    slot& s = slots_[i];
    if (s.mapped) return true;
    char* at = base_ + i * granule_;
    handle_type h{};
    if (!call(growth_step::create, [&](std::string& e) {
          if (refused_tier_[static_cast<unsigned>(tier)]) {
            e = std::string("injected: the ") + to_string(tier) + " tier refuses every granule";
            return false;
          }
          return provider_.create(granule_, h, e, tier);
        }))
      return false;
    if (!call(growth_step::map, [&](std::string& e) { return provider_.map(at, granule_, h, e); })) {
      provider_.unmap(at, granule_);  // a failed map may have changed the range: back to reserved
      if constexpr (Bug != growth_bug::rollback_leaks_handle) provider_.release(h);
      return false;
    }
    if constexpr (Bug == growth_bug::counted_before_access) {
      s.handle = h;
      s.mapped = true;
      ++mapped_;
    }
    if (!call(growth_step::set_access, [&](std::string& e) { return provider_.set_access(at, granule_, e); })) {
      if constexpr (Bug == growth_bug::counted_before_access) return false;
      provider_.unmap(at, granule_);
      if constexpr (Bug != growth_bug::rollback_leaks_handle) provider_.release(h);
      return false;
    }
    if constexpr (Bug == growth_bug::counted_before_access) return true;
    s.handle = h;
    s.mapped = true;
    s.tier = tier;
    ++mapped_;
    host_ += tier == memory_tier::host;
    return true;
  }
  //! The tier backing granule i (meaningful while it is mapped).
  memory_tier tier_of(std::uint64_t i) const noexcept { return slots_[i].tier; }
  //! Granules mapped now in the host tier.
  std::uint64_t host_granules() const noexcept { return host_; }
  //! Tests: every create of `tier` fails from now on (a device that is full, a driver without host
  //! allocations), or no longer does.
  void refuse_tier(memory_tier tier, bool refuse) noexcept { refused_tier_[static_cast<unsigned>(tier)] = refuse; }
  //! Unmaps and releases granule i (nothing if it is not mapped). Never throws.
  void unmap(std::uint64_t i) noexcept {
    slot& s = slots_[i];
    if (!s.mapped) return;
    provider_.unmap(base_ + i * granule_, granule_);
    provider_.release(s.handle);
    s.mapped = false;
    --mapped_;
    host_ -= s.tier == memory_tier::host;
    s.tier = memory_tier::device;
  }

  //! Tests: the k-th call (1-based, counted from now) of `step` fails as if the provider had
  //! refused it ("injected failure"); k = 0 cancels.
  void inject_failure(growth_step step, std::uint64_t k) noexcept {
    inject_[static_cast<unsigned>(step)] = k;
    calls_[static_cast<unsigned>(step)] = 0;
  }

 private:
  struct slot {
    handle_type handle{};
    bool mapped = false;
    memory_tier tier = memory_tier::device;
  };
  template <class F>
  bool call(growth_step step, F&& f) {
    const unsigned k = static_cast<unsigned>(step);
    error_.clear();
    if (inject_[k] != 0 && ++calls_[k] == inject_[k]) {
      inject_[k] = 0;
      error_ = std::string(to_string(step)) + ": injected failure";
      return false;
    }
    std::string e;
    if (f(e)) return true;
    error_ = std::string(to_string(step)) + ": " + e;
    return false;
  }

  Provider provider_;
  std::uint64_t granule_;
  std::vector<slot> slots_;
  char* base_ = nullptr;
  std::uint64_t mapped_ = 0, host_ = 0;
  std::array<bool, 2> refused_tier_{};
  std::array<std::uint64_t, growth_step_count> inject_{};
  std::array<std::uint64_t, growth_step_count> calls_{};
  std::string error_;
};

//! The host's side of the mailbox's atomics (service_round's P on a host thread): std::atomic_ref,
//! so the words may be in mapped pinned memory that a GPU writes. Loads and stores only.
struct host_atomics {
  template <class T, memory_order O, scope S>
  static T load(T* p, order_tag<O>, scope_tag<S>) noexcept {
    return std::atomic_ref<T>(*p).load(O == memory_order::relaxed ? std::memory_order_relaxed : std::memory_order_acquire);
  }
  template <class T, memory_order O, scope S>
  static void store(T* p, T v, order_tag<O>, scope_tag<S>) noexcept {
    std::atomic_ref<T>(*p).store(v, O == memory_order::relaxed ? std::memory_order_relaxed : std::memory_order_release);
  }
};

//! The device's tally of the requests that waited for the growth service (`waits` and how they
//! ended), read from the relay (a growable heap's growth_state; on a GPU, a host copy of it).
//! Exact at quiescence; while a kernel runs, a request still waiting counts as served.
inline void read_service_tally(growth_relay& m, growth_counters& c) noexcept {
  c.service_waits = host_atomics::load(&m.waits, relaxed, system_scope);
  c.service_timeouts = host_atomics::load(&m.timeouts, relaxed, system_scope);
  c.service_gave_up = host_atomics::load(&m.refusals, relaxed, system_scope);
  const std::uint64_t exhausted = host_atomics::load(&m.exhausted, relaxed, system_scope);
  const std::uint64_t ended = c.service_timeouts + c.service_gave_up + exhausted;
  c.service_served = c.service_waits > ended ? c.service_waits - ended : 0;
}

//! The granules (indices, ascending) a growth maps for a recorded demand of `demand_bytes`
//! (failed requests, each at its served size) whose largest block was 4 KiB x 2^`demand_order`:
//! `demand_bytes` + a quarter of it + `headroom_bytes`, rounded up to granules (at least one);
//! the lowest unmapped granules first. A block larger than a granule needs an aligned run of
//! granules that are all unmapped now (mapped ones may hold blocks): the lowest such run is
//! mapped first, and counts towards the total. Returns no granule when none is unmapped.
//! `mapped(i)` tells whether granule i has memory now; `granules` granules of `granule_bytes`.
template <growth_bug Bug = growth_bug::none, class Mapped>
std::vector<std::uint64_t> plan_growth(std::uint64_t demand_bytes, unsigned demand_order, std::uint64_t headroom_bytes,
                                       std::uint64_t granule_bytes, std::uint64_t granules, Mapped&& mapped) {
  std::vector<std::uint64_t> out;
  const auto sat_add = [](std::uint64_t a, std::uint64_t b) { return a > ~b ? ~std::uint64_t{0} : a + b; };
  const std::uint64_t want_bytes = sat_add(sat_add(demand_bytes, demand_bytes / 4), headroom_bytes);
  std::uint64_t want = want_bytes / granule_bytes + (want_bytes % granule_bytes != 0);
  if (want == 0) want = 1;
  std::vector<bool> chosen(granules, false);
  const std::uint64_t block = demand_order < 63 - geom::page_shift ? geom::page_bytes << demand_order : ~std::uint64_t{0};
  if (Bug != growth_bug::plan_ignores_alignment && block > granule_bytes && block / granule_bytes <= granules) {
    const std::uint64_t run = block / granule_bytes;
    for (std::uint64_t r = 0; r + run <= granules; r += run) {
      bool all_unmapped = true;
      for (std::uint64_t i = r; i < r + run && all_unmapped; ++i) all_unmapped = !mapped(i);
      if (!all_unmapped) continue;
      for (std::uint64_t i = r; i < r + run; ++i) chosen[i] = true;
      want = want > run ? want - run : 0;
      break;
    }
  }
  for (std::uint64_t i = 0; i < granules && want > 0; ++i)
    if (!chosen[i] && !mapped(i)) {
      chosen[i] = true;
      --want;
    }
  for (std::uint64_t i = 0; i < granules; ++i)
    if (chosen[i]) out.push_back(i);
  return out;
}

//! The host side of one growable heap: its granule map, options and counters, and the two
//! halves of the protocol that run on the host (the heaps of each backend run the device
//! halves in between). Not thread-safe; call at quiescence (no kernel uses the heap).
//!  * grow: `plan(demand)` maps granules for the demand the device recorded and returns their
//!    offsets; the heap adopts them on the device (allocator::adopt_granule), and the device's
//!    demand counters are reset.
//!  * trim: the heap withdraws wholly free granules on the device (allocator::trim_granules);
//!    `withdrawn(offsets)` unmaps them. Withdraw first, then unmap: a granule is never without
//!    memory while the tree can hand it out.
template <class Provider, growth_bug Bug = growth_bug::none>
class growth_controller {
 public:
  //! Reserves the range of `capacity` bytes (see growth_capacity) in granules of `granule_bytes`
  //! (see growth_granule_bytes), aligned to a granule. Maps nothing yet (see map_initial).
  growth_controller(Provider provider, const growth_options& o, std::uint64_t capacity, std::uint64_t granule_bytes)
      : options_(o), map_(std::move(provider), granule_bytes, capacity / granule_bytes, capacity),
        usable_((o.max_bytes + granule_bytes - 1) / granule_bytes), charged_(capacity / granule_bytes, 0) {}
  growth_controller(growth_controller&& o) noexcept
      : options_(o.options_), map_(std::move(o.map_)), usable_(o.usable_), counters_(o.counters_), account_(std::move(o.account_)),
        charged_(std::exchange(o.charged_, {})), last_refusal_(std::move(o.last_refusal_)), planned_run_(o.planned_run_) {}
  growth_controller& operator=(growth_controller&&) = delete;
  //! Releases the budget records of the granules still mapped (the granule map unmaps them).
  ~growth_controller() {
    // unmap first, then release the record: the budget never counts less than what is mapped
    for (std::uint64_t i = 0; i < charged_.size(); ++i) {
      if (charged_[i] == 0) continue;
      map_.unmap(i);
      account_.release(charged_[i]);
    }
  }
  //! Unmaps every granule and releases their records (a heap's destructor, before its own records).
  void unmap_all() noexcept {
    for (std::uint64_t i = 0; i < map_.granules(); ++i) {
      map_.unmap(i);
      account_.release(std::exchange(charged_[i], 0));
    }
  }

  //! Where each granule is recorded and charged before it is mapped (toga/budget.hpp); set it
  //! before map_initial. Without one, nothing is recorded.
  void set_account(ledger_account a) { account_ = std::move(a); }
  const ledger_account& account() const noexcept { return account_; }
  //! Why the last granule the budget refused was refused (empty if none was).
  const std::string& last_refusal() const noexcept { return last_refusal_; }

  granule_map<Provider, Bug>& granules() noexcept { return map_; }
  const granule_map<Provider, Bug>& granules() const noexcept { return map_; }
  const growth_options& options() const noexcept { return options_; }
  const growth_counters& counters() const noexcept { return counters_; }
  std::uint64_t granule_bytes() const noexcept { return map_.granule_bytes(); }
  std::uint64_t mapped_bytes() const noexcept { return map_.mapped_granules() * map_.granule_bytes(); }
  //! Sets mapped_high_bytes to mapped_bytes.
  void reset_high_water() noexcept {
    counters_.mapped_high_bytes = mapped_bytes();
    counters_.host_mapped_high_bytes = map_.host_granules() * map_.granule_bytes();
  }
  //! The heap was reset: every count starts again (the mapped memory stays).
  void reset_counters() noexcept {
    counters_ = growth_counters{};
    note_mapped();
  }
  //! Granules growth may map: max_bytes rounded up to granules (the range is the power of two above).
  std::uint64_t usable_granules() const noexcept { return usable_; }
  //! Counts `requests` failed requests growth could serve (read from the device before it is reset).
  void note_demand(std::uint64_t requests) noexcept { counters_.demand_requests += requests; }

  //! Maps options().initial_bytes (rounded up to granules) from the lowest address up; returns
  //! the offsets to adopt. std::runtime_error naming the failed call when a granule cannot be
  //! mapped (the granules mapped before it stay mapped and are returned by the destructor).
  std::vector<std::uint64_t> map_initial() {
    const std::uint64_t g = map_.granule_bytes();
    const std::uint64_t n = std::min((options_.initial_bytes + g - 1) / g, usable_);
    std::vector<std::uint64_t> out;
    for (std::uint64_t i = 0; i < n; ++i) {
      if (!charge(i))
        throw std::runtime_error("toga: cannot map granule " + std::to_string(i) + " of the initial " + std::to_string(n * g) + " B: " +
                                 last_refusal_);
      if (!map_granule(i))
        throw std::runtime_error("toga: cannot map granule " + std::to_string(i) + " of the initial " + std::to_string(n * g) +
                                 " B (" + map_.last_error() + "); lower initial_bytes or free memory");
      out.push_back(i * g);
    }
    note_mapped();
    return out;
  }

  //! A growth for the demand the device recorded since the last growth (failed requests that
  //! growth could serve: `requests`, `bytes` at their served sizes, the largest order, and the
  //! arenas that need a chunk of their own, `chunks`, 512 KiB each added to the bytes): maps the
  //! granules plan_growth chooses, stopping at the first that cannot be mapped (counted in
  //! growth_failures; it is rolled back, the ones before it stay). Returns the offsets mapped
  //! (empty when there was no demand or nothing could be mapped); the caller adopts them.
  std::vector<std::uint64_t> grow(std::uint64_t requests, std::uint64_t bytes, unsigned order, std::uint64_t chunks = 0) {
    std::vector<std::uint64_t> out;
    if (requests == 0) return out;
    for (const std::uint64_t i : plan(bytes, order, chunks)) {
      const std::uint64_t j = map_one(i);
      if (j == no_granule) break;
      out.push_back(j * map_.granule_bytes());
    }
    return out;
  }
  //! map_one's failure.
  static constexpr std::uint64_t no_granule = ~std::uint64_t{0};
  //! grow's two halves, for the growth service (toga/growth_service.hpp), which publishes each
  //! granule as soon as it is mapped: the granules a growth for this demand maps (counted as a
  //! growth request), ...
  std::vector<std::uint64_t> plan(std::uint64_t bytes, unsigned order, std::uint64_t chunks) {
    bytes += chunks * geom::chunk_bytes;  // every arena that failed for want of a chunk gets one
    ++counters_.growth_requests;
    planned_run_ = order < 63 - geom::page_shift && (geom::page_bytes << order) > map_.granule_bytes();
    return plan_growth<Bug>(bytes, order, options_.headroom_bytes, map_.granule_bytes(), usable_,
                            [this](std::uint64_t j) { return map_.is_mapped(j); });
  }
  //! ... and mapping one of them: charged to the device budget, then mapped. When the budget or
  //! the driver refuses and growth_options::spill allows it, the granule is backed by host memory
  //! instead (the host tier), placed at the highest unmapped granule unless the plan is an aligned
  //! run for a large block: host granules gather at the top of the range, where trims (which
  //! withdraw from the top) give them back first. Returns the granule mapped (i, or where the host
  //! granule went), or no_granule (counted in growth_failures; budget_refusals counts the device
  //! budget's refusals, spilled or not) with nothing left charged or mapped.
  //! `ahead` (the growth service's part beyond the demand): device memory only, and a refusal
  //! is not counted (nothing asked for that granule yet).
  std::uint64_t map_one(std::uint64_t i, bool ahead = false) {
    if (map_.is_mapped(i)) {  // a host granule of this growth went there: the lowest unmapped one instead
      if (planned_run_) return no_granule;
      std::uint64_t k = 0;
      while (k < usable_ && map_.is_mapped(k)) ++k;
      if (k == usable_) return no_granule;
      i = k;
    }
    if (charge(i, memory_tier::device)) {
      if (map_granule(i, memory_tier::device)) return mapped_one(i);
    } else if (!ahead) {
      ++counters_.budget_refusals;
    }
    if (ahead) return no_granule;
    if (options_.spill == spill_policy::when_device_full) {
      std::uint64_t j = i;
      if (!planned_run_ && Bug != growth_bug::host_placed_in_plan)
        for (std::uint64_t k = usable_; k-- > i;)
          if (!map_.is_mapped(k)) {
            j = k;
            break;
          }
      constexpr memory_tier charged_tier = Bug == growth_bug::host_charged_as_device ? memory_tier::device : memory_tier::host;
      if (charge(j, charged_tier) && map_granule(j, memory_tier::host)) {
        ++counters_.spilled_granules;
        return mapped_one(j);
      }
    }
    ++counters_.growth_failures;
    return no_granule;
  }
  //! One round of a growth service (toga/growth_service.hpp) over this controller: plan for what
  //! was posted, map granule by granule (publishing each), count the round, its time and its
  //! mapping time, and whether it refused. Returns whether it answered anything. Under the
  //! service's lock (the service thread, one round at a time).
  bool serve(growth_mailbox* m, service_cursor& cursor) {
    const std::uint64_t t0 = steady_ns();
    std::uint64_t map_ns = 0;
    std::size_t demand_n = 0, calls = 0;
    const service_round_result r = service_round<host_atomics>(
        m, cursor,
        [&](std::uint64_t, std::uint64_t bytes, unsigned order, std::uint64_t chunks, std::uint64_t room) {
          std::vector<std::uint64_t> v = plan(bytes, order, chunks);
          demand_n = v.size();
          if (!v.empty() && !planned_run_) add_ahead(v, room);
          if (v.size() > room) v.resize(room);
          return v;
        },
        [&](std::uint64_t i) {
          const std::uint64_t m0 = steady_ns();
          const std::uint64_t j = map_one(i, calls++ >= demand_n);  // (the part ahead of demand)
          map_ns += steady_ns() - m0;
          return j == no_granule ? no_offset : j * map_.granule_bytes();
        },
        [&](std::uint64_t i) { return i * map_.granule_bytes(); });
    if (r.answered) {
      counters_.service_round_ns += steady_ns() - t0;
      counters_.service_map_ns += map_ns;
      ++counters_.service_rounds;
      counters_.service_refusals += r.mapped == 0;
    }
    return r.answered;
  }

  //! The growth service's geometric minimum (growth_options::service_ahead_percent): adds the
  //! lowest unmapped granules not in `v` until `v` holds that percent of the mapped granules.
  //! At most `room` granules in all (what the ring can publish this round), so the search stays
  //! within the ring's 64 entries (it was quadratic in the percent of the mapped granules).
  void add_ahead(std::vector<std::uint64_t>& v, std::uint64_t room = ~std::uint64_t{0}) const {
    const std::uint64_t want = std::min(map_.mapped_granules() * options_.service_ahead_percent / 100, room);
    for (std::uint64_t k = 0; k < usable_ && v.size() < want; ++k)
      if (!map_.is_mapped(k) && std::find(v.begin(), v.end(), k) == v.end()) v.push_back(k);
  }

  //! Whether a synchronising call should trim for the release threshold, and to what
  //! (`keep_bytes`: the threshold rounded up to granules): only when more is mapped than that, and
  //! at least a granule of the mapped memory is not handed out as TBuddy blocks
  //! (`unallocated_bytes`: mapped minus the tree's allocated bytes, after UAlloc's caches were
  //! reclaimed), since otherwise no granule can be wholly free and the trim's walk of the whole
  //! tree (one thread) would find nothing.
  bool threshold_trim(std::uint64_t unallocated_bytes, std::uint64_t& keep_bytes) const noexcept {
    const std::uint64_t g = map_.granule_bytes(), t = options_.release_threshold;
    keep_bytes = Bug == growth_bug::threshold_releases_all ? 0 : (t / g + (t % g != 0)) * g;
    if (t > ~std::uint64_t{0} - g) keep_bytes = ~std::uint64_t{0};
    return mapped_bytes() > keep_bytes && unallocated_bytes >= g;
  }

  //! After a device trim withdrew the granules at `offsets` (heap offsets): unmaps them and
  //! counts the trim. Returns the bytes given back.
  std::uint64_t withdrawn(const std::vector<std::uint64_t>& offsets) noexcept {
    const std::uint64_t g = map_.granule_bytes();
    for (const std::uint64_t off : offsets) {
      map_.unmap(off / g);
      account_.release(std::exchange(charged_[off / g], 0));
    }
    ++counters_.trims;
    counters_.trimmed_bytes += offsets.size() * g;
    note_mapped();
    return offsets.size() * g;
  }

 private:
  //! Records granule i in the account before it is mapped; false (last_refusal() says why) when
  //! the budget refuses it. A failed mapping releases its record (map_granule), so a granule
  //! retried later is charged once.
  bool charge(std::uint64_t i, memory_tier tier = memory_tier::device) {
    last_refusal_.clear();
    if (map_.is_mapped(i)) return true;  // mapped and charged already (map() then does nothing)
    const std::uint64_t id = account_.charge(tier, "granule", map_.granule_bytes(), &last_refusal_);
    if (id == 0) return false;
    charged_[i] = id;
    return true;
  }
  std::uint64_t mapped_one(std::uint64_t i) {
    counters_.grown_bytes += map_.granule_bytes();
    note_mapped();
    return i;
  }
  //! Maps granule i (charged); a failed mapping releases the charge.
  bool map_granule(std::uint64_t i, memory_tier tier = memory_tier::device) {
    if (map_.map(i, tier)) {
      account_.set_address(charged_[i], map_.base() + i * map_.granule_bytes());
      return true;
    }
    const std::uint64_t id = std::exchange(charged_[i], 0);
    if constexpr (Bug != growth_bug::charge_kept_on_failed_map) account_.release(id);
    return false;
  }
  void note_mapped() noexcept {
    counters_.mapped_bytes = mapped_bytes();
    if (counters_.mapped_bytes > counters_.mapped_high_bytes) counters_.mapped_high_bytes = counters_.mapped_bytes;
    counters_.host_mapped_bytes = map_.host_granules() * map_.granule_bytes();
    if (counters_.host_mapped_bytes > counters_.host_mapped_high_bytes) counters_.host_mapped_high_bytes = counters_.host_mapped_bytes;
  }

  growth_options options_;
  granule_map<Provider, Bug> map_;
  std::uint64_t usable_;
  growth_counters counters_{};
  ledger_account account_{};
  std::vector<std::uint64_t> charged_;  // per granule: its budget record (0: none)
  std::string last_refusal_;
  bool planned_run_ = false;  // the last plan was an aligned run for a block larger than a granule
};

//! The growth service's thread (host): calls `round()` (one service_round of the heap, which
//! returns whether it answered anything) every `poll` while idle, at once again after a round
//! that answered. Host calls of the heap hold `lock()` so that they never run beside a round.
//! stop() (also the destructor) sets the mailbox's `stopped` word, so that waiting requests give
//! up, and joins the thread. Not copyable or movable.
class service_thread {
 public:
  service_thread() = default;
  service_thread(const service_thread&) = delete;
  service_thread& operator=(const service_thread&) = delete;
  ~service_thread() { stop(); }

  //! Starts the thread (once). `round` runs under the lock.
  void start(std::function<bool()> round, growth_mailbox* mailbox, std::chrono::microseconds poll = std::chrono::microseconds(20)) {
    mailbox_ = mailbox;
    round_ = std::move(round);
    poll_ = poll;
    thread_ = std::thread([this] { run(); });
  }
  bool running() const noexcept { return thread_.joinable(); }
  //! Held by the heap's host calls (grow_if_needed, trim_to, reset, statistics...).
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mu_); }
  //! Tells waiting requests to give up, stops the thread and joins it. Idempotent.
  void stop() noexcept {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
      if (mailbox_) host_atomics::store(&mailbox_->stopped, std::uint64_t{1}, release, system_scope);
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> g(mu_);
    while (!stop_) {
      bool busy = false;
      try {
        busy = round_();
      } catch (...) {
        // a round must not take the process down: the waiters time out; the heap's host calls
        // report what failed (the granule map keeps the last error)
        busy = false;
      }
      if (!busy) {
        cv_.wait_for(g, poll_, [this] { return stop_; });
      } else {  // let the heap's host calls in between two rounds
        g.unlock();
        std::this_thread::yield();
        g.lock();
      }
    }
  }
  std::function<bool()> round_;
  growth_mailbox* mailbox_ = nullptr;
  std::chrono::microseconds poll_{20};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace toga
