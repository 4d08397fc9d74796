// The `tenants` scenario (issue 31; toga/tenants.hpp, docs/usage.md §12.4): two tenants of one
// heap race at their quotas; lanes 0-1, 4-5, ... are tenant 0 and lanes 2-3, 6-7, ... tenant 1, so
// that lanes of one warp charge one tenant together (a group). Each lane allocates `ops` blocks of
// `size` bytes (mixed=1: odd lanes twice that) aligned to `align` (0: the header's 16 B) for its
// tenant; with cross=1 each lane of tenant 0 hands its last block to its partner lane (lane ^ 2,
// tenant 1); every lane frees the rest and what it was handed through its own tenant's handle
// (a free credits the block's tenant, not the caller's). With requota=N the lanes
// meet after their first allocations, lane 0 (playing the host between two launches) sets tenant
// 0's quota to N blocks while blocks are live, the lanes meet again and allocate `ops` more.
//
// Checked: Q1 at every success, the tenant's ghost bytes (its live blocks at their served size)
// stay within its quota of the moment; at quiescence Q2 every tenant's `used` is 0 and equals the
// ghost, Q3 allocations == deallocations (by tenant), Q4 `high` never above the highest quota
// the tenant had, Q5 failed_quota + failed_heap == the nullptrs its lanes saw, Q6 every block's
// pattern intact at its free, and the heap walk (check_quiescent) with no live block.
// bug: 1 a free credits the caller's tenant, 2 the quota is checked before the charge (load,
// compare, add), 3 a request the heap cannot serve keeps its charge.
#include <algorithm>
#include <cstring>
#include <memory>
#include <sys/mman.h>

#include "toga/allocator.hpp"
#include "toga/heap_walk.hpp"
#include "toga/sim/ghost.hpp"
#include "toga/sim/platform.hpp"
#include "toga/sim/scenario.hpp"
#include "toga/sim/world.hpp"
#include "toga/tenants.hpp"

namespace toga::sim {
namespace {

using P = toga::sim::platform;
std::string str(std::uint64_t v) { return std::to_string(v); }

template <tenant_bug Bug>
struct tenants_inst final : instance {
  using A = allocator<P>;
  struct unmapper {
    std::uint64_t len;
    void operator()(char* p) const { munmap(p, len); }
  };
  unsigned lanes, ops;
  std::uint64_t size, served = 0, align;
  bool cross, mixed;
  std::int64_t requota;
  heap_layout layout;
  std::unique_ptr<char, unmapper> heap;
  std::vector<std::uint64_t> meta;
  A a;
  tenant_table table{};
  // ghost state
  std::uint64_t quota[2] = {}, highest_quota[2] = {};
  std::uint64_t ghost_bytes[2] = {}, nulls[2] = {};
  std::string violation;
  std::vector<std::uint64_t> mailbox;  // per lane: the block handed to it (pointer value), or 0
  std::uint32_t met = 0, finished = 0;

  tenants_inst(world& w, const params& p)
      : lanes(w.config().lanes()),
        ops(static_cast<unsigned>(p.get("ops", 2))),
        size(static_cast<std::uint64_t>(p.get("size", 2048))),
        align(static_cast<std::uint64_t>(p.get("align", 0))),
        cross(p.get("cross", 1) != 0),
        mixed(p.get("mixed", 0) != 0),
        requota(p.get("requota", -1)),
        mailbox(lanes, 0) {
    const std::uint64_t heap_bytes = static_cast<std::uint64_t>(p.get("heap_kib", 16)) * 1024;
    layout = heap_layout::make<P>(heap_layout::levels_for(heap_bytes), w.config().sms, static_cast<int>(p.get("sb_shift", -1)));
    const std::uint64_t hb = geom::page_bytes << (layout.levels - 1);
    void* r = mmap(nullptr, hb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) throw std::runtime_error("mmap of the simulated heap failed");
    heap = std::unique_ptr<char, unmapper>(static_cast<char*>(r), unmapper{hb});
    meta.assign(layout.bytes / 8 + 1, 0);
    a = A::make(heap.get(), reinterpret_cast<char*>(meta.data()), layout);
    a.init_after_zero(0, 0, A::presplit_chunks_auto);
    ghost_table::current().clear();
    served = served_of(size);
    for (unsigned t = 0; t < 2; ++t) {
      quota[t] = highest_quota[t] = served * static_cast<std::uint64_t>(p.get(t == 0 ? "quota0" : "quota1", t == 0 ? 1 : 3));
      table.t[t].quota = quota[t];
    }
    w.add_invariant("Q1 no tenant's live blocks above its quota", [this]() -> std::optional<std::string> {
      if (!violation.empty()) return violation;
      return std::nullopt;
    });
  }

