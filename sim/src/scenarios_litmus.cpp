// Litmus tests of the memory model (docs/simulator.md §4.4): MP, SB, LB, IRIW, 2+2W, CoRR and
// CoWW, each with relaxed accesses, release/acquire, acq_rel fences, seq_cst fences and seq_cst
// operations, with every thread in its own block (device scope, or block scope: then no pair is
// morally strong) or all in one block (block scope). x and y start at 0.
//
// Each schedule reports its outcome as metrics (the registers and the final x, y) and whether it
// is the test's weak outcome; a weak outcome that PTX forbids for the variant fails the schedule
// (check_final), so explorations assert "never forbidden". `toga-sim litmus` runs every
// configuration exhaustively and prints the table of docs/simulator.md §4.4.
#include <mutex>
#include <string>

#include "toga/sim/litmus.hpp"
#include "toga/sim/platform.hpp"
#include "toga/sim/runner.hpp"
#include "toga/sim/scenario.hpp"
#include "toga/sim/world.hpp"

namespace toga::sim {

const char* litmus_test_name(litmus_test t) {
  switch (t) {
    case litmus_test::mp: return "MP";
    case litmus_test::sb: return "SB";
    case litmus_test::lb: return "LB";
    case litmus_test::iriw: return "IRIW";
    case litmus_test::ww22: return "2+2W";
    case litmus_test::corr: return "CoRR";
    case litmus_test::coww: return "CoWW";
  }
  return "?";
}

const char* litmus_variant_name(litmus_variant v) {
  switch (v) {
    case litmus_variant::relaxed: return "relaxed";
    case litmus_variant::rel_acq: return "release/acquire";
    case litmus_variant::fence: return "acq_rel fences";
    case litmus_variant::sc_fence: return "seq_cst fences";
    case litmus_variant::sc_ops: return "seq_cst operations";
  }
  return "?";
}

const char* litmus_placement_name(litmus_placement p) {
  switch (p) {
    case litmus_placement::device: return "device scope, one block per thread";
    case litmus_placement::block_same: return "block scope, one block";
    case litmus_placement::block_cross: return "block scope, one block per thread";
  }
  return "?";
}

const char* litmus_weak_outcome(litmus_test t) {
  switch (t) {
    case litmus_test::mp: return "r0=1 r1=0";
    case litmus_test::sb: return "r0=0 r1=0";
    case litmus_test::lb: return "r0=1 r1=1";
    case litmus_test::iriw: return "r0=1 r1=0 r2=1 r3=0";
    case litmus_test::ww22: return "x=1 y=1 at the end";
    case litmus_test::corr: return "r0=1 r1=0";
    case litmus_test::coww: return "x=1 at the end";
  }
  return "?";
}

unsigned litmus_threads(litmus_test t) { return t == litmus_test::iriw ? 4 : 2; }

bool litmus_ptx_allows(litmus_test t, litmus_variant v, litmus_placement p) {
  // Threads of different blocks with block-scope operations are never morally strong: PTX then
  // gives none of the ordering guarantees below (coherence of one thread's own writes, CoWW,
  // still holds by program order).
  if (p == litmus_placement::block_cross) return t != litmus_test::coww;
  switch (t) {
    case litmus_test::mp: return v == litmus_variant::relaxed;
    case litmus_test::sb: return v == litmus_variant::relaxed || v == litmus_variant::rel_acq || v == litmus_variant::fence;
    case litmus_test::lb: return v == litmus_variant::relaxed;
    case litmus_test::iriw: return v == litmus_variant::relaxed || v == litmus_variant::rel_acq || v == litmus_variant::fence;
    case litmus_test::ww22: return v == litmus_variant::relaxed || v == litmus_variant::rel_acq || v == litmus_variant::fence;
    case litmus_test::corr:
    case litmus_test::coww: return false;
  }
  return false;
}

namespace {

using P = toga::sim::platform;

// The operations of one variant at one scope.
template <scope S>
struct ops {
  litmus_variant v;
  std::uint32_t load(std::uint32_t* p) const {
    switch (v) {
      case litmus_variant::rel_acq: return P::load(p, acquire, scope_tag<S>{});
      case litmus_variant::sc_ops: return P::load(p, seq_cst, scope_tag<S>{});
      default: return P::load(p, relaxed, scope_tag<S>{});
    }
  }
  void store(std::uint32_t* p, std::uint32_t x) const {
    switch (v) {
      case litmus_variant::rel_acq: return P::store(p, x, release, scope_tag<S>{});
      case litmus_variant::sc_ops: return P::store(p, x, seq_cst, scope_tag<S>{});
      default: return P::store(p, x, relaxed, scope_tag<S>{});
    }
  }
  // between the two accesses of a thread
  void between() const {
    if (v == litmus_variant::fence) P::fence(acq_rel, scope_tag<S>{});
    else if (v == litmus_variant::sc_fence) P::fence(seq_cst, scope_tag<S>{});
  }
};

struct litmus_inst final : instance {
  litmus_test test;
  litmus_variant variant;
  litmus_placement placement;
  std::uint32_t x = 0, y = 0;
  std::uint32_t r[4] = {0, 0, 0, 0};
  litmus_inst(world& w, const params& p)
      : test(static_cast<litmus_test>(p.get("test", 0))),
        variant(static_cast<litmus_variant>(p.get("variant", 0))),
        placement(static_cast<litmus_placement>(p.get("scope", 0))) {
    w.set_race_check(p.get("races", 0) != 0);
  }
  template <scope S>
  void run(unsigned t) {
    const ops<S> o{variant};
    switch (test) {
      case litmus_test::mp:
        if (t == 0) {
          o.store(&x, 1);
          o.between();
          o.store(&y, 1);
        } else {
          r[0] = o.load(&y);
          o.between();
          r[1] = o.load(&x);
        }
        break;
      case litmus_test::sb:
        if (t == 0) {
          o.store(&x, 1);
          o.between();
          r[0] = o.load(&y);
        } else {
          o.store(&y, 1);
          o.between();
          r[1] = o.load(&x);
        }
        break;
      case litmus_test::lb:
        if (t == 0) {
          r[0] = o.load(&x);
          o.between();
          o.store(&y, 1);
        } else {
          r[1] = o.load(&y);
          o.between();
          o.store(&x, 1);
        }
        break;
      case litmus_test::iriw:
        if (t == 0) {
          o.store(&x, 1);
        } else if (t == 1) {
          o.store(&y, 1);
        } else if (t == 2) {
          r[0] = o.load(&x);
          o.between();
          r[1] = o.load(&y);
        } else {
          r[2] = o.load(&y);
          o.between();
          r[3] = o.load(&x);
        }
        break;
      case litmus_test::ww22:
        if (t == 0) {
          o.store(&x, 1);
          o.between();
          o.store(&y, 2);
        } else {
          o.store(&y, 1);
          o.between();
          o.store(&x, 2);
        }
        break;
      case litmus_test::corr:
        if (t == 0) {
          o.store(&x, 1);
        } else {
          r[0] = o.load(&x);
          o.between();
          r[1] = o.load(&x);
        }
        break;
      case litmus_test::coww:
        if (t == 0) {
          o.store(&x, 1);
          o.between();
          o.store(&x, 2);
        } else {
          r[0] = o.load(&x);
        }
        break;
    }
  }
  void lane() override {
    const unsigned t = P::block_id() * P::block_dim() + P::thread_id();
    if (placement == litmus_placement::device) run<scope::device>(t);
    else run<scope::block>(t);
  }
  bool weak() const {
    switch (test) {
      case litmus_test::mp: return r[0] == 1 && r[1] == 0;
      case litmus_test::sb: return r[0] == 0 && r[1] == 0;
      case litmus_test::lb: return r[0] == 1 && r[1] == 1;
      case litmus_test::iriw: return r[0] == 1 && r[1] == 0 && r[2] == 1 && r[3] == 0;
      case litmus_test::ww22: return x == 1 && y == 1;
      case litmus_test::corr: return r[0] == 1 && r[1] == 0;
      case litmus_test::coww: return x == 1;
    }
    return false;
  }
  std::optional<std::string> check_final() override {
    if (weak() && !litmus_ptx_allows(test, variant, placement))
      return std::string("forbidden outcome of ") + litmus_test_name(test) + " with " + litmus_variant_name(variant) + " (" +
             litmus_placement_name(placement) + "): " + litmus_weak_outcome(test);
    return std::nullopt;
  }
  std::vector<std::pair<std::string, double>> metrics() const override {
    return {{"weak outcome", weak() ? 1.0 : 0.0}, {"r0", double(r[0])}, {"r1", double(r[1])}, {"r2", double(r[2])},
            {"r3", double(r[3])}, {"x", double(x)}, {"y", double(y)}};
  }
};

}  // namespace

void register_litmus_scenarios() {
  scenario s;
  s.name = "litmus";
  s.summary =
      "memory-model litmus tests (run with --memory weak); params test=0 (0 MP, 1 SB, 2 LB, 3 IRIW, 4 2+2W, 5 CoRR, 6 "
      "CoWW) variant=0 (0 relaxed, 1 release/acquire, 2 acq_rel fences, 3 seq_cst fences, 4 seq_cst operations) "
      "scope=0 (0 device scope, a block per thread; 1 block scope, one block; 2 block scope, a block per thread) races=0 "
      "(1: report scoped races); a forbidden weak outcome fails the schedule";
  s.shape = [](const params& p) {
    const unsigned n = litmus_threads(static_cast<litmus_test>(p.get("test", 0)));
    if (static_cast<litmus_placement>(p.get("scope", 0)) == litmus_placement::block_same) return launch_config{1, 1, n};
    return launch_config{n, n, 1};
  };
  s.make = [](world& w, const params& p) { return std::make_unique<litmus_inst>(w, p); };
  s.keys = std::vector<param_spec>{drawn({"test", 0, 6, 0, "0 MP, 1 SB, 2 LB, 3 IRIW, 4 2+2W, 5 CoRR, 6 CoWW"}, 0, 6),
                                   drawn({"variant", 0, 4, 0, "0 relaxed, 1 rel/acq, 2 acq_rel fences, 3 seq_cst fences, 4 seq_cst ops"}, 0, 4),
                                   drawn({"scope", 0, 2, 0, "0 device, 1 block scope in one block, 2 block scope across blocks"}, 0, 2),
                                   {"races", 0, 1, 0, "1: a scoped race is a cuda-rule verdict"}};
  add_scenario(std::move(s));
}

litmus_row run_litmus(litmus_test t, litmus_variant v, litmus_placement p, memory_model m, unsigned bound,
                      std::uint64_t max_schedules) {
  const scenario* sc = find_scenario("litmus");
  params prm;
  prm.set("test", static_cast<std::int64_t>(t));
  prm.set("variant", static_cast<std::int64_t>(v));
  prm.set("scope", static_cast<std::int64_t>(p));
  run_limits limits = sc->limits;
  limits.memory = m;
  litmus_row row;
  row.test = t;
  row.variant = v;
  row.placement = p;
  row.ptx_allows = litmus_ptx_allows(t, v, p);
  exhaustive_strategy ex(bound);
  for (std::uint64_t i = 0; i < max_schedules; ++i) {
    const run_result r = run_one(*sc, prm, ex, 0, limits);
    ++row.schedules;
    for (const auto& [name, value] : r.metrics)
      if (name == "weak outcome" && value != 0) ++row.weak;
    if (r.failed() && row.failure.empty()) row.failure = std::string(to_string(r.kind)) + ": " + r.message;
    if (!ex.advance()) {
      row.complete = true;
      break;
    }
  }
  return row;
}

}  // namespace toga::sim
