//! @file toga/growth.hpp
//! Host side of a growable heap (design.md §12.5, docs/usage.md §9 "Growable
//! heaps"): one reserved address range of `max_bytes`, physical memory mapped into it granule by
//! granule on demand, and given back at quiescence. Backend-agnostic: the physical memory comes
//! from a *provider* (the CUDA virtual memory management API in toga::cuda::heap; `mmap` and
//! `memfd_create` in toga::cpu::growable_heap, so that this policy runs in CI without a GPU).
//!
//! What lives here:
//!  * `growth_options`: the knobs (max_bytes, initial_bytes, headroom_bytes, release_threshold,
//!    granule_bytes, max_run_bytes...) and their validation;
//!  * `granule_map<Provider>`: the reserved range and which granules have memory behind them.
//!    Granules are mapped in *runs* (design.md §12.8): 2^k consecutive granules, aligned to their
//!    size, behind one physical handle, mapped by three provider calls (create a handle, map it,
//!    grant read-write access) and counted as mapped only when all three succeeded; a failure
//!    undoes exactly the calls that succeeded, so no run is ever half mapped; a run is unmapped
//!    whole. Failures can be injected at the k-th call of each step (tests);
//!  * `plan_growth`: which granules a growth maps, from the demand the device recorded, and
//!    `group_runs`: the runs they are mapped in (granules sized by demand);
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
  //! Bytes of one granule: the unit adopted into the buddy tree and the finest unit mapped and
  //! given back. A power of two, a multiple of the provider's granularity (2 MiB on current NVIDIA
  //! GPUs), at most the capacity. 0: toga's choice, 2 MiB (the GPUs' minimum) or the provider's
  //! granularity if larger, less on a range below 2 MiB.
  std::uint64_t granule_bytes = 0;
  //! Granules sized by demand (design.md §12.8): a growth maps consecutive granules in runs of
  //! up to this many bytes, each run one physical handle (one create, map and set-access: about
  //! 30 us whatever its size, docs/benchmarks.md "What the CUDA VMM API costs"), given back whole
  //! once every granule of it is free. Small demand maps single granules; a block larger than this
  //! maps one run of its own size. A power of two, a multiple of granule_bytes. 0: toga's choice,
  //! 32 MiB (at least one granule, at most the capacity) with toga's granule, one granule (a
  //! handle per granule, the unit chosen) when granule_bytes is set.
  std::uint64_t max_run_bytes = 0;
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
  //! mapped already (geometric growth, like a vector's capacity; 100: doubling), rounded up to whole
  //! runs of max_run_bytes, so that a kernel that fills a heap from empty waits for a few rounds,
  //! not one per granule (design.md §12.6, §12.8). The part beyond the posted demand is device
  //! memory only (it never spills) and is given back by trims and the release threshold like the
  //! rest. 0: the demand only. At most 1,000.
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
  run_table_empty,            //!< the device trim's run table says every granule is a run of its own (runs withdrawn in part)
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
  std::uint64_t runs_mapped = 0;        //!< runs (physical handles) mapped by growths and initial_bytes
  std::uint64_t runs_unmapped = 0;      //!< runs given back by trims
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
  std::uint64_t g = std::max<std::uint64_t>(std::uint64_t{2} << 20, granularity);
  while (g > capacity && g > granularity) g >>= 1;
  if (g > capacity || g < granularity || g % granularity != 0 || g < geom::page_bytes) {
    const std::uint64_t least = std::max<std::uint64_t>(granularity, geom::page_bytes);
    throw std::invalid_argument("toga: max_bytes " + std::to_string(o.max_bytes) + " is smaller than one granule of the memory provider (" +
                                std::to_string(granularity) + " B); the smallest valid max_bytes is " + std::to_string(least) + " B");
  }
  return g;
}