  // What tenant_allocate charges for a request of `bytes` (the header, the alignment).
  std::uint64_t served_of(std::uint64_t bytes) const {
    const std::uint64_t off = align > tenant_header_bytes ? align : tenant_header_bytes;
    return a.served_bytes((bytes ? bytes : 1) + off, align > tenant_header_bytes ? align : 0);
  }
  std::uint64_t size_of(unsigned lane) const { return mixed && (lane & 1) ? 2 * size : size; }
  static unsigned tenant_of(unsigned lane) { return (lane / 2) % 2; }

  void meet(std::uint32_t n) {
    P::fetch_add(&met, 1u, acq_rel, device_scope);
    for (unsigned attempt = 0; P::load(&met, acquire, device_scope) < n * lanes; ++attempt) P::backoff(attempt);
  }
  // One allocation of tenant t by lane `me`; the block keeps `me + 1` in its words.
  void alloc_one(unsigned me, unsigned t, std::vector<char*>& mine) {
    const std::uint64_t bytes = size_of(me);
    char* q = static_cast<char*>(tenant_allocate<P, Bug>(a, &table, t, bytes, align));
    if (q == nullptr) {
      ++nulls[t];
      return;
    }
    const std::uint64_t want_align = align > tenant_header_bytes ? align : tenant_header_bytes;
    if (reinterpret_cast<std::uintptr_t>(q) % want_align != 0 && violation.empty())
      violation = "a block of lane " + str(me) + " is not aligned to " + str(want_align) + " B";
    ghost_bytes[t] += served_of(bytes);
    if (ghost_bytes[t] > quota[t] && violation.empty())
      violation = "tenant " + str(t) + " holds " + str(ghost_bytes[t]) + " B of live blocks, above its quota of " + str(quota[t]) + " B";
    std::memset(q, static_cast<int>(me + 1), bytes);
    mine.push_back(q);
  }
  // Frees `q` (allocated by lane `owner`, whose tenant is tenant_of(owner)) through tenant t's handle.
  void free_one(char* q, unsigned owner, unsigned t) {
    const std::uint64_t bytes = size_of(owner);
    for (std::uint64_t i = 0; i < bytes; ++i)
      if (q[i] != static_cast<char>(owner + 1)) {
        if (violation.empty()) violation = "Q6 a block of lane " + str(owner) + " was overwritten at byte " + str(i);
        break;
      }
    ghost_bytes[tenant_of(owner)] -= served_of(bytes);
    tenant_deallocate<P, Bug>(a, &table, t, q);
  }

  void lane() override {
    const unsigned me = P::block_id() * P::block_dim() + P::thread_id();
    const unsigned t = tenant_of(me);
    std::vector<char*> mine;
    for (unsigned i = 0; i < ops; ++i) alloc_one(me, t, mine);
    if (requota >= 0) {
      meet(1);
      if (me == 0) {  // the host, between two launches: no lane allocates now
        quota[0] = served * static_cast<std::uint64_t>(requota);
        highest_quota[0] = std::max(highest_quota[0], quota[0]);
        P::store(&table.t[0].quota, quota[0], relaxed, device_scope);
      }
      meet(2);
      for (unsigned i = 0; i < ops; ++i) alloc_one(me, t, mine);
    }
    const unsigned partner = me ^ 2u;
    // (one way only, tenant 0 to tenant 1: a free credited to the wrong tenant must not be cancelled
    // by one the other way)
    if (cross && t == 0 && partner < lanes && !mine.empty()) {
      P::store(&mailbox[partner], reinterpret_cast<std::uint64_t>(mine.back()), release, device_scope);
      mine.pop_back();
    }
    for (char* q : mine) free_one(q, me, t);
    P::fetch_add(&finished, 1u, release, device_scope);
    for (unsigned attempt = 0;; ++attempt) {
      const bool all = P::load(&finished, acquire, device_scope) == lanes;
      const std::uint64_t got = P::exchange(&mailbox[me], std::uint64_t{0}, acq_rel, device_scope);
      if (got) free_one(reinterpret_cast<char*>(got), partner, t);  // the partner's block, its tenant's
      if (all) break;
      P::backoff(attempt);
    }
  }

