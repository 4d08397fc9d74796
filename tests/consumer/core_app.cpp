// Consumer of toga::core: the Platform contract's vocabulary is usable from an installed toga.
#include <toga/platform.hpp>

#include <cstdio>

int main() {
  static_assert(toga::warp_size == 32);
  const bool ok = toga::failure_order(toga::memory_order::acq_rel) == toga::memory_order::acquire;
  std::printf("core_app: toga::core found, failure_order ok=%d\n", ok);
  return ok ? 0 : 1;
}
