// The built-in scenario catalogue of toga-sim. Each kernel is written against the Platform
// contract (here instantiated with the simulator's platform), the way core code is.
#include <algorithm>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "toga/sim/platform.hpp"
#include "toga/sim/rng.hpp"
#include "toga/sim/scenario.hpp"
#include "toga/sim/world.hpp"

namespace toga::sim {

std::vector<scenario>& catalogue() {
  static std::vector<scenario> c;
  return c;
}

const scenario* find_scenario(const std::string& name) {
  register_builtin_scenarios();
  for (const auto& s : catalogue())
    if (s.name == name) return &s;
  return nullptr;
}

std::string describe_keys(const scenario& sc) {
  if (!sc.keys) return "undeclared";
  if (sc.keys->empty()) return "none";
  std::ostringstream o;
  bool first = true;
  for (const auto& k : *sc.keys) {
    o << (first ? "" : ", ") << k.name << "=" << k.fallback << " [" << k.min << ".." << k.max << "]";
    first = false;
  }
  return o.str();
}

void validate_params(const scenario& sc, const params& p) {
  if (!sc.keys) return;
  for (const auto& [name, value] : p.values()) {
    const param_spec* spec = nullptr;
    for (const auto& k : *sc.keys)
      if (k.name == name) spec = &k;
    if (!spec)
      throw std::invalid_argument("scenario " + sc.name + " has no parameter '" + name + "'; " +
                                  (sc.keys->empty() ? std::string("it takes none")
                                                    : "valid keys: " + describe_keys(sc)));
    if (value < spec->min || value > spec->max)
      throw std::invalid_argument("scenario " + sc.name + ": " + name + "=" + std::to_string(value) +
                                  " is out of range [" + std::to_string(spec->min) + ".." +
                                  std::to_string(spec->max) + "]" +
                                  (spec->help.empty() ? std::string() : " (" + spec->help + ")"));
  }
  if (sc.check)
    if (auto msg = sc.check(p)) throw std::invalid_argument("scenario " + sc.name + ": " + *msg);
}

param_spec drawn(param_spec s, std::int64_t lo, std::int64_t hi, draw_kind k, bool off) {
  s.draw_min = lo;
  s.draw_max = hi;
  s.draw = k;
  s.draw_off = off;
  return s;
}

param_spec drawn_from(param_spec s, std::vector<std::int64_t> choices, bool off) {
  s.draw_choices = std::move(choices);
  s.draw_off = off;
  return s;
}

bool has_drawn_keys(const scenario& sc) {
  if (!sc.keys) return false;
  return std::any_of(sc.keys->begin(), sc.keys->end(), [](const param_spec& k) { return k.drawn(); });
}

std::string describe_draws(const scenario& sc) {
  std::ostringstream o;
  bool first = true;
  if (sc.keys)
    for (const auto& k : *sc.keys) {
      if (!k.drawn()) continue;
      o << (first ? "" : ", ") << k.name << " in ";
      if (!k.draw_choices.empty()) {
        o << "{";
        for (std::size_t i = 0; i < k.draw_choices.size(); ++i) o << (i ? "," : "") << k.draw_choices[i];
        o << "}";
      } else {
        o << (k.draw != draw_kind::uniform ? "2^k " : "") << "[" << k.draw_min << ".." << k.draw_max << "]" << (k.draw == draw_kind::near_pow2 ? " +-" : "");
      }
      o << (k.draw_off ? " or " + std::to_string(k.fallback) : "");
      first = false;
    }
  return first ? "none" : o.str();
}

namespace {
// One drawn value of k (k.drawn()).
std::int64_t draw_value(const param_spec& k, rng& r) {
  if (!k.draw_choices.empty()) return k.draw_choices[r.below(k.draw_choices.size())];
  if (k.draw == draw_kind::uniform)
    return k.draw_min + static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(k.draw_max - k.draw_min) + 1));
  // pow2: an exponent uniformly among the powers of two in range (0 too, when in range)
  std::vector<std::int64_t> pows;
  if (k.draw_min <= 0 && 0 <= k.draw_max) pows.push_back(0);
  for (std::int64_t v = 1; v > 0 && v <= k.draw_max; v *= 2)
    if (v >= k.draw_min) pows.push_back(v);
  if (pows.empty()) return k.draw_min;
  std::int64_t v = pows[r.below(pows.size())];
  if (k.draw == draw_kind::near_pow2 && v >= 4 && r.below(4) == 0) {  // off the boundary by up to a quarter, either way
    const std::int64_t d = 1 + static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(v / 4)));
    v = r.below(2) ? v + d : v - d;
  }
  return std::clamp(v, k.draw_min, k.draw_max);
}
}  // namespace

