// Consumer of toga::sim: runs a user-defined scenario (a fetch_add counter on 2 warps) in the
// simulator of an installed toga, 200 random schedules.
#include <toga/sim/platform.hpp>
#include <toga/sim/runner.hpp>

#include <cstdio>
#include <memory>

namespace ts = toga::sim;

struct counter final : ts::instance {
  std::uint32_t n = 0;
  void lane() override { ts::platform::fetch_add(&n, 1u, toga::relaxed, toga::device_scope); }
  std::optional<std::string> check_final() override {
    return n == 64 ? std::nullopt : std::optional<std::string>("count " + std::to_string(n));
  }
};

int main() {
  ts::scenario sc;
  sc.name = "consumer-counter";
  sc.shape = [](const ts::params&) { return ts::launch_config{1, 2, 32}; };
  sc.make = [](ts::world&, const ts::params&) { return std::make_unique<counter>(); };
  ts::explore_options o;
  o.schedules = 200;
  const auto s = ts::explore(sc, o);
  std::printf("sim_app: %llu schedules, first failure: %s\n", static_cast<unsigned long long>(s.schedules),
              s.first_failure ? s.first_failure->result.message.c_str() : "none");
  return s.first_failure || s.schedules != 200 ? 1 : 0;
}
