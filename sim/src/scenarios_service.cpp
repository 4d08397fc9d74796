// The `grow-service` scenario (issue 30; toga/growth_service.hpp, design.md §12.6): a growable
// heap with a growth service. The last lane plays the service (the host thread: its own fiber with
// its own scheduling points), the others allocate `ops` blocks each (size, or size << (lane % 3)
// with mixed=1) from a heap that starts with nothing mapped, so that their requests wait for the
// service, adopt what it publishes and retry while other lanes allocate, adopt and free. The
// service maps at most `budget` granules (-1: every one) and refuses after that, as a driver or a
// device budget would; with ahead=N each round maps at least N % of the granules mapped (the
// growth controller's geometric minimum); its "driver call" is a scheduling point between choosing a granule and the
// granule having memory (a ghost bit per granule). After the workers finish, the service lane
// adopts what nobody adopted (the host's synchronising call), then the workers' blocks are freed.
//
// Checked: S1 every block lies in granules the service had mapped when the block was handed out;
// S2 a request got nullptr only when the service had refused, when every granule was mapped, or
// at its deadline (wait_us; the default is beyond any schedule's length, so with it nullptr means
// a refusal or a full range); S3 at quiescence every nullptr is counted once (the relay's timeouts
// + refusals, heap failures), and the granules adopted are exactly those the service mapped; S4
// every block's pattern intact at its free; S5 no request gives up (exhausted or refused) while
// the mapped granules hold every lane's requests 4 times over plus a superbin and a chunk per SM
// and class; the heap walk with no live block; S6 (reuse=1: each worker frees its blocks when
// done and asks once more for a block of 8x its size, another class; checked with one worker
// lane) that request is not refused while it fits twice in the mapped memory (with the block it
// needs: a chunk for a UAlloc class, order_needed): the walk that its
// failed attempt left to growth must run before it gives up (design.md §12.9). A waiter that
// never wakes is a `livelock` verdict (the run's step bound).
// bug: 1 a granule published before it is mapped, 2 the adopter's lock not atomic (a granule
// adopted twice: the core's TOGA_REQUIRE), 3 a lost wake-up (waiting for the round to change from
// a value read after posting), 4 a refusing round that does not say so, 5 the courier reads the
// service's `answered` and mirrors `published` without acquire/release (weak memory: an adopter
// reads a ring entry older than the one the service wrote), 6 the courier relays only when there
// is new demand to forward (the answer to the last demand is never mirrored: a lost wake-up), 7 a
// request whose failed attempt an adoption overlapped posts anyway and, with every granule
// mapped, gives up as exhausted (S5), 8 a refused waiter gives up without adopting and trying
// what earlier rounds published (S5), 9 adopting a ring entry adopts the first granule of its run
// only (S3: mapped and adopted granules differ). With run=N (a power of two) the service maps
// consecutive granules in runs of up to N granules, one ring entry each (group_runs, design.md
// §12.8). 10 a request that gives up on growth returns nullptr without the reclaim walk it left
// to growth (S6 with reuse=1), 11 a request whose attempts skipped a superbin class's fallbacks
// while growth came first gives up without trying them (S7). S7 (one worker lane): no nullptr
// while TBuddy holds a free block that serves the request (design.md §12.10); churn=1 makes
// holes for it: each worker frees every second block as soon as it has the next; so does first=N
// (each worker's first allocation is N bytes, e.g. a TBuddy block beside a superbin class).
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <sys/mman.h>

#include "toga/allocator.hpp"
#include "toga/growth.hpp"
#include "toga/growth_service.hpp"
#include "toga/heap_walk.hpp"
#include "toga/sim/ghost.hpp"
#include "toga/sim/platform.hpp"
#include "toga/sim/scenario.hpp"
#include "toga/sim/world.hpp"

