//! @file toga/cpu/growable_heap.hpp
//! A growable toga heap on the CPU (issue 14): the same core and the same host growth policy as
//! `toga::cuda::heap(heap_options)` (toga/growth.hpp), with physical memory from Linux instead of
//! the CUDA VMM API, so that the policy (steps, headroom, release threshold, rollback of failed
//! mappings) runs in CI without a GPU. Threads started by `toga::cpu::launch` allocate through
//! `view()`; the host calls (grow_if_needed, trim_to, synchronize) run at quiescence.
//!
//! `memfd_provider` maps the VMM calls onto Linux: the reserved range is an `mmap(PROT_NONE,
//! MAP_NORESERVE)`; a granule's handle is a `memfd_create` file of the granule's size (create),
//! mapped over the reservation with `mmap(MAP_SHARED | MAP_FIXED)` (map), made read-write with
//! `mprotect` (set access); unmap puts the inaccessible reservation back (`mmap(PROT_NONE,
//! MAP_FIXED)`), release closes the file, which returns its pages. A touch of an unmapped granule
//! is a segmentation fault, as it is an illegal address on a GPU.
//!
//! Units: bytes. Alignment and size classes: as toga::cuda::heap. Thread-safety: view() is safe
//! from any number of launched threads; every other member is not thread-safe and must run
//! while no thread uses the heap. Linux only.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "toga/allocator.hpp"
#include "toga/cpu/platform.hpp"
#include "toga/growth.hpp"
#include "toga/heap_walk.hpp"

namespace toga::cpu {

//! Physical memory for growable heaps from Linux (see the file comment); a toga growth provider.
class memfd_provider {
 public:
  using handle_type = int;  //!< the memfd's file descriptor

  std::uint64_t granularity() const { return static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)); }
  char* reserve(std::uint64_t bytes, std::uint64_t alignment, std::string& err) {
    const std::uint64_t len = bytes + alignment;
    void* p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      err = std::string("mmap(PROT_NONE): ") + std::strerror(errno);
      return nullptr;
    }
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t start = (a + alignment - 1) & ~static_cast<std::uintptr_t>(alignment - 1);
    if (start > a) munmap(p, start - a);  // trim the unaligned head and the tail
    const std::uintptr_t end = start + bytes;
    if (a + len > end) munmap(reinterpret_cast<void*>(end), a + len - end);
    return reinterpret_cast<char*>(start);
  }
  void unreserve(char* base, std::uint64_t bytes) noexcept { munmap(base, bytes); }
  //! Both tiers are Linux memory here (the host tier is told apart only by the heap's counts).
  bool supports(memory_tier, std::string&) const { return true; }
  bool create(std::uint64_t bytes, handle_type& h, std::string& err, memory_tier = memory_tier::device) {
    h = memfd_create("toga-granule", MFD_CLOEXEC);
    if (h < 0) {
      err = std::string("memfd_create: ") + std::strerror(errno);
      return false;
    }
    if (ftruncate(h, static_cast<off_t>(bytes)) != 0) {
      err = std::string("ftruncate: ") + std::strerror(errno);
      close(h);
      return false;
    }
    ++live_handles;
    return true;
  }
  bool map(char* at, std::uint64_t bytes, const handle_type& h, std::string& err) {
    void* p = mmap(at, bytes, PROT_NONE, MAP_SHARED | MAP_FIXED, h, 0);
    if (p == MAP_FAILED) {
      err = std::string("mmap(MAP_FIXED): ") + std::strerror(errno);
      return false;
    }
    mapped.insert(at);
    return true;
  }
  bool set_access(char* at, std::uint64_t bytes, std::string& err) {
    if (mprotect(at, bytes, PROT_READ | PROT_WRITE) == 0) return true;
    err = std::string("mprotect: ") + std::strerror(errno);
    return false;
  }
  void unmap(char* at, std::uint64_t bytes) noexcept {
    (void)mmap(at, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    mapped.erase(at);
  }
  void release(const handle_type& h) noexcept {
    close(h);
    --live_handles;
  }

  long live_handles = 0;     //!< handles created and not released (tests: nothing leaks)
  std::set<char*> mapped;  //!< granules whose memfd is mapped now (tests: nothing stays mapped)
};

//! Where a CPU heap records its memory (toga/budget.hpp): a ledger (nullptr: nowhere) and the cpu
//! device index whose budget it is charged to.
struct cpu_accounting {
  memory_ledger* ledger = &process_memory_ledger();
  int device = 0;
};

//! A growable heap on the CPU (see the file comment). Move-less: keep it where it was made.
//! `Bug` plants a bug of the host policy (tests only; growable_heap has none).
template <growth_bug Bug = growth_bug::none>
class basic_growable_heap {
 public:
  using allocator_type = toga::allocator<platform>;

