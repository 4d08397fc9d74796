// The `two-devices` scenario (issue 32; design.md §23.5, docs/simulator.md §21): one heap used by
// the kernels of two devices. The launch's SMs are split over two devices (launch_config::devices:
// each device numbers its SMs from 0, so SM 0 of both devices uses arena 0; device scope covers
// one device's lanes, system scope both). Every lane allocates `ops` blocks of `size` bytes
// (mixed=1: odd lanes twice that), fills them with its mark, hands its last block to its partner
// lane on the other device (the block's heap offset through a mailbox, system scope), frees the
// rest, then frees what it was handed.
//
// The heap runs toga::allocator<toga::system_scoped<P>> (every word at system scope); bug=1 runs
// the core as a one-device heap has it (device scope), which two devices must not share: that is
// a scoped race, the verdict the memory model gives a device-scope word touched from two devices.
//
// Checked: D1 at every allocation, the block overlaps no live block (ghost map); D2 at every free,
// the block's mark intact; at quiescence D3 allocations == deallocations and the failures counted
// == the nullptrs the lanes saw, and the heap walk (check_quiescent) with no live block.
#include <sys/mman.h>

#include <cstring>
#include <map>
#include <memory>

#include "toga/allocator.hpp"
#include "toga/heap_walk.hpp"
#include "toga/sharing.hpp"
#include "toga/sim/platform.hpp"
#include "toga/sim/scenario.hpp"
#include "toga/sim/world.hpp"

namespace toga::sim {
namespace {

using P = toga::sim::platform;
std::string str(std::uint64_t v) { return std::to_string(v); }

template <class Plat>
struct two_devices_inst final : instance {
  using A = allocator<Plat>;
  struct unmapper {
    std::uint64_t len;
    void operator()(char* p) const { munmap(p, len); }
  };
  unsigned lanes, ops;
  std::uint64_t size;
  bool mixed;
  heap_layout layout;
  std::unique_ptr<char, unmapper> heap;
  std::vector<std::uint64_t> meta;
  A a;
  std::vector<unsigned> partner;        // per lane: its partner on the other device, or ~0u
  std::vector<std::uint64_t> mailbox;   // per lane: heap offset + 1 of a block handed to it, or 0
  std::uint32_t finished = 0;
  // ghost state
  std::map<std::uint64_t, std::uint64_t> live;  // offset -> end
  std::uint64_t nulls = 0;
  std::string violation;

  two_devices_inst(world& w, const params& p)
      : lanes(w.config().lanes()),
        ops(static_cast<unsigned>(p.get("ops", 2))),
        size(static_cast<std::uint64_t>(p.get("size", 64))),
        mixed(p.get("mixed", 0) != 0),
        partner(lanes, ~0u),
        mailbox(lanes, 0) {
    const std::uint64_t heap_bytes = static_cast<std::uint64_t>(p.get("heap_kib", 64)) * 1024;
    const unsigned arenas = w.config().sms / w.config().devices;  // each device's SM k uses arena k
    layout = heap_layout::make<Plat>(heap_layout::levels_for(heap_bytes), arenas, static_cast<int>(p.get("sb_shift", -1)));
    const std::uint64_t hb = geom::page_bytes << (layout.levels - 1);
    void* r = mmap(nullptr, hb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) throw std::runtime_error("mmap of the simulated heap failed");
    heap = std::unique_ptr<char, unmapper>(static_cast<char*>(r), unmapper{hb});
    meta.assign(layout.bytes / 8 + 1, 0);
    a = A::make(heap.get(), reinterpret_cast<char*>(meta.data()), layout);
    a.init_after_zero(0, 0, A::presplit_chunks_auto);
    // the k-th lane of device 0 and the k-th lane of device 1 are partners
    const launch_config& c = w.config();
    std::vector<std::vector<unsigned>> on(c.devices);  // (the scenario launches two)
    for (unsigned i = 0; i < lanes; ++i) {
      on[((i / c.threads_per_block) % c.sms) % c.devices].push_back(i);
    }
    for (std::size_t k = 0; k < on[0].size() && k < on[1].size(); ++k) {
      partner[on[0][k]] = on[1][k];
      partner[on[1][k]] = on[0][k];
    }
    w.add_invariant("D1 no block overlaps a live block; D2 marks intact", [this]() -> std::optional<std::string> {
      if (!violation.empty()) return violation;
      return std::nullopt;
    });
  }

  std::uint64_t size_of(unsigned lane) const { return mixed && (lane & 1) ? 2 * size : size; }

  void claim(char* q, std::uint64_t bytes, unsigned me) {
    const std::uint64_t off = static_cast<std::uint64_t>(q - heap.get()), end = off + bytes;
    auto it = live.upper_bound(off);
    const bool after = it != live.end() && it->first < end;
    const bool before = it != live.begin() && std::prev(it)->second > off;
    if ((after || before) && violation.empty())
      violation = "D1 lane " + str(me) + " got [" + str(off) + ", " + str(end) + ") over a live block";
    live[off] = end;
  }
  void free_block(char* q, unsigned owner) {
    const std::uint64_t bytes = size_of(owner);
    for (std::uint64_t i = 0; i < bytes; ++i)
      if (q[i] != static_cast<char>(owner + 1)) {
        if (violation.empty()) violation = "D2 a block of lane " + str(owner) + " was overwritten at byte " + str(i);
        break;
      }
    live.erase(static_cast<std::uint64_t>(q - heap.get()));
    a.deallocate(q);
  }