params draw_shape(const scenario& sc, const params& fixed, std::uint64_t seed) {
  if (!sc.keys) return fixed;
  rng r(mix64(seed ^ 0x73686170655f5f31ull));  // its own stream, apart from the schedule's
  // the contention focus: one shape in four, decided and drawn on a stream of its own so that
  // the other shapes are those drawn without a focus
  rng fr(mix64(seed ^ 0x666f6375735f5f32ull));
  const bool focused = !sc.focus.empty() && fr.below(4) == 0;
  std::string last;
  for (unsigned attempt = 0; attempt < 256; ++attempt) {
    params p = fixed;
    for (const auto& k : *sc.keys) {
      if (!k.drawn() || fixed.values().count(k.name)) continue;
      if (k.draw_off && r.below(2) == 0) continue;  // the fallback
      p.set(k.name, draw_value(k, r));
    }
    if (focused)
      for (const auto& [name, values] : sc.focus)
        if (!values.empty() && !fixed.values().count(name)) p.set(name, values[fr.below(values.size())]);
    try {
      validate_params(sc, p);
    } catch (const std::invalid_argument& e) {
      last = e.what();
      continue;
    }
    if (sc.shape_limit)
      if (auto m = sc.shape_limit(p)) {
        last = "scenario " + sc.name + ": " + *m;
        continue;
      }
    return p;
  }
  throw std::invalid_argument("scenario " + sc.name + ": no random shape fits the parameters given with --set in 256 draws (the "
                              "last: " + last + "); give fewer parameters, or explore without --shapes random");
}

scenario with_keys(scenario s, std::vector<param_spec> keys) {
  s.keys = std::move(keys);
  return s;
}

void add_scenario(scenario s) {
  auto& c = catalogue();
  for (auto& x : c)
    if (x.name == s.name) {
      x = std::move(s);
      return;
    }
  c.push_back(std::move(s));
}