namespace toga::sim {
namespace {

using P = toga::sim::platform;
std::string str(std::uint64_t v) { return std::to_string(v); }

template <service_bug Bug>
struct service_inst final : instance {
  using A = allocator<P, ualloc_bug::none, tbuddy_bug::none, false, Bug>;
  struct unmapper {
    std::uint64_t len;
    void operator()(char* p) const { munmap(p, len); }
  };
  unsigned lanes, workers, ops, sms;
  std::uint64_t size, first, granule_bytes = 0, granules = 0, hb = 0;
  bool mixed, reuse, churn;
  std::int64_t budget;
  std::uint64_t ahead;
  unsigned run_log2 = 0;  // the service's largest run: 2^run_log2 granules  // percent of the mapped granules a round maps at least (growth_options::service_ahead_percent)
  heap_layout layout;
  std::unique_ptr<char, unmapper> heap;
  std::vector<std::uint64_t> meta;
  A a;
  growth_mailbox mailbox{};
  service_cursor cursor{};
  // ghost state (the host's knowledge, and the lanes' results)
  std::vector<bool> mapped;  // per granule: the service's driver call returned
  std::uint64_t mapped_count = 0, nulls = 0, driver_calls = 0;
  std::uint32_t finished = 0, all_freed = 0;
  std::string violation;
  std::vector<std::vector<std::pair<char*, std::uint64_t>>> blocks;  // per lane: its blocks and their sizes

  service_inst(world& w, const params& p)
      : lanes(w.config().lanes()),
        workers(lanes - 1),
        ops(static_cast<unsigned>(p.get("ops", 2))),
        sms(w.config().sms),
        size(static_cast<std::uint64_t>(p.get("size", 4096))),
        first(static_cast<std::uint64_t>(p.get("first", 0))),
        mixed(p.get("mixed", 0) != 0),
        reuse(p.get("reuse", 0) != 0),
        churn(p.get("churn", 0) != 0),
        budget(p.get("budget", -1)),
        ahead(static_cast<std::uint64_t>(p.get("ahead", 0))),
        blocks(lanes) {
    while ((std::int64_t{2} << run_log2) <= p.get("run", 1)) ++run_log2;
    const std::uint64_t heap_bytes = static_cast<std::uint64_t>(p.get("heap_kib", 1024)) * 1024;
    layout = heap_layout::make<P>(heap_layout::levels_for(heap_bytes), w.config().sms, static_cast<int>(p.get("sb_shift", -1)));
    hb = geom::page_bytes << (layout.levels - 1);
    void* r = mmap(nullptr, hb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) throw std::runtime_error("mmap of the simulated heap failed");
    heap = std::unique_ptr<char, unmapper>(static_cast<char*>(r), unmapper{hb});
    meta.assign(layout.bytes / 8 + 1, 0);
    a = A::make(heap.get(), reinterpret_cast<char*>(meta.data()), layout);
    granule_bytes = std::min<std::uint64_t>(static_cast<std::uint64_t>(p.get("granule_kib", 256)) * 1024, hb / 2);
    unsigned go = 0;
    while ((geom::page_bytes << go) < granule_bytes) ++go;
    a.init_growable(0, go);
    granules = hb / granule_bytes;
    mapped.assign(granules, false);
    a.globals->growth.service = reinterpret_cast<std::uint64_t>(&mailbox);
    a.globals->growth.service_wait_ns = static_cast<std::uint64_t>(p.get("wait_us", 10'000'000)) * 1000;
    ghost_table::current().clear();
    w.add_invariant("S1 every block lies in granules the service has mapped", [this]() -> std::optional<std::string> {
      if (!violation.empty()) return violation;
      return std::nullopt;
    });
  }

  // The order of the smallest TBuddy block that serves a request of `bytes` once no superbin or
  // bin can be had (S7): a chunk for UAlloc's classes (16 B and 32 B; 64 B .. 1 KiB without a
  // superbin class), a block of the request's size otherwise (a superbin class's fallback).
  unsigned order_needed(std::uint64_t bytes) const {
    const bool superbin_class = bytes >= geom::sb_min_class_bytes && bytes <= a.sb_max_bytes;
    if (bytes <= geom::ualloc_always_max_bytes || (!superbin_class && bytes <= geom::max_class_bytes))
      return geom::order_of(geom::chunk_bytes);  // UAlloc's classes come from chunks only
    return geom::order_of(std::bit_ceil(std::max<std::uint64_t>(bytes, geom::page_bytes)));  // (a superbin class's fallback: a block of its size)
  }
  std::uint64_t size_of(unsigned lane, unsigned k) const {
    if (k == 0 && first != 0) return first;
    return mixed ? size << ((lane + k) % 3) : size;
  }
  bool is_service() const { return P::block_id() * P::block_dim() + P::thread_id() == lanes - 1; }