  std::optional<std::string> check_final() override {
    if (!violation.empty()) return violation;
    for (unsigned t = 0; t < 2; ++t) {
      const tenant_counters& c = table.t[t];
      const std::string who = "tenant " + str(t) + ": ";
      if (c.used != ghost_bytes[t] || c.used != 0)
        return "Q2 " + who + "used " + str(c.used) + " B at quiescence, its live blocks " + str(ghost_bytes[t]) + " B";
      if (c.allocations != c.deallocations)
        return "Q3 " + who + str(c.allocations) + " allocations, " + str(c.deallocations) + " frees credited";
      if (c.high > highest_quota[t]) return "Q4 " + who + "high-water " + str(c.high) + " B above its quota " + str(highest_quota[t]) + " B";
      if (c.failed_quota + c.failed_heap != nulls[t])
        return "Q5 " + who + str(c.failed_quota) + " quota + " + str(c.failed_heap) + " heap failures counted, its lanes saw " +
               str(nulls[t]) + " nullptr";
    }
    heap_quality q;
    if (auto e = check_quiescent(a, &q)) return "heap walk: " + *e;
    if (q.live_blocks != 0) return "heap walk: " + str(q.live_blocks) + " live blocks at quiescence";
    return std::nullopt;
  }
};

std::unique_ptr<instance> make_tenants(world& w, const params& p) {
  switch (p.get("bug", 0)) {
    case 1: return std::make_unique<tenants_inst<tenant_bug::free_credits_caller>>(w, p);
    case 2: return std::make_unique<tenants_inst<tenant_bug::quota_checked_before_charge>>(w, p);
    case 3: return std::make_unique<tenants_inst<tenant_bug::charge_kept_on_heap_failure>>(w, p);
    default: return std::make_unique<tenants_inst<tenant_bug::none>>(w, p);
  }
}

}  // namespace

void register_tenant_scenarios() {
  scenario sc = with_keys(
      {"tenants",
       "two tenants of one heap race at their quotas (lanes 0-1, 4-5, ... tenant 0; 2-3, 6-7, ... tenant 1), blocks freed "
       "across tenants, a quota changed between launches; params warps=2 threads=2 sms=1 ops=2 size=2048 heap_kib=16 "
       "quota0=1 quota1=3 (blocks) cross=1 requota=-1 (blocks; -1: none) mixed=0 align=0 bug=0 (1 a free credits the "
       "caller's tenant, 2 quota checked before the charge, 3 a heap failure keeps its charge)",
       expectation::pass,
       [](const params& p) {
         return launch_config{static_cast<unsigned>(p.get("sms", 1)), static_cast<unsigned>(p.get("warps", 2)),
                              static_cast<unsigned>(p.get("threads", 2))};
       },
       make_tenants},
      {drawn({"warps", 1, 64, 2, "warps (one block each)"}, 1, 4),
       drawn({"threads", 1, 32, 2, "threads per warp"}, 1, 8, draw_kind::near_pow2),
       drawn({"sms", 1, 64, 1, "SMs (one arena each)"}, 1, 3),
       drawn({"ops", 1, 1'000, 2, "allocations per lane (per phase with requota)"}, 1, 4),
       drawn({"size", 0, std::int64_t{1} << 20, 2048, "bytes per allocation (served with a 16 B tenant header)"}, 0, 8192, draw_kind::near_pow2),
       drawn({"mixed", 0, 1, 0, "1: odd lanes ask for twice size (two sizes in one group)"}, 0, 1),
       drawn_from({"align", 0, 1 << 16, 0, "alignment asked for (0: none, the header's 16 B; a power of two)"}, {32, 256, 4096}, true),
       drawn({"heap_kib", 4, std::int64_t{1} << 20, 16, "heap size in KiB"}, 16, 1024, draw_kind::pow2),
       drawn({"quota0", 0, 100'000, 1, "tenant 0's quota in blocks"}, 0, 8),
       drawn({"quota1", 0, 100'000, 3, "tenant 1's quota in blocks"}, 0, 8),
       drawn({"cross", 0, 1, 1, "1: each lane frees its last block through the other tenant's lane"}, 0, 1),
       drawn({"requota", -1, 100'000, -1, "tenant 0's quota in blocks after the lanes' first allocations (-1: unchanged)"}, 0, 8,
             draw_kind::uniform, true),
       {"sb_shift", -1, geom::sb_max_shift, -1, "log2 of the superbin bytes (0: none; -1: toga's choice)"},
       {"bug", 0, 3, 0, "planted bug"}});
  sc.check = [](const params& p) -> std::optional<std::string> {
    const std::int64_t al = p.get("align", 0);
    if (al != 0 && (al & (al - 1)) != 0) return "align=" + std::to_string(al) + " is not a power of two (0 for none)";
    return std::nullopt;
  };
  sc.shape_limit = [](const params& p) -> std::optional<std::string> {
    const std::int64_t lanes = p.get("sms", 1) * p.get("warps", 2) * p.get("threads", 2);
    if (lanes > 32) return "more than 32 lanes";
    if (lanes * p.get("ops", 2) * 2 > 128) return "more than 128 allocations";
    return std::nullopt;
  };
  add_scenario(std::move(sc));
}

}  // namespace toga::sim