namespace {

using P = toga::sim::platform;

// A spin lock on the Platform: CAS 0 -> 1 with backoff in the loop.
template <class Pl>
void spin_lock(std::uint32_t* l) {
  for (unsigned attempt = 0;; ++attempt) {
    std::uint32_t expected = 0;
    if (Pl::compare_exchange(l, expected, 1u, toga::acquire, toga::device_scope)) return;
    Pl::backoff(attempt);
  }
}
template <class Pl>
void spin_unlock(std::uint32_t* l) {
  Pl::store(l, 0u, toga::release, toga::device_scope);
}

launch_config lanes_shape(const params& p, std::int64_t def_lanes) {
  launch_config c;
  c.sms = 1;
  c.blocks = 1;
  c.threads_per_block = static_cast<unsigned>(std::clamp<std::int64_t>(p.get("lanes", def_lanes), 1, 1024));
  return c;
}

// The scenarios below keep no plain state that lanes share or an invariant reads (the lanes'
// results are lane-private and only check_final reads them): they are marked plain_declared
// (toga/sim/plain.hpp), with nothing to declare.

// lost-update: increments as a separate load and store. Planted bug: increments get lost.
struct lost_update final : instance {
  std::uint32_t counter = 0;
  unsigned lanes, increments;
  lost_update(const params& p)
      : lanes(static_cast<unsigned>(p.get("lanes", 4))), increments(static_cast<unsigned>(p.get("points", 50) / 2)) {}
  void lane() override {
    for (unsigned i = 0; i < increments; ++i) {
      const std::uint32_t v = P::load(&counter, toga::relaxed, toga::device_scope);
      P::store(&counter, v + 1, toga::relaxed, toga::device_scope);
    }
  }
  std::optional<std::string> check_final() override {
    if (counter == lanes * increments) return std::nullopt;
    return "counter is " + std::to_string(counter) + ", expected " + std::to_string(lanes * increments) +
           " (" + std::to_string(lanes * increments - counter) + " increments lost)";
  }
};

// counter: the same with fetch_add. Must always pass.
struct counter_inst final : instance {
  std::uint32_t counter = 0;
  unsigned lanes, points;
  counter_inst(const params& p) : lanes(static_cast<unsigned>(p.get("lanes", 4))), points(static_cast<unsigned>(p.get("points", 50))) {}
  void lane() override {
    for (unsigned i = 0; i < points; ++i) P::fetch_add(&counter, 1u, toga::relaxed, toga::device_scope);
  }
  std::optional<std::string> check_final() override {
    if (counter == lanes * points) return std::nullopt;
    return "counter is " + std::to_string(counter) + ", expected " + std::to_string(lanes * points);
  }
};

// aba-stack: a Treiber stack without version tags (nodes 1..3, 0 = null). Lane 0 pops once;
// lane 1 pops twice, pushes its first node back and pops again. The ABA bug (lane 0's CAS
// succeeds on a head that was popped and pushed back) needs two preemptions: lane 0 must stop
// between reading next and its CAS, and lane 1 must stop between its push and its last pop.
struct aba_stack final : instance {
  std::uint32_t head = 1;
  std::uint32_t next[4] = {0, 2, 3, 0};
  std::vector<std::uint32_t> held[2];
  std::uint32_t pop() {
    for (unsigned attempt = 0;; ++attempt) {
      std::uint32_t h = P::load(&head, toga::acquire, toga::device_scope);
      if (h == 0) return 0;
      const std::uint32_t n = P::load(&next[h], toga::relaxed, toga::device_scope);
      if (P::compare_exchange(&head, h, n, toga::acq_rel, toga::device_scope)) return h;
    }
  }
  void push(std::uint32_t x) {
    for (;;) {
      std::uint32_t h = P::load(&head, toga::relaxed, toga::device_scope);
      P::store(&next[x], h, toga::relaxed, toga::device_scope);
      if (P::compare_exchange(&head, h, x, toga::release, toga::device_scope)) return;
    }
  }
  void lane() override {
    const unsigned me = P::lane_id();
    if (me == 0) {
      held[0].push_back(pop());
    } else if (me == 1) {
      const std::uint32_t x = pop();
      held[1].push_back(pop());
      push(x);
      held[1].push_back(pop());
    }
  }
  std::optional<std::string> check_final() override {
    unsigned seen[4] = {0, 0, 0, 0};
    std::ostringstream where;
    unsigned guard = 0;
    for (std::uint32_t n = head; n != 0 && guard < 8; n = next[n], ++guard) ++seen[n];
    for (auto& h : held)
      for (auto n : h) ++seen[n];
    for (unsigned n = 1; n <= 3; ++n)
      if (seen[n] != 1)
        return "node " + std::to_string(n) + " is owned " + std::to_string(seen[n]) +
               " times (on the stack or held by a lane); ABA: a CAS succeeded on a recycled head";
    return std::nullopt;
  }
};

// lock-order: two spin locks taken in opposite orders. Planted bug: each lane can hold one
// lock and spin on the other forever (reported as a livelock under the fair tail).
struct lock_order final : instance {
  std::uint32_t a = 0, b = 0;
  unsigned rounds;
  lock_order(const params& p) : rounds(static_cast<unsigned>(p.get("rounds", 2))) {}
  void lane() override {
    const bool first = P::lane_id() == 0;
    std::uint32_t* x = first ? &a : &b;
    std::uint32_t* y = first ? &b : &a;
    for (unsigned r = 0; r < rounds; ++r) {
      spin_lock<P>(x);
      spin_lock<P>(y);
      spin_unlock<P>(y);
      spin_unlock<P>(x);
    }
  }
};

// dining: n lanes around a table of n spin locks; lane i needs locks i and (i + 1) mod n. The
// correct code takes the lower-numbered lock first (a global order); bug=1 takes lock i first
// (the ring order), so all n lanes can each hold one lock and spin on the next: a deadlock that
// needs n - 1 preemptions (each lane but the last must be stopped holding its first lock), seen
// as a livelock because the lanes spin.
template <int Bug>
struct dining final : instance {
  std::vector<std::uint32_t> locks;
  unsigned n, rounds;
  std::uint32_t eaten = 0;
  dining(const launch_config& c, const params& p) : locks(c.lanes(), 0), n(c.lanes()), rounds(static_cast<unsigned>(p.get("rounds", 1))) {}
  void lane() override {
    const unsigned i = P::thread_id();
    const unsigned a = i, b = (i + 1) % n;
    const unsigned first = Bug == 1 ? a : std::min(a, b), second = Bug == 1 ? b : std::max(a, b);
    for (unsigned r = 0; r < rounds; ++r) {
      spin_lock<P>(&locks[first]);
      spin_lock<P>(&locks[second]);
      P::fetch_add(&eaten, 1u, relaxed, device_scope);
      spin_unlock<P>(&locks[second]);
      spin_unlock<P>(&locks[first]);
    }
  }
  std::optional<std::string> check_final() override {
    if (eaten != n * rounds) return "eaten " + std::to_string(eaten) + " times, want " + std::to_string(n * rounds);
    return std::nullopt;
  }
};

std::unique_ptr<instance> make_dining(world& w, const params& p) {
  if (p.get("bug", 0) == 1) return std::make_unique<dining<1>>(w.config(), p);
  return std::make_unique<dining<0>>(w.config(), p);
}

// warp-ticket: warp-aggregated ticket dispenser, the pattern toga's allocator front end uses:
// the lanes that call together (activemask) group by key (match_any), the leader takes a block
// of tickets with one fetch_add and passes the base to its group through a per-leader slot
// (relaxed block-scope store, __syncwarp, relaxed loads: the barrier orders them), each lane adds
// its rank; the base is cross-checked against a shfl. Every lane must get a distinct ticket and
// the tickets of each key must be exactly 0..N-1. Lanes whose index is 6 mod 7 take no ticket
// (they exit at once). bug: 1 the group is formed from the full mask instead of activemask
// ("all 32 lanes are active"), 2 the members read the slot without the __syncwarp (independent
// thread scheduling: the leader may not have written it yet).
template <int Bug>
struct warp_ticket final : instance {
  std::uint32_t counter[3] = {0, 0, 0};
  std::vector<std::uint32_t> slot;  // per (warp, leader lane)
  std::vector<std::uint32_t> ticket;
  std::vector<std::uint32_t> key_of;
  unsigned lanes, warps_per_block;
  static constexpr std::uint32_t skipped = 3;
  warp_ticket(const launch_config& c)
      : slot(static_cast<std::size_t>(c.blocks) * ((c.threads_per_block + 31) / 32) * 32, 0),
        ticket(c.lanes(), ~0u),
        key_of(c.lanes(), skipped),
        lanes(c.lanes()),
        warps_per_block((c.threads_per_block + 31) / 32) {}
  void lane() override {
    const unsigned me = P::block_id() * P::block_dim() + P::thread_id();
    if (me % 7 == 6) return;  // takes no ticket
    const std::uint32_t key = me % 3;
    const std::uint32_t active = Bug == 1 ? toga::full_mask : P::activemask();
    const std::uint32_t group = P::match_any(active, key);
    const unsigned leader = static_cast<unsigned>(__builtin_ctz(group));
    const unsigned rank = static_cast<unsigned>(__builtin_popcount(group & P::lanemask_lt()));
    std::uint32_t* my_slot = &slot[(static_cast<std::size_t>(P::block_id()) * warps_per_block + P::warp_id()) * 32 + leader];
    std::uint32_t base = 0;
    if (P::lane_id() == leader) {
      base = P::fetch_add(&counter[key], static_cast<std::uint32_t>(__builtin_popcount(group)), toga::relaxed,
                          toga::device_scope);
      P::store(my_slot, base + 1, toga::relaxed, toga::block_scope);  // + 1: 0 means "not written"
    }
    if constexpr (Bug != 2) P::syncwarp(group);
    const std::uint32_t from_slot = P::load(my_slot, toga::relaxed, toga::block_scope);
    base = P::shfl(group, base, static_cast<int>(leader));
    if (from_slot != base + 1)
      P::violated("the leader's base read through memory (" + std::to_string(from_slot) + " - 1) differs from its shfl (" +
                  std::to_string(base) + ")");
    const std::uint32_t votes = P::ballot(group, true);
    if (votes != group) P::violated("ballot over the group did not return the group");
    P::syncwarp(group);
    ticket[me] = base + rank;
    key_of[me] = key;
  }
  std::optional<std::string> check_final() override {
    for (std::uint32_t k = 0; k < 3; ++k) {
      std::vector<std::uint32_t> t;
      for (unsigned i = 0; i < lanes; ++i)
        if (key_of[i] == k) t.push_back(ticket[i]);
      std::sort(t.begin(), t.end());
      for (std::uint32_t i = 0; i < t.size(); ++i)
        if (t[i] != i)
          return "key " + std::to_string(k) + ": tickets are not 0.." + std::to_string(t.size() - 1) +
                 " (position " + std::to_string(i) + " holds " + std::to_string(t[i]) + ")";
      if (counter[k] != t.size()) return "counter " + std::to_string(k) + " overshoots";
    }
    return std::nullopt;
  }
};

std::unique_ptr<instance> make_warp_ticket(world& w, const params& p) {
  switch (p.get("bug", 0)) {
    case 1: return std::make_unique<warp_ticket<1>>(w.config());
    case 2: return std::make_unique<warp_ticket<2>>(w.config());
    default: return std::make_unique<warp_ticket<0>>(w.config());
  }
}

// warp-mask: planted CUDA-rule violation: odd lanes call __ballot_sync with the even-lane mask.
struct warp_mask final : instance {
  void lane() override { P::ballot(0x55555555u, true); }  // odd lanes are not in the mask
};

// warp-mismatch: planted CUDA-rule violation: lane 0 calls __syncwarp(0x3) while lane 1
// calls __ballot_sync(0x3): neither completes.
struct warp_mismatch final : instance {
  void lane() override {
    if (P::lane_id() == 0) P::syncwarp(0x3u);
    else P::ballot(0x3u, true);
  }
};

}  // namespace