  // The service: rounds until every worker finished, then the host's adoption at quiescence.
  void service() {
    const auto plan = [&](std::uint64_t, std::uint64_t bytes, unsigned order, std::uint64_t chunks, std::uint64_t room) {
      std::vector<std::uint64_t> v = plan_growth(bytes + chunks * geom::chunk_bytes, order, 0, granule_bytes, granules,
                                                 [&](std::uint64_t i) { return static_cast<bool>(mapped[i]); });
      // mapping ahead of demand (growth_controller::add_ahead): the lowest other unmapped granules
      const bool run = order < 63 - geom::page_shift && (geom::page_bytes << order) > granule_bytes;
      unsigned k = run_log2;
      if (run) while ((granule_bytes << k) < (geom::page_bytes << order)) ++k;
      for (std::uint64_t j = 0; !run && !v.empty() && j < granules && v.size() < mapped_count * ahead / 100; ++j)
        if (!mapped[j] && std::find(v.begin(), v.end(), j) == v.end()) v.push_back(j);
      std::sort(v.begin(), v.end());
      std::vector<granule_run> runs = group_runs(v, k);
      if (runs.size() > room) runs.resize(room);
      return runs;
    };
    const auto map = [&](const granule_run& r) {
      if (budget >= 0 && mapped_count + r.count() > static_cast<std::uint64_t>(budget)) return no_offset;  // the driver refuses
      P::store(&driver_calls, driver_calls + 1, relaxed, device_scope);  // the driver call: a scheduling point
      for (std::uint64_t j = r.first; j < r.first + r.count(); ++j) mapped[j] = true;
      mapped_count += r.count();
      return ring_entry(r.first * granule_bytes, r.log2);
    };
    const auto offset = [&](const granule_run& r) { return ring_entry(r.first * granule_bytes, r.log2); };
    for (unsigned attempt = 0; P::load(&finished, acquire, device_scope) < workers;) {
      if (service_round<P, Bug>(&mailbox, cursor, plan, map, offset).answered) continue;
      P::backoff(attempt++);
    }
    // the host's synchronising call, at quiescence: adopt what no waiter adopted
    (void)growth_waiter<P, Bug>::adopt_published(&a.globals->growth.relay, &mailbox, P::load(&mailbox.published, acquire, system_scope),
                                                 [&](std::uint64_t e) { return a.adopt_entry(e); }, ~std::uint64_t{0});
    P::store(&all_freed, 1u, release, device_scope);
  }