//! The largest run of granules (bytes) for `o` with granules of `granule_bytes` on a range of
//! `capacity` bytes (growth_options::max_run_bytes); std::invalid_argument naming the option when
//! it is not a power of two or not a multiple of the granule.
inline std::uint64_t growth_max_run_bytes(const growth_options& o, std::uint64_t capacity, std::uint64_t granule_bytes) {
  if (o.max_run_bytes != 0) {
    const std::uint64_t r = o.max_run_bytes;
    if ((r & (r - 1)) != 0 || r % granule_bytes != 0)
      throw std::invalid_argument("toga: max_run_bytes " + std::to_string(r) + " is not a power of two and a multiple of the granule (" +
                                  std::to_string(granule_bytes) + " B); use 0 for toga's choice (32 MiB)");
    return std::min(r, capacity);
  }
  if (o.granule_bytes != 0) return granule_bytes;  // a granule chosen by the user stays one handle each
  return std::max(granule_bytes, std::min<std::uint64_t>(std::uint64_t{32} << 20, capacity));
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

//! A reserved range of `granules` x `granule_bytes` bytes and the runs of granules mapped in it
//! (a run: 2^k granules aligned to their size behind one handle; a single granule is a run of
//! one). Move-only; the destructor unmaps and releases every run, then the range (never throws).
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
        mapped_(o.mapped_), host_(o.host_), runs_(o.runs_), refused_tier_(o.refused_tier_), inject_(o.inject_), calls_(o.calls_), error_(std::move(o.error_)) {}
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

  //! Maps the run of 2^`log2n` granules from granule i (create, map, set access; i aligned to the
  //! run, every granule of it unmapped). True when all three succeeded; otherwise the calls that
  //! did succeed are undone (unmap, release), the granules stay unmapped, last_error() says which
  //! call failed and why, and false is returned. True at once if granule i is mapped already
  //! (the run it belongs to, whatever its length).
  bool map_run(std::uint64_t i, unsigned log2n, memory_tier tier = memory_tier::device) {
    if (slots_[i].mapped) return true;
    const std::uint64_t n = std::uint64_t{1} << log2n, bytes = n * granule_;
    char* at = base_ + i * granule_;
    handle_type h{};
    if (!call(growth_step::create, [&](std::string& e) {
          if (refused_tier_[static_cast<unsigned>(tier)]) {
            e = std::string("injected: the ") + to_string(tier) + " tier refuses every granule";
            return false;
          }
          return provider_.create(bytes, h, e, tier);
        }))
      return false;
    if (!call(growth_step::map, [&](std::string& e) { return provider_.map(at, bytes, h, e); })) {
      provider_.unmap(at, bytes);  // a failed map may have changed the range: back to reserved
      if constexpr (Bug != growth_bug::rollback_leaks_handle) provider_.release(h);
      return false;
    }
    if constexpr (Bug == growth_bug::counted_before_access) mark(i, log2n, h, tier);
    if (!call(growth_step::set_access, [&](std::string& e) { return provider_.set_access(at, bytes, e); })) {
      if constexpr (Bug == growth_bug::counted_before_access) return false;
      provider_.unmap(at, bytes);
      if constexpr (Bug != growth_bug::rollback_leaks_handle) provider_.release(h);
      return false;
    }
    if constexpr (Bug != growth_bug::counted_before_access) mark(i, log2n, h, tier);
    return true;
  }
  //! Maps granule i alone (a run of one).
  bool map(std::uint64_t i, memory_tier tier = memory_tier::device) { return map_run(i, 0, tier); }
  //! The tier backing granule i (meaningful while it is mapped).
  memory_tier tier_of(std::uint64_t i) const noexcept { return slots_[i].tier; }
  //! log2 of the granules of the run holding granule i (0 while unmapped).
  unsigned run_log2(std::uint64_t i) const noexcept { return slots_[i].run_log2; }
  //! The first granule of the run holding granule i.
  std::uint64_t run_head(std::uint64_t i) const noexcept { return i & ~((std::uint64_t{1} << slots_[i].run_log2) - 1); }
  //! Per granule, log2 of the granules of its run (0 for unmapped granules): what the device's
  //! trim needs (allocator::trim_granules' run_log2).
  std::vector<std::uint8_t> run_table() const {
    std::vector<std::uint8_t> t(slots_.size());
    if constexpr (Bug == growth_bug::run_table_empty) return t;
    for (std::uint64_t i = 0; i < slots_.size(); ++i) t[i] = slots_[i].run_log2;
    return t;
  }
  //! Runs mapped now.
  std::uint64_t mapped_runs() const noexcept { return runs_; }
  //! Granules mapped now in the host tier.
  std::uint64_t host_granules() const noexcept { return host_; }
  //! Tests: every create of `tier` fails from now on (a device that is full, a driver without host
  //! allocations), or no longer does.
  void refuse_tier(memory_tier tier, bool refuse) noexcept { refused_tier_[static_cast<unsigned>(tier)] = refuse; }
  //! Unmaps and releases the run holding granule i, whole (nothing if i is not mapped). Returns
  //! the granules unmapped. Never throws.
  std::uint64_t unmap(std::uint64_t i) noexcept {
    if (!slots_[i].mapped) return 0;
    const std::uint64_t h = run_head(i), n = std::uint64_t{1} << slots_[i].run_log2;
    slot& s = slots_[h];
    provider_.unmap(base_ + h * granule_, n * granule_);
    provider_.release(s.handle);
    const bool host = s.tier == memory_tier::host;
    for (std::uint64_t j = h; j < h + n; ++j) slots_[j] = slot{};
    mapped_ -= n;
    host_ -= host ? n : 0;
    --runs_;
    return n;
  }

  //! Tests: the k-th call (1-based, counted from now) of `step` fails as if the provider had
  //! refused it ("injected failure"); k = 0 cancels.
  void inject_failure(growth_step step, std::uint64_t k) noexcept {
    inject_[static_cast<unsigned>(step)] = k;
    calls_[static_cast<unsigned>(step)] = 0;
  }

 private:
  struct slot {
    handle_type handle{};  // the run's handle, in its first granule's slot
    bool mapped = false;
    memory_tier tier = memory_tier::device;
    std::uint8_t run_log2 = 0;  // log2 of the granules of the run holding this granule
  };
  void mark(std::uint64_t i, unsigned log2n, const handle_type& h, memory_tier tier) {
    const std::uint64_t n = std::uint64_t{1} << log2n;
    for (std::uint64_t j = i; j < i + n; ++j) {
      slots_[j].mapped = true;
      slots_[j].tier = tier;
      slots_[j].run_log2 = static_cast<std::uint8_t>(log2n);
    }
    slots_[i].handle = h;
    mapped_ += n;
    host_ += tier == memory_tier::host ? n : 0;
    ++runs_;
  }
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
  std::uint64_t mapped_ = 0, host_ = 0, runs_ = 0;
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

//! A run of granules (design.md §12.8): 2^log2 consecutive granules from `first`, aligned to
//! their count, mapped behind one physical handle and given back whole.
struct granule_run {
  std::uint64_t first = 0;
  unsigned log2 = 0;
  std::uint64_t count() const noexcept { return std::uint64_t{1} << log2; }
};

//! Granules sized by demand (design.md §12.8): cuts `granules` (ascending, distinct) into runs
//! of at most 2^`max_log2` granules, each aligned to its size: from the lowest, the longest
//! aligned run of consecutive granules each time. A demand of one granule maps one granule; a
//! heap filling from empty maps runs of the largest size.
inline std::vector<granule_run> group_runs(const std::vector<std::uint64_t>& granules, unsigned max_log2) {
  std::vector<granule_run> out;
  for (std::size_t a = 0; a < granules.size();) {
    unsigned k = 0;
    while (k < max_log2 && k < 63) {
      const std::uint64_t n2 = std::uint64_t{2} << k;
      if ((granules[a] & (n2 - 1)) != 0) break;
      if (a + n2 > granules.size() || granules[a + n2 - 1] != granules[a] + n2 - 1) break;
      ++k;
    }
    out.push_back(granule_run{granules[a], k});
    a += std::size_t{1} << k;
  }
  return out;
}

//! A trim's check before unmapping (design.md §12.8): of the granules at heap offsets `withdrawn`
//! (granules of `granule_bytes`; `run_log2(i)`: log2 of the granules of granule i's run, runs
//! aligned to their size), the first run withdrawn in part, as {its first granule, how many of
//! its granules were withdrawn}; {0, 0} when every run came back whole.
template <class RunLog2>
std::pair<std::uint64_t, std::uint64_t> first_partial_run(const std::vector<std::uint64_t>& withdrawn, std::uint64_t granule_bytes,
                                                          std::uint64_t granules, RunLog2&& run_log2) {
  std::vector<std::uint64_t> seen(granules, 0);  // per run head: granules withdrawn
  for (const std::uint64_t off : withdrawn) {
    const std::uint64_t i = off / granule_bytes;
    ++seen[i & ~((std::uint64_t{1} << run_log2(i)) - 1)];
  }
  for (std::uint64_t h = 0; h < granules; ++h)
    if (seen[h] != 0 && seen[h] != (std::uint64_t{1} << run_log2(h))) return {h, seen[h]};
  return {0, 0};
}

//! The host side of one growable heap: its granule map, options and counters, and the two
//! halves of the protocol that run on the host (the heaps of each backend run the device
//! halves in between). Not thread-safe; call at quiescence (no kernel uses the heap).
//!  * grow: `grow(demand)` maps runs of granules for the demand the device recorded and returns
//!    the granules' offsets; the heap adopts them on the device (allocator::adopt_granule), and
//!    the device's demand counters are reset.
//!  * trim: the heap withdraws wholly free runs on the device (allocator::trim_granules with
//!    run_table()); `withdrawn(offsets)` unmaps them. Withdraw first, then unmap: a granule is
//!    never without memory while the tree can hand it out.
template <class Provider, growth_bug Bug = growth_bug::none>
class growth_controller {
 public:
  //! Reserves the range of `capacity` bytes (see growth_capacity) in granules of `granule_bytes`
  //! (see growth_granule_bytes), aligned to a granule. Maps nothing yet (see map_initial).
  //! std::invalid_argument for a bad max_run_bytes (growth_max_run_bytes).
  growth_controller(Provider provider, const growth_options& o, std::uint64_t capacity, std::uint64_t granule_bytes)
      : options_(o),
        run_log2_(bits::ctz(growth_max_run_bytes(o, capacity, granule_bytes) / granule_bytes)),
        map_(std::move(provider), granule_bytes, capacity / granule_bytes, capacity),
        usable_((o.max_bytes + granule_bytes - 1) / granule_bytes), charged_(capacity / granule_bytes, 0) {}
  growth_controller(growth_controller&& o) noexcept
      : options_(o.options_), run_log2_(o.run_log2_), map_(std::move(o.map_)), usable_(o.usable_), counters_(o.counters_),
        account_(std::move(o.account_)), charged_(std::exchange(o.charged_, {})), last_refusal_(std::move(o.last_refusal_)),
        block_log2_(o.block_log2_) {}
  growth_controller& operator=(growth_controller&&) = delete;
  //! Releases the budget records of the runs still mapped (the granule map unmaps them).
  ~growth_controller() {
    // unmap first, then release the record: the budget never counts less than what is mapped
    for (std::uint64_t i = 0; i < charged_.size(); ++i) {
      if (charged_[i] == 0) continue;
      map_.unmap(i);
      account_.release(charged_[i]);
    }
  }
  //! Unmaps every run and releases their records (a heap's destructor, before its own records).
  void unmap_all() noexcept {
    for (std::uint64_t i = 0; i < map_.granules(); ++i) {
      map_.unmap(i);
      account_.release(std::exchange(charged_[i], 0));
    }
  }

  //! Where each run is recorded and charged before it is mapped (toga/budget.hpp); set it
  //! before map_initial. Without one, nothing is recorded.
  void set_account(ledger_account a) { account_ = std::move(a); }
  const ledger_account& account() const noexcept { return account_; }
  //! Why the last run the budget refused was refused (empty if none was).
  const std::string& last_refusal() const noexcept { return last_refusal_; }

  granule_map<Provider, Bug>& granules() noexcept { return map_; }
  //! Whether the last plan was an aligned run for a block larger than a granule.
  bool planned_run() const noexcept { return block_log2_ != 0; }
  const granule_map<Provider, Bug>& granules() const noexcept { return map_; }
  const growth_options& options() const noexcept { return options_; }
  const growth_counters& counters() const noexcept { return counters_; }
  std::uint64_t granule_bytes() const noexcept { return map_.granule_bytes(); }
  //! The largest run a growth maps for blocks up to a granule (growth_options::max_run_bytes).
  std::uint64_t max_run_bytes() const noexcept { return map_.granule_bytes() << run_log2_; }
  std::uint64_t mapped_bytes() const noexcept { return map_.mapped_granules() * map_.granule_bytes(); }
  //! Per granule, log2 of the granules of its run: the device trim's `run_log2`.
  std::vector<std::uint8_t> run_table() const { return map_.run_table(); }
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

  //! Maps options().initial_bytes (rounded up to granules) from the lowest address up, in runs of
  //! up to max_run_bytes; returns the granules' offsets to adopt. std::runtime_error naming the
  //! failed call when a run cannot be mapped (the runs mapped before it stay mapped and are
  //! returned by the destructor).
  std::vector<std::uint64_t> map_initial() {
    const std::uint64_t g = map_.granule_bytes();
    const std::uint64_t n = std::min((options_.initial_bytes + g - 1) / g, usable_);
    std::vector<std::uint64_t> all(n), out;
    for (std::uint64_t i = 0; i < n; ++i) all[i] = i;
    for (const granule_run& r : group_runs(all, run_log2_)) {
      const std::string what = "granules " + std::to_string(r.first) + ".." + std::to_string(r.first + r.count() - 1) + " of the initial " +
                               std::to_string(n * g) + " B";
      if (!charge(r.first, r.count()))
        throw std::runtime_error("toga: cannot map " + what + ": " + last_refusal_);
      if (!map_granules(r))
        throw std::runtime_error("toga: cannot map " + what + " (" + map_.last_error() + "); lower initial_bytes or free memory");
      for (std::uint64_t j = r.first; j < r.first + r.count(); ++j) out.push_back(j * g);
    }
    note_mapped();
    return out;
  }

  //! A growth for the demand the device recorded since the last growth (failed requests that
  //! growth could serve: `requests`, `bytes` at their served sizes, the largest order, and the
  //! arenas that need a chunk of their own, `chunks`, 512 KiB each added to the bytes): maps the
  //! granules plan_growth chooses in runs (plan_runs), stopping at the first run that cannot be
  //! mapped (counted in growth_failures; it is rolled back, the ones before it stay). Returns
  //! the offsets of the granules mapped (empty when there was no demand or nothing could be
  //! mapped); the caller adopts them.
  std::vector<std::uint64_t> grow(std::uint64_t requests, std::uint64_t bytes, unsigned order, std::uint64_t chunks = 0) {
    std::vector<std::uint64_t> out;
    if (requests == 0) return out;
    for (const granule_run& r : plan_runs(bytes, order, chunks)) {
      const granule_run m = map_run(r);
      if (m.first == no_granule) break;
      for (std::uint64_t j = m.first; j < m.first + m.count(); ++j) out.push_back(j * map_.granule_bytes());
    }
    return out;
  }
  //! map_run's failure (in granule_run::first).
  static constexpr std::uint64_t no_granule = ~std::uint64_t{0};
  //! The granules (ascending) a growth for this demand maps (counted as a growth request):
  //! plan_growth's choice.
  std::vector<std::uint64_t> plan(std::uint64_t bytes, unsigned order, std::uint64_t chunks) {
    bytes += chunks * geom::chunk_bytes;  // every arena that failed for want of a chunk gets one
    ++counters_.growth_requests;
    const bool run = order < 63 - geom::page_shift && (geom::page_bytes << order) > map_.granule_bytes();
    block_log2_ = run ? static_cast<unsigned>(bits::ctz((geom::page_bytes << order) / map_.granule_bytes())) : 0u;
    return plan_growth<Bug>(bytes, order, options_.headroom_bytes, map_.granule_bytes(), usable_,
                            [this](std::uint64_t j) { return map_.is_mapped(j); });
  }
  //! ... in runs (group_runs): of up to max_run_bytes, or of the block's size when a block larger
  //! than that asked for an aligned run. `ahead_room` > 0 (the growth service): first adds the
  //! service's part beyond the demand (add_ahead, up to `ahead_room` runs of the largest size),
  //! and returns at most `ahead_room` runs. The runs of the demand come first (they are
  //! ahead_from() runs; map_run maps those after it with `ahead`).
  std::vector<granule_run> plan_runs(std::uint64_t bytes, unsigned order, std::uint64_t chunks, std::uint64_t ahead_room = 0) {
    std::vector<std::uint64_t> v = plan(bytes, order, chunks);
    const std::uint64_t last_demand = v.empty() ? 0 : v.back();
    if (ahead_room != 0 && !v.empty() && !planned_run()) {
      std::vector<std::uint64_t> more;
      add_ahead(v, more, ahead_room << run_log2_);
      std::vector<std::uint64_t> all(v.size() + more.size());
      std::merge(v.begin(), v.end(), more.begin(), more.end(), all.begin());
      v = std::move(all);
    }
    std::vector<granule_run> runs = group_runs(v, std::max(run_log2_, block_log2_));
    demand_runs_ = 0;  // runs holding a granule of the demand (the lowest: ahead granules lie above)
    while (demand_runs_ < runs.size() && runs[demand_runs_].first <= last_demand) ++demand_runs_;
    if (ahead_room != 0 && runs.size() > ahead_room) runs.resize(ahead_room);
    return runs;
  }
  //! ... and mapping one run: charged to the device budget, then mapped. When the budget or
  //! the driver refuses and growth_options::spill allows it, the run is backed by host memory
  //! instead (the host tier), placed at the highest unmapped aligned run of its size unless the
  //! plan is an aligned run for a large block: host runs gather at the top of the range, where
  //! trims (which withdraw from the top) give them back first. Returns the run mapped (r, or
  //! where the host run went), or first == no_granule (counted in growth_failures;
  //! budget_refusals counts the device budget's refusals, spilled or not) with nothing left
  //! charged or mapped. `ahead` (the growth service's part beyond the demand): device memory
  //! only, and a refusal is not counted (nothing asked for that run yet).
  granule_run map_run(granule_run r, bool ahead = false) {
    const granule_run none{no_granule, r.log2};
    if (!run_unmapped(r.first, r.count())) {  // a host run of this growth went there: the lowest free run instead
      if (planned_run()) return none;
      const std::uint64_t k = find_unmapped_run(r.count(), false);
      if (k == no_granule) return none;
      r.first = k;
    }
    if (charge(r.first, r.count(), memory_tier::device)) {
      if (map_granules(r, memory_tier::device)) return mapped_run(r);
    } else if (!ahead) {
      ++counters_.budget_refusals;
    }
    if (ahead) return none;
    if (options_.spill == spill_policy::when_device_full) {
      granule_run h = r;
      if (!planned_run() && Bug != growth_bug::host_placed_in_plan) {
        const std::uint64_t k = find_unmapped_run(r.count(), true);
        if (k != no_granule && k > r.first) h.first = k;
      }
      constexpr memory_tier charged_tier = Bug == growth_bug::host_charged_as_device ? memory_tier::device : memory_tier::host;
      if (charge(h.first, h.count(), charged_tier) && map_granules(h, memory_tier::host)) {
        counters_.spilled_granules += h.count();
        return mapped_run(h);
      }
    }
    ++counters_.growth_failures;
    return none;
  }
  //! One round of a growth service (toga/growth_service.hpp) over this controller: plan runs for
  //! what was posted, map them one by one (publishing each), count the round, its time and its
  //! mapping time, and whether it refused. Returns whether it answered anything. Under the
  //! service's lock (the service thread, one round at a time).
  bool serve(growth_mailbox* m, service_cursor& cursor) {
    const std::uint64_t t0 = steady_ns();
    std::uint64_t map_ns = 0;
    std::size_t calls = 0;
    const std::uint64_t g = map_.granule_bytes();
    const service_round_result r = service_round<host_atomics>(
        m, cursor,
        [&](std::uint64_t, std::uint64_t bytes, unsigned order, std::uint64_t chunks, std::uint64_t room) {
          return plan_runs(bytes, order, chunks, room);
        },
        [&](const granule_run& run) {
          const std::uint64_t m0 = steady_ns();
          const granule_run j = map_run(run, calls++ >= demand_runs_);  // (the part ahead of demand)
          map_ns += steady_ns() - m0;
          return j.first == no_granule ? no_offset : ring_entry(j.first * g, j.log2);
        },
        [&](const granule_run& run) { return ring_entry(run.first * g, run.log2); });
    if (r.answered) {
      counters_.service_round_ns += steady_ns() - t0;
      counters_.service_map_ns += map_ns;
      ++counters_.service_rounds;
      counters_.service_refusals += r.mapped == 0;
    }
    return r.answered;
  }

  //! The growth service's geometric minimum (growth_options::service_ahead_percent): the lowest
  //! unmapped granules not in `v` (ascending), into `more`, until `v` and `more` hold that percent
  //! of the mapped granules, rounded up to whole runs of max_run_bytes (a waiting kernel pays for
  //! a round, not for its bytes: a run's calls cost what a granule's do); at most `cap` granules in
  //! `more` (what the ring can publish this round in runs of the largest size). Nothing when the
  //! percent is 0 (the demand only).
  void add_ahead(const std::vector<std::uint64_t>& v, std::vector<std::uint64_t>& more, std::uint64_t cap) const {
    const std::uint64_t pct = options_.service_ahead_percent, run = std::uint64_t{1} << run_log2_;
    std::uint64_t want = pct == 0 ? 0 : std::max<std::uint64_t>(map_.mapped_granules() * pct / 100, v.size());
    want = (want + run - 1) / run * run;  // whole runs of the largest size
    std::size_t at = 0;  // v is ascending: a merge, not a search
    for (std::uint64_t k = 0; k < usable_ && v.size() + more.size() < want && more.size() < cap; ++k) {
      while (at < v.size() && v[at] < k) ++at;
      if (!map_.is_mapped(k) && !(at < v.size() && v[at] == k)) more.push_back(k);
    }
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

  //! After a device trim withdrew the granules at `offsets` (heap offsets; whole runs, as the
  //! run table says): unmaps their runs and counts the trim. Returns the bytes given back.
  //! std::logic_error (nothing unmapped) if a run was withdrawn in part: its other granules may
  //! hold blocks (a toga bug).
  std::uint64_t withdrawn(const std::vector<std::uint64_t>& offsets) {
    const std::uint64_t g = map_.granule_bytes();
    const auto [h, n] = first_partial_run(offsets, g, map_.granules(), [this](std::uint64_t i) { return map_.run_log2(i); });
    if (n != 0)
      throw std::logic_error("toga: a trim withdrew " + std::to_string(n) + " of the " + std::to_string(std::uint64_t{1} << map_.run_log2(h)) +
                             " granules of the run at granule " + std::to_string(h) + "; nothing was unmapped (a toga bug: please report it)");
    std::uint64_t unmapped = 0;
    for (const std::uint64_t off : offsets) {
      const std::uint64_t i = off / g;
      if (!map_.is_mapped(i)) continue;
      const std::uint64_t head = map_.run_head(i);
      unmapped += map_.unmap(head);
      account_.release(std::exchange(charged_[head], 0));
      ++counters_.runs_unmapped;
    }
    ++counters_.trims;
    counters_.trimmed_bytes += unmapped * g;
    note_mapped();
    return unmapped * g;
  }

 private:
  //! Whether the `n` granules from i are all unmapped.
  bool run_unmapped(std::uint64_t i, std::uint64_t n) const noexcept {
    if (i + n > usable_) return false;
    for (std::uint64_t j = i; j < i + n; ++j)
      if (map_.is_mapped(j)) return false;
    return true;
  }
  //! The lowest (or highest) first granule of an aligned run of `n` unmapped granules below
  //! usable_granules, or no_granule.
  std::uint64_t find_unmapped_run(std::uint64_t n, bool from_top) const noexcept {
    const std::uint64_t runs = usable_ / n;
    for (std::uint64_t t = 0; t < runs; ++t) {
      const std::uint64_t i = (from_top ? runs - 1 - t : t) * n;
      if (run_unmapped(i, n)) return i;
    }
    return no_granule;
  }
  //! Records the run of `n` granules from i in the account before it is mapped; false
  //! (last_refusal() says why) when the budget refuses it. A failed mapping releases its record
  //! (map_granules), so a run retried later is charged once.
  bool charge(std::uint64_t i, std::uint64_t n, memory_tier tier = memory_tier::device) {
    last_refusal_.clear();
    if (map_.is_mapped(i)) return true;  // mapped and charged already (map_run then does nothing)
    const std::uint64_t id = account_.charge(tier, "granule", n * map_.granule_bytes(), &last_refusal_);  // (a run: one record)
    if (id == 0) return false;
    charged_[i] = id;
    return true;
  }
  granule_run mapped_run(const granule_run& r) {
    counters_.grown_bytes += r.count() * map_.granule_bytes();
    note_mapped();
    return r;
  }
  //! Maps run r (charged); a failed mapping releases the charge.
  bool map_granules(const granule_run& r, memory_tier tier = memory_tier::device) {
    if (map_.map_run(r.first, r.log2, tier)) {
      account_.set_address(charged_[r.first], map_.base() + r.first * map_.granule_bytes());
      ++counters_.runs_mapped;
      return true;
    }
    const std::uint64_t id = std::exchange(charged_[r.first], 0);
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
  unsigned run_log2_;  // log2 of the granules of the largest run for blocks up to a granule
  granule_map<Provider, Bug> map_;
  std::uint64_t usable_;
  growth_counters counters_{};
  ledger_account account_{};
  std::vector<std::uint64_t> charged_;  // per run, in its first granule: its budget record (0: none)
  std::string last_refusal_;
  unsigned block_log2_ = 0;  // the last plan's aligned run for a block larger than a granule: 2^block_log2_ granules (0: none)
  std::size_t demand_runs_ = 0;  // the last plan_runs' runs for the demand (the rest: ahead of it)
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