void register_primitive_scenarios();  // scenarios_primitives.cpp
void register_allocator_scenarios();  // scenarios_allocator.cpp
void register_litmus_scenarios();     // scenarios_litmus.cpp
void register_tenant_scenarios();     // scenarios_tenants.cpp
void register_sharing_scenarios();    // scenarios_sharing.cpp
void register_service_scenarios();    // scenarios_service.cpp

void register_builtin_scenarios() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_primitive_scenarios();
    register_allocator_scenarios();
    register_litmus_scenarios();
    register_tenant_scenarios();
    register_sharing_scenarios();
    register_service_scenarios();
    const param_spec lanes{"lanes", 1, 1024, 4, "lanes in one block"};
    add_scenario(plain_declared(with_keys({"lost-update",
                            "lanes increment a counter with a separate load and store (planted bug: lost update); "
                            "params lanes=4 points=50",
                            expectation::fails, [](const params& p) { return lanes_shape(p, 4); },
                            [](world&, const params& p) { return std::make_unique<lost_update>(p); }},
                           {drawn(lanes, 1, 8), drawn({"points", 2, 100'000, 50, "scheduling points per lane (two per increment)"}, 2, 60)})));
    add_scenario(plain_declared(with_keys({"counter", "lanes increment a counter with fetch_add; params lanes=4 points=50",
                            expectation::pass, [](const params& p) { return lanes_shape(p, 4); },
                            [](world&, const params& p) { return std::make_unique<counter_inst>(p); }},
                           {drawn(lanes, 1, 8), drawn({"points", 1, 100'000, 50, "fetch_adds per lane"}, 1, 60)})));
    add_scenario(plain_declared(with_keys({"aba-stack",
                            "Treiber stack without tags, 2 lanes (planted bug: ABA, needs 2 preemptions)",
                            expectation::fails, [](const params&) { return lanes_shape(params{}, 2); },
                            [](world&, const params&) { return std::make_unique<aba_stack>(); }},
                           {})));
    add_scenario(plain_declared(with_keys({"lock-order",
                            "two spin locks taken in opposite orders, 2 lanes (planted bug: deadlock, seen as livelock "
                            "because the lanes spin); params rounds=2",
                            expectation::fails, [](const params&) { return lanes_shape(params{}, 2); },
                            [](world&, const params& p) { return std::make_unique<lock_order>(p); },
                            run_limits{2'000, 20'000}, {}, {}},
                           {{"rounds", 1, 1'000, 2, "lock/unlock rounds per lane"}})));
    add_scenario(plain_declared(with_keys({"warp-ticket",
                            "warp-aggregated ticket dispenser (activemask, match_any, fetch_add, shfl, ballot, syncwarp); "
                            "params warps=4 threads=32 (per warp; < 32 makes partial warps) sms=1 bug=0 (1 full mask "
                            "instead of activemask while some lanes skip, 2 tickets passed through memory without "
                            "__syncwarp)",
                            expectation::pass,
                            [](const params& p) {
                              launch_config c;
                              c.sms = static_cast<unsigned>(p.get("sms", 1));
                              c.blocks = static_cast<unsigned>(p.get("warps", 4));
                              c.threads_per_block = static_cast<unsigned>(p.get("threads", 32));
                              return c;
                            },
                            make_warp_ticket},
                           {drawn({"warps", 1, 64, 4, "warps (one block each)"}, 1, 4),
                            drawn({"threads", 1, 32, 32, "threads per warp; < 32 makes partial warps"}, 1, 32, draw_kind::near_pow2),
                            drawn({"sms", 1, 64, 1, "SMs"}, 1, 3),
                            {"bug", 0, 2, 0, "planted bug"}})));
    add_scenario(plain_declared(with_keys({"dining",
                            "n lanes, n spin locks, lane i needs locks i and i+1 mod n, taken lower-numbered first; "
                            "params lanes=4 rounds=1 bug=0 (1 ring order: a deadlock cycle needing lanes - 1 preemptions)",
                            expectation::pass, [](const params& p) { return lanes_shape(p, 4); }, make_dining,
                            run_limits{2'000, 20'000}, {}, {}},
                           {drawn({"lanes", 2, 16, 4, "lanes (and locks)"}, 2, 6), drawn({"rounds", 1, 100, 1, "meals per lane"}, 1, 3),
                            {"bug", 0, 1, 0, "planted bug"}})));
    add_scenario(with_keys({"warp-mask",
                            "planted CUDA-rule violation: lanes call __ballot_sync with a mask that excludes them",
                            expectation::fails, [](const params&) { return lanes_shape(params{}, 4); },
                            [](world&, const params&) { return std::make_unique<warp_mask>(); }},
                           {}));
    add_scenario(with_keys({"warp-mismatch",
                            "planted CUDA-rule violation: lanes named in a mask call different intrinsics",
                            expectation::fails, [](const params&) { return lanes_shape(params{}, 2); },
                            [](world&, const params&) { return std::make_unique<warp_mismatch>(); }},
                           {}));
  });
}

}  // namespace toga::sim