  //! Reserves `o.max_bytes` (rounded up to a power of two) and maps `o.initial_bytes`;
  //! `arenas` UAlloc arenas (launched threads pick arena sm_id % arenas), `limit_bytes` the byte
  //! limit (0: none). Throws std::invalid_argument (an option out of range: the message names
  //! it), std::runtime_error (the range or the initial granules cannot be had).
  //! Its metadata and every granule are recorded in `accounting.ledger` (toga/budget.hpp) as
  //! memory of cpu device `accounting.device`, and refused past that device's budget:
  //! construction throws toga::bad_alloc, a growth maps what fits (growth_counters::budget_refusals).
  explicit basic_growable_heap(const growth_options& o, unsigned arenas = 4, std::uint64_t limit_bytes = 0, cpu_accounting accounting = {})
      : capacity_(growth_capacity(o, heap_layout::max_heap_bytes)),
        ctl_(memfd_provider{}, o, capacity_, growth_granule_bytes(o, capacity_, memfd_provider{}.granularity())),
        limit_(limit_bytes) {
    if (arenas == 0) throw std::invalid_argument("toga::cpu::growable_heap: arenas must be at least 1");
    layout_ = heap_layout::make<platform>(heap_layout::levels_for(capacity_), arenas);
    if (o.service) mailbox_ = std::make_unique<growth_mailbox>();
    if (accounting.ledger) {
      const std::uint64_t owner = accounting.ledger->new_owner();
      ctl_.set_account({accounting.ledger, memory_backend::cpu, accounting.device, owner,
                        "cpu growable heap #" + std::to_string(owner) + " (" + format_bytes(capacity_) + " range)"});
    }
    try {
      std::string refusal;
      const std::uint64_t id = ctl_.account().charge(memory_tier::device, "metadata", layout_.bytes + 8, &refusal);
      if (id == 0) throw toga::bad_alloc("toga::cpu::growable_heap: cannot record its metadata: " + refusal);
      meta_.assign(layout_.bytes / 8 + 1, 0);
      ctl_.account().set_address(id, meta_.data());
      initialise();
      try {
        adopt(ctl_.map_initial());
      } catch (const std::runtime_error& e) {
        if (ctl_.last_refusal().empty()) throw;
        throw toga::bad_alloc(std::string("toga::cpu::growable_heap: ") + e.what());
      }
      if (o.service) service_.start([this] { return ctl_.serve(mailbox_.get(), cursor_); }, mailbox_.get());
    } catch (...) {
      ctl_.unmap_all();
      ctl_.account().release_all();
      throw;
    }
  }
  //! Unmaps everything and removes the heap's records from its ledger.
  ~basic_growable_heap() {
    service_.stop();  // waiting requests give up; no round runs from here on
    ctl_.unmap_all();  // the memory goes first, then its records
    std::vector<std::uint64_t>().swap(meta_);
    ctl_.account().release_all();
  }
  basic_growable_heap(const basic_growable_heap&) = delete;
  basic_growable_heap& operator=(const basic_growable_heap&) = delete;

  //! The allocator: allocate / deallocate from threads started by toga::cpu::launch.
  const allocator_type& view() const noexcept { return view_; }
  std::uint64_t capacity() const noexcept { return capacity_; }
  std::uint64_t granule_bytes() const noexcept { return ctl_.granule_bytes(); }
  std::uint64_t mapped_bytes() const noexcept { return ctl_.mapped_bytes(); }
  //! What the host policy did, with the growth service's figures (growth_options::service).
  growth_counters counters() {
    auto g = hold();
    growth_counters c = ctl_.counters();
    if (mailbox_) {
      read_service_tally(view_.globals->growth.relay, c);
    }
    return c;
  }
  //! Whether a growth service runs (growth_options::service).
  bool has_service() const noexcept { return service_.running(); }
  //! The device-side growth counters (mapped granules, adoptions, withdrawals, pending demand).
  growth_state device_state() const noexcept { return view_.globals->growth; }
  //! The granule map (tests: inject_failure, provider().live_handles).
  granule_map<memfd_provider, Bug>& granules() noexcept { return ctl_.granules(); }
  heap_statistics stats() const { return collect_statistics(view_); }