  void lane() override {
    if (is_service()) return service();
    const unsigned me = P::block_id() * P::block_dim() + P::thread_id();
    auto& mine = blocks[me];
    for (unsigned k = 0; k < ops; ++k) {
      const std::uint64_t bytes = size_of(me, k);
      char* q = static_cast<char*>(a.allocate(bytes));
      if (q == nullptr) {
        ++nulls;
        const std::uint64_t wait = a.globals->growth.service_wait_ns;
        const bool refused = mailbox.refused != 0, full = a.globals->growth.mapped_granules >= granules;
        // S5: "full" is no excuse while the heap could hold every request of every lane 4 times
        // over with a superbin and a chunk per SM and class to spare
        std::uint64_t demand = 0;
        for (unsigned l = 0; l + 1 < lanes; ++l)
          for (unsigned j = 0; j < ops; ++j) demand += size_of(l, j);
        const std::uint64_t spare = std::uint64_t{sms} * 3 * ((std::uint64_t{1} << layout.sb_shift) + geom::chunk_bytes);
        const std::uint64_t mapped_now = mapped_count * granule_bytes;  // (every granule when the range is full)
        if ((refused || full) && wait >= 1'000'000'000 && 4 * demand + spare <= mapped_now && violation.empty())
          violation = "S5 lane " + str(me) + " got nullptr for " + str(bytes) + " B (" + (full ? "exhausted" : "refused") + "), though the " +
                      str(mapped_now) + " B mapped are 4x the " + str(demand) +
                      " B all lanes ask for (and a superbin and chunk per SM and class more); TBuddy hands out " +
                      str(collect_statistics(a).buddy_bytes) + " B, superbins of " + str(std::uint64_t{1} << layout.sb_shift) + " B";
        // S7 (one worker: nothing else allocates or frees meanwhile, and the walk before giving
        // up gave nothing back): no nullptr while TBuddy holds a free block that serves the
        // request (order_needed)
        if (workers == 1 && violation.empty())
          if (const unsigned k = order_needed(bytes); first_free_node_of(a.small.buddy, k) != 0)
            violation = "S7 lane " + str(me) + " got nullptr for " + str(bytes) + " B (" + (full ? "exhausted" : refused ? "refused" : "timed out") +
                        ") while TBuddy holds a free block of order " + str(k) + " (4 KiB x 2^" + str(k) + ") that serves it";
        if (!refused && !full && wait >= 1'000'000'000 && violation.empty())
          violation = "S2 lane " + str(me) + " got nullptr for " + str(bytes) + " B though the service never refused, " +
                      str(a.globals->growth.mapped_granules) + " of " + str(granules) + " granules are adopted, and its wait is unbounded";
        continue;
      }
      const std::uint64_t off = static_cast<std::uint64_t>(q - a.small.base);
      for (std::uint64_t g = off / granule_bytes; g <= (off + bytes - 1) / granule_bytes; ++g)
        if (!mapped[g] && violation.empty())
          violation = "S1 lane " + str(me) + " was handed " + str(bytes) + " B at offset " + str(off) + ", in granule " + str(g) +
                      " that the service has not mapped yet";
      std::memset(q, static_cast<int>(me + 1), bytes);
      mine.emplace_back(q, bytes);
      // churn=1: every second block goes back as soon as the next one is served (holes in the heap)
      if (churn && k % 2 == 1 && mine.size() >= 2) {
        free_checked(me, mine[mine.size() - 2]);
        mine.erase(mine.end() - 2);
      }
    }
    if (reuse) reuse_once(me, mine);
    P::fetch_add(&finished, 1u, release, device_scope);
    // free after the service's final adoption, so that its counts are those of quiescence
    for (unsigned attempt = 0; P::load(&all_freed, acquire, device_scope) == 0; ++attempt) P::backoff(attempt);
    for (const auto& blk : mine) free_checked(me, blk);
  }

  // S4: the block still holds lane me's pattern; then it is freed.
  void free_checked(unsigned me, const std::pair<char*, std::uint64_t>& blk) {
    const auto [q, bytes] = blk;
    for (std::uint64_t i = 0; i < bytes; ++i)
      if (q[i] != static_cast<char>(me + 1)) {
        if (violation.empty()) violation = "S4 a block of lane " + str(me) + " was overwritten at byte " + str(i);
        break;
      }
    a.deallocate(q);
  }

  // reuse=1: the worker frees its blocks and asks once for 8x its size (another class, which
  // needs a superbin, a chunk or a TBuddy block the freed ones may hold cached); S6.
  void reuse_once(unsigned me, std::vector<std::pair<char*, std::uint64_t>>& mine) {
    for (const auto& blk : mine) a.deallocate(blk.first);
    mine.clear();
    const std::uint64_t bytes = size << 3;
    char* q = static_cast<char*>(a.allocate(bytes));
    if (q == nullptr) {
      ++nulls;
      // One worker only: it has freed everything, so a walk gives the whole mapped memory back
      // (empty bins and superbins, cached chunks). With several, another arena's hysteresis and
      // GROWs in flight keep memory that no bound here accounts for exactly.
      const std::uint64_t mapped_now = a.globals->growth.mapped_granules * granule_bytes;
      // (what it needs: at least a block of order_needed, e.g. a whole chunk for a UAlloc class)
      const std::uint64_t need = std::max(bytes, geom::page_bytes << order_needed(bytes));
      if (workers == 1 && a.globals->growth.service_wait_ns >= 1'000'000'000 && 2 * need <= mapped_now && violation.empty())
        violation = "S6 lane " + str(me) + " got nullptr for " + str(bytes) + " B after freeing all its blocks, though " + str(mapped_now) +
                    " B are mapped and nothing else is live: the reclaim walk its attempt left to growth did not run";
      return;
    }
    std::memset(q, static_cast<int>(me + 1), bytes);
    mine.emplace_back(q, bytes);
  }

  std::optional<std::string> check_final() override {
    if (!violation.empty()) return violation;
    const std::uint64_t timeouts = a.globals->growth.relay.timeouts, refusals = a.globals->growth.relay.refusals;
    const heap_statistics st = collect_statistics(a);
    if (nulls != timeouts + refusals + st.failed)
      return "S3 the lanes saw " + str(nulls) + " nullptr; the heap counts " + str(timeouts) + " timeouts + " + str(refusals) +
             " refusals + " + str(st.failed) + " failures";
    if (a.globals->growth.mapped_granules != mapped_count)
      return "S3 " + str(mapped_count) + " granules mapped by the service, " + str(a.globals->growth.mapped_granules) + " adopted";
    if (mailbox.adopted != mailbox.published)
      return "S3 " + str(mailbox.published) + " granules published, " + str(mailbox.adopted) + " adopted";
    heap_quality q;
    if (auto e = check_quiescent(a, &q)) return "heap walk: " + *e;
    if (q.live_blocks != 0) return "heap walk: " + str(q.live_blocks) + " live blocks at quiescence";
    return std::nullopt;
  }
};

std::unique_ptr<instance> make_service(world& w, const params& p) {
  switch (p.get("bug", 0)) {
    case 1: return std::make_unique<service_inst<service_bug::published_before_mapped>>(w, p);
    case 2: return std::make_unique<service_inst<service_bug::adopt_lock_not_atomic>>(w, p);
    case 3: return std::make_unique<service_inst<service_bug::lost_wakeup>>(w, p);
    case 4: return std::make_unique<service_inst<service_bug::refusal_not_published>>(w, p);
    case 5: return std::make_unique<service_inst<service_bug::relay_mirror_relaxed>>(w, p);
    case 6: return std::make_unique<service_inst<service_bug::relay_only_with_news>>(w, p);
    case 7: return std::make_unique<service_inst<service_bug::adoption_overlap_ignored>>(w, p);
    case 8: return std::make_unique<service_inst<service_bug::refusal_ignores_adoptions>>(w, p);
    case 9: return std::make_unique<service_inst<service_bug::run_adopts_head_only>>(w, p);
    case 10: return std::make_unique<service_inst<service_bug::give_up_without_walk>>(w, p);
    case 11: return std::make_unique<service_inst<service_bug::give_up_without_fallbacks>>(w, p);
    default: return std::make_unique<service_inst<service_bug::none>>(w, p);
  }
}

}  // namespace

void register_service_scenarios() {
  scenario sc = with_keys(
      {"grow-service",
       "growable heap with a growth service: the last lane maps granules (at most `budget`) while the others' requests wait, "
       "adopt and retry; params warps=2 threads=2 sms=1 ops=2 size=4096 mixed=0 heap_kib=1024 granule_kib=256 budget=-1 "
       "wait_us=10000000 ahead=0 run=1 bug=0 (1 granule published before it is mapped, 2 adopter lock not atomic, 3 lost wake-up, 4 a "
       "refusal not published, 5 the courier's mirror without acquire/release, 6 the courier relays only new demand, 7 a failure an adoption overlapped gives up as exhausted, 8 a refused waiter does not try what was published, 9 a run's "
       "entry adopts its first granule only, 10 a request that gives up on growth skips the reclaim walk left to growth, 11 a request that skipped a superbin class's "
       "fallbacks while growth came first gives up without trying them); reuse=1: "
       "workers free their blocks and ask once for 8x the size (S6); churn=1: workers free every second block at once; first=N: each worker's first "
       "allocation is N bytes (holes for S7)",
       expectation::pass,
       [](const params& p) {
         return launch_config{static_cast<unsigned>(p.get("sms", 1)), static_cast<unsigned>(p.get("warps", 2)),
                              static_cast<unsigned>(p.get("threads", 2))};
       },
       make_service, run_limits{20'000, 400'000}, {}, {}},
      {drawn({"warps", 1, 64, 2, "warps (one block each); the last lane is the service"}, 1, 3),
       drawn({"threads", 1, 32, 2, "threads per warp"}, 1, 8, draw_kind::near_pow2),
       drawn({"sms", 1, 64, 1, "SMs (one arena each)"}, 1, 3),
       drawn({"ops", 1, 1'000, 2, "allocations per worker lane"}, 1, 4),
       drawn({"size", 1, std::int64_t{1} << 20, 4096, "bytes per allocation"}, 16, 65536, draw_kind::near_pow2),
       drawn({"mixed", 0, 1, 0, "1: sizes size << ((lane + k) % 3)"}, 0, 1),
       drawn({"first", 0, std::int64_t{1} << 20, 0, "bytes of each worker's first allocation (0: as the others)"}, 4096, 131072, draw_kind::pow2, true),
       drawn({"heap_kib", 64, std::int64_t{1} << 20, 1024, "heap range in KiB"}, 512, 4096, draw_kind::pow2),
       drawn({"granule_kib", 4, std::int64_t{1} << 19, 256, "granule size in KiB (at most half the heap)"}, 64, 1024, draw_kind::pow2),
       drawn({"budget", -1, 100'000, -1, "granules the service maps before refusing (-1: all)"}, 0, 4, draw_kind::uniform, true),
       drawn_from({"wait_us", 1, 60'000'000, 10'000'000, "how long a request waits for the service (us; 100 ns per scheduling point)"},
                  {1, 50, 2'000}, true),
       drawn_from({"ahead", 0, 1'000, 0, "percent of the mapped granules a round maps at least (service_ahead_percent)"}, {0, 100, 300}),
       drawn({"run", 1, 64, 1, "the largest run of granules one ring entry carries (max_run_bytes / granule)"}, 1, 8, draw_kind::pow2, true),
       {"sb_shift", -1, geom::sb_max_shift, -1, "log2 of the superbin bytes (0: none; -1: toga's choice)"},
       drawn({"reuse", 0, 1, 0, "1: each worker frees its blocks when done and asks once for 8x its size (S6)"}, 0, 1),
       drawn({"churn", 0, 1, 0, "1: each worker frees every second block as soon as it has the next (holes for S7)"}, 0, 1),
       {"bug", 0, 11, 0, "planted bug"}});
  sc.shape_limit = [](const params& p) -> std::optional<std::string> {
    const std::int64_t lanes = p.get("sms", 1) * p.get("warps", 2) * p.get("threads", 2);
    if (lanes < 2) return "one lane: no worker beside the service";
    if (lanes > 24) return "more than 24 lanes";
    if (lanes * p.get("ops", 2) > 64) return "more than 64 allocations";
    return std::nullopt;
  };
  sc.check = [](const params& p) -> std::optional<std::string> {
    if (p.get("sms", 1) * p.get("warps", 2) * p.get("threads", 2) < 2)
      return "grow-service needs at least 2 lanes (the last one is the service)";
    if (const std::int64_t r = p.get("run", 1); (r & (r - 1)) != 0) return "run=" + std::to_string(r) + " must be a power of two";
    return std::nullopt;
  };
  add_scenario(std::move(sc));
}

}  // namespace toga::sim