  void lane() override {
    const unsigned me = P::block_id() * P::block_dim() + P::thread_id();
    std::vector<char*> mine;
    for (unsigned i = 0; i < ops; ++i) {
      const std::uint64_t bytes = size_of(me);
      char* q = static_cast<char*>(a.allocate(bytes));
      if (q == nullptr) {
        ++nulls;
        continue;
      }
      claim(q, bytes, me);
      std::memset(q, static_cast<int>(me + 1), bytes);
      mine.push_back(q);
    }
    if (partner[me] != ~0u && !mine.empty()) {  // to the other device, as a heap offset
      P::store(&mailbox[partner[me]], static_cast<std::uint64_t>(mine.back() - heap.get()) + 1, release, system_scope);
      mine.pop_back();
    }
    for (char* q : mine) free_block(q, me);
    P::fetch_add(&finished, 1u, release, system_scope);
    for (unsigned attempt = 0;; ++attempt) {
      const bool all = P::load(&finished, acquire, system_scope) == lanes;
      const std::uint64_t got = P::exchange(&mailbox[me], std::uint64_t{0}, acq_rel, system_scope);
      if (got) free_block(heap.get() + (got - 1), partner[me]);
      if (all) break;
      P::backoff(attempt);
    }
  }

  std::optional<std::string> check_final() override {
    if (!violation.empty()) return violation;
    const heap_statistics s = collect_statistics(a);
    if (s.allocations != s.deallocations) return "D3 " + str(s.allocations) + " allocations, " + str(s.deallocations) + " frees";
    if (s.failed != nulls) return "D3 " + str(s.failed) + " failures counted, the lanes saw " + str(nulls) + " nullptr";
    heap_quality q;
    if (auto e = check_quiescent(a, &q)) return "heap walk: " + *e;
    if (q.live_blocks != 0) return "heap walk: " + str(q.live_blocks) + " live blocks at quiescence";
    return std::nullopt;
  }
};

std::unique_ptr<instance> make_two_devices(world& w, const params& p) {
  if (p.get("bug", 0) == 1) return std::make_unique<two_devices_inst<P>>(w, p);
  return std::make_unique<two_devices_inst<system_scoped<P>>>(w, p);
}

}  // namespace

void register_sharing_scenarios() {
  scenario sc = with_keys(
      {"two-devices",
       "one heap used by kernels of two devices (SMs split over two devices, each numbering its SMs from 0): lanes "
       "allocate, fill, hand their last block to a partner lane on the other device and free; the heap at system scope "
       "(toga::system_scoped); params sms=1 (per device) warps=1 (blocks per device) threads=2 ops=2 size=64 mixed=0 "
       "heap_kib=64 sb_shift=-1 bug=0 (1: the heap's words at device scope, a one-device heap shared by two devices)",
       expectation::pass,
       [](const params& p) {
         const unsigned sms = static_cast<unsigned>(p.get("sms", 1)), warps = static_cast<unsigned>(p.get("warps", 1));
         launch_config c{2 * sms, 2 * warps, static_cast<unsigned>(p.get("threads", 2))};
         c.devices = 2;
         return c;
       },
       make_two_devices},
      {drawn({"sms", 1, 32, 1, "SMs per device (one arena each; SM k of both devices shares arena k)"}, 1, 3),
       drawn({"warps", 1, 32, 1, "blocks per device (one warp each)"}, 1, 3),
       drawn({"threads", 1, 32, 2, "threads per block"}, 1, 8, draw_kind::near_pow2),
       drawn({"ops", 1, 1'000, 2, "allocations per lane"}, 1, 4),
       drawn({"size", 0, std::int64_t{1} << 20, 64, "bytes per allocation"}, 0, 8192, draw_kind::near_pow2),
       drawn({"mixed", 0, 1, 0, "1: odd lanes ask for twice size"}, 0, 1),
       drawn({"heap_kib", 4, std::int64_t{1} << 20, 64, "heap size in KiB"}, 16, 1024, draw_kind::pow2),
       {"sb_shift", -1, geom::sb_max_shift, -1, "log2 of the superbin bytes (0: none; -1: toga's choice)"},
       {"bug", 0, 1, 0, "planted bug"}});
  sc.shape_limit = [](const params& p) -> std::optional<std::string> {
    const std::int64_t lanes = 2 * p.get("warps", 1) * p.get("threads", 2);
    if (lanes > 32) return "more than 32 lanes";
    if (lanes * p.get("ops", 2) > 128) return "more than 128 allocations";
    return std::nullopt;
  };
  add_scenario(std::move(sc));
}

}  // namespace toga::sim