  //! As toga::cuda::heap::grow_if_needed: maps for the demand recorded since the last call and
  //! adopts it; applies the release threshold when there was none. Returns the bytes mapped.
  std::uint64_t grow_if_needed() {
    auto lk = hold();
    adopt_published();
    growth_state& g = view_.globals->growth;
    if (g.demand_requests == 0) {
      apply_threshold();
      return 0;
    }
    ctl_.note_demand(g.demand_requests);
    const std::vector<std::uint64_t> mapped =
        ctl_.grow(g.demand_requests, g.demand_bytes, static_cast<unsigned>(g.demand_max_order), g.demand_chunks);
    g.demand_requests = g.demand_bytes = g.demand_max_order = g.demand_chunks = 0;
    for (std::uint64_t& w : g.demand_arena_bits) w = 0;
    adopt(mapped);
    return mapped.size() * ctl_.granule_bytes();
  }
  //! As toga::cuda::heap::trim_to: reclaim, withdraw wholly free granules from the top until at
  //! most `min_bytes_to_keep` (rounded up to granules) stay mapped, unmap them. Returns the bytes unmapped.
  std::uint64_t trim_to(std::uint64_t min_bytes_to_keep) {
    auto lk = hold();
    adopt_published();
    return trim_to_locked(min_bytes_to_keep);
  }
  //! The synchronising call: applies the release threshold.
  void synchronize() {
    auto lk = hold();
    adopt_published();
    apply_threshold();
  }
  //! Gives back UAlloc's caches (allocator::trim), then applies the release threshold.
  void trim() {
    auto lk = hold();
    adopt_published();
    on_one_thread([&] { view_.trim(); });
    apply_threshold();
  }
  //! Frees every block: a fresh tree into which every mapped granule is adopted again.
  void reset() {
    auto lk = hold();
    ctl_.reset_counters();
    std::fill(meta_.begin(), meta_.end(), 0);
    initialise();
    if (mailbox_) {  // every mapped granule is adopted below, published or not: the mailbox starts again
      *mailbox_ = growth_mailbox{};
      cursor_ = service_cursor{};
    }
    std::vector<std::uint64_t> mapped;
    for (std::uint64_t i = 0; i < ctl_.granules().granules(); ++i)
      if (ctl_.granules().is_mapped(i)) mapped.push_back(i * ctl_.granule_bytes());
    adopt(mapped);
    apply_threshold();
  }
  //! The heap walk (toga/heap_walk.hpp) over the live heap: the first invariant violated, or nothing.
  std::optional<std::string> check(heap_quality* q = nullptr) const { return check_quiescent(view_, q); }

 private:
  std::uint64_t trim_to_locked(std::uint64_t min_bytes_to_keep) {
    std::vector<std::uint64_t> withdrawn;
    const std::vector<std::uint8_t> runs = ctl_.run_table();  // whole runs go back, or none of a run
    on_one_thread([&] { view_.trim_granules(min_bytes_to_keep, [&](std::uint64_t off) { withdrawn.push_back(off); }, runs.data()); });
    return ctl_.withdrawn(withdrawn);
  }
  // The service's lock, when it runs (host calls never run beside a round).
  std::unique_lock<std::mutex> hold() { return service_.running() ? service_.lock() : std::unique_lock<std::mutex>(); }
  // At quiescence: adopts the granules the service published that no waiting request adopted.
  void adopt_published() {
    if (!mailbox_) return;
    on_one_thread([&] {
      growth_mailbox* m = mailbox_.get();
      (void)growth_waiter<platform>::adopt_published(&view_.globals->growth.relay, m, host_atomics::load(&m->published, acquire, system_scope),
                                                     [&](std::uint64_t e) { return view_.adopt_entry(e); }, ~std::uint64_t{0});
    });
  }
  template <class F>
  static void on_one_thread(F&& f) {
    launch(1, 1, 1, f);
  }
  void initialise() {
    const unsigned go = static_cast<unsigned>(bits::ctz(ctl_.granule_bytes()) - geom::page_shift);
    view_ = allocator_type::make(ctl_.granules().base(), reinterpret_cast<char*>(meta_.data()), layout_);
    view_.init_growable(limit_, go);
    view_.globals->growth.max_granules = ctl_.usable_granules();
    if (mailbox_) {
      view_.globals->growth.service = reinterpret_cast<std::uint64_t>(mailbox_.get());
      view_.globals->growth.service_wait_ns = ctl_.options().service_wait_us * 1000;
    }
  }
  void adopt(const std::vector<std::uint64_t>& offsets) {
    std::uint64_t refused = 0;
    on_one_thread([&] {
      for (const std::uint64_t off : offsets) refused += !view_.adopt_granule(off);
    });
    if (refused != 0)
      throw std::logic_error("toga::cpu::growable_heap: " + std::to_string(refused) + " newly mapped granules were not unmapped in the tree (a toga bug)");
  }
  void apply_threshold() {
    std::uint64_t keep = 0;
    if (!ctl_.threshold_trim(ctl_.granule_bytes(), keep)) return;  // nothing above the threshold
    on_one_thread([&] { view_.trim(); });                          // reclaim, then look: anything free?
    const std::uint64_t allocated = view_.globals->limit.reserved;
    if (ctl_.threshold_trim(mapped_bytes() > allocated ? mapped_bytes() - allocated : 0, keep)) (void)trim_to_locked(keep);
  }

  std::uint64_t capacity_;
  growth_controller<memfd_provider, Bug> ctl_;
  std::uint64_t limit_;
  heap_layout layout_{};
  std::vector<std::uint64_t> meta_;
  allocator_type view_{};
  std::unique_ptr<growth_mailbox> mailbox_;  // growth_options::service: the requests' and the service's words
  service_cursor cursor_{};
  service_thread service_;  // last: stopped first (the destructor stops it explicitly too)
};

//! The growable CPU heap.
using growable_heap = basic_growable_heap<>;

}  // namespace toga::cpu
