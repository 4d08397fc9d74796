// toga::cuda::heap: upstream memory, initialisation by kernels, statistics and reset; the
// registry of default-heap slots (one per translation unit that includes heap.cuh).
#include "toga/cuda/heap.cuh"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

namespace toga::cuda {
namespace {

#define TOGA_CUDA_TRY(call)                                                                          \
  do {                                                                                               \
    const cudaError_t toga_e_ = (call);                                                              \
    if (toga_e_ != cudaSuccess) throw ::toga::cuda_error(toga_e_, std::string(#call) + " at " + __FILE__ + ":" + std::to_string(__LINE__)); \
  } while (0)

__global__ void init_kernel(device_allocator a, std::uint64_t limit) { a.init_after_zero(limit); }
__global__ void trim_kernel(device_allocator a) { a.trim(); }

//! Makes `device` current for its lifetime and restores the caller's device afterwards, so that
//! a program with heaps on several GPUs keeps launching where it meant to.
class device_guard {
 public:
  explicit device_guard(int device) {
    TOGA_CUDA_TRY(cudaGetDevice(&previous_));
    if (previous_ != device) {
      TOGA_CUDA_TRY(cudaSetDevice(device));
      changed_ = true;
    }
  }
  ~device_guard() {
    if (changed_) (void)cudaSetDevice(previous_);
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

//! The default-heap slots of every translation unit (their host shadows), and which heap (by its
//! metadata address, which a move does not change) is the default of each device.
struct default_registry {
  std::mutex m;
  std::vector<const void*> slots;
  std::map<int, const char*> current;  // device -> meta_ of its default heap
};
default_registry& registry() {
  static default_registry r;  // constructed on first use: safe from static initialisers
  return r;
}

//! Writes `slot` into every registered copy on the current device, then waits for the copies.
void write_slots(const detail::default_heap_slot& slot, const std::vector<const void*>& slots) {
  for (const void* symbol : slots)
    TOGA_CUDA_TRY(cudaMemcpyToSymbol(symbol, &slot, sizeof slot, 0, cudaMemcpyHostToDevice));
  TOGA_CUDA_TRY(cudaDeviceSynchronize());
}

// Statistics live in the arena arrays (UAlloc's, then the superbins') and the globals at the end of
// the metadata block: copy only that region and read it through a host view whose arena and globals pointers point into it.
struct stats_region {
  std::vector<std::uint64_t> bytes;
  device_allocator view{};
};

stats_region fetch_stats(const device_allocator& dev, const toga::heap_layout& layout, char* meta, cudaStream_t s) {
  stats_region r;
  const std::uint64_t n = layout.bytes - layout.arena_off;
  r.bytes.resize(n / 8 + 1);
  TOGA_CUDA_TRY(cudaMemcpyAsync(r.bytes.data(), meta + layout.arena_off, n, cudaMemcpyDeviceToHost, s));
  TOGA_CUDA_TRY(cudaStreamSynchronize(s));
  r.view = dev;
  char* base = reinterpret_cast<char*>(r.bytes.data());
  r.view.small.arenas = reinterpret_cast<toga::arena<platform>*>(base);
  r.view.small.peer = base + (layout.sb_arena_off - layout.arena_off);  // the superbin arenas (super())
  r.view.globals = reinterpret_cast<toga::heap_globals*>(base + (layout.globals_off - layout.arena_off));
  return r;
}

}  // namespace

heap::heap(std::uint64_t bytes, heap_options options) : options_(options) {
  if (bytes == 0 || bytes > toga::heap_layout::max_heap_bytes)
    throw std::invalid_argument("toga::cuda::heap: size " + std::to_string(bytes) + " B is not in [1, " +
                                std::to_string(toga::heap_layout::max_heap_bytes) + "] (128 GiB); ask for a smaller heap");
  if (options_.device < 0) TOGA_CUDA_TRY(cudaGetDevice(&options_.device));
  device_ = options_.device;
  device_guard guard(device_);
  const unsigned levels = toga::heap_layout::levels_for(bytes);
  unsigned arenas = options_.arenas;
  if (arenas == 0) {
    // One arena per SM, but at most one per 4 chunks of heap: every arena must be able to hold
    // chunks (a 64 MiB heap has 128 chunks; 132 arenas would leave SMs with none).
    int sms = 0;
    TOGA_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_));
    const std::uint64_t by_size = (toga::geom::page_bytes << (levels - 1)) / (4 * toga::geom::chunk_bytes);
    arenas = static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(static_cast<std::uint64_t>(sms), by_size)));
  }
  int sb_shift = -1;  // toga's choice
  if (options_.superbin_bytes != 0) {
    const std::uint64_t sb = options_.superbin_bytes;
    const std::uint64_t lo = std::uint64_t{1} << 13, hi = std::uint64_t{1} << toga::geom::sb_max_shift;
    if ((sb & (sb - 1)) != 0 || sb < lo || sb > hi || sb >= (toga::geom::page_bytes << (levels - 1)))
      throw std::invalid_argument("toga::cuda::heap: superbin_bytes " + std::to_string(sb) +
                                  " is not a power of two in [8 KiB, 2 MiB] below the heap size; use 0 for toga's choice");
    sb_shift = static_cast<int>(toga::bits::ctz(sb));
  }
  if (options_.superbin_sharing > 1024)
    throw std::invalid_argument("toga::cuda::heap: superbin_sharing " + std::to_string(options_.superbin_sharing) +
                                " is not in [0, 1024] (SMs per superbin arena); use 0 for one superbin arena per SM");
  const unsigned k = options_.superbin_sharing > 1 ? options_.superbin_sharing : 1;
  layout_ = toga::heap_layout::make<platform>(levels, arenas, sb_shift, (arenas + k - 1) / k);
  const std::uint64_t heap_bytes = toga::geom::page_bytes << (layout_.levels - 1);
  const std::uint64_t upstream = heap_bytes + toga::geom::page_bytes;  // room to align the base to 4 KiB
  cudaError_t e;
  if (options_.pool) {
    e = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&raw_heap_), upstream, options_.pool, options_.stream);
  } else {
    e = cudaMalloc(reinterpret_cast<void**>(&raw_heap_), upstream);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    raw_heap_ = nullptr;
    throw toga::bad_alloc("toga::cuda::heap: cannot obtain " + std::to_string(upstream) + " B of device memory for the heap (" +
                          cudaGetErrorName(e) + "); ask for a smaller heap or free device memory");
  }
  e = options_.pool ? cudaMallocFromPoolAsync(reinterpret_cast<void**>(&meta_), layout_.bytes, options_.pool, options_.stream)
                    : cudaMalloc(reinterpret_cast<void**>(&meta_), layout_.bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    meta_ = nullptr;
    release();
    throw toga::bad_alloc("toga::cuda::heap: cannot obtain " + std::to_string(layout_.bytes) + " B of device memory for the heap's metadata (" +
                          cudaGetErrorName(e) + ")");
  }
  char* aligned = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw_heap_) + toga::geom::page_bytes - 1) &
                                          ~static_cast<std::uintptr_t>(toga::geom::page_bytes - 1));
  view_ = device_allocator::make(aligned, meta_, layout_);
  try {
    initialise();
  } catch (...) {
    release();
    throw;
  }
}

void heap::initialise() {
  cudaEvent_t start, stop;
  TOGA_CUDA_TRY(cudaEventCreate(&start));
  TOGA_CUDA_TRY(cudaEventCreate(&stop));
  TOGA_CUDA_TRY(cudaEventRecord(start, options_.stream));
  TOGA_CUDA_TRY(cudaMemsetAsync(meta_, 0, layout_.bytes, options_.stream));
  init_kernel<<<1, 1, 0, options_.stream>>>(view_, options_.limit_bytes);
  TOGA_CUDA_TRY(cudaGetLastError());
  TOGA_CUDA_TRY(cudaEventRecord(stop, options_.stream));
  TOGA_CUDA_TRY(cudaEventSynchronize(stop));
  TOGA_CUDA_TRY(cudaEventElapsedTime(&init_ms_, start, stop));
  TOGA_CUDA_TRY(cudaEventDestroy(start));
  TOGA_CUDA_TRY(cudaEventDestroy(stop));
}

void heap::release() noexcept {
  if (raw_heap_ == nullptr && meta_ == nullptr) return;
  int current = 0;
  (void)cudaGetDevice(&current);
  (void)cudaSetDevice(device_);
  {
    // No kernel may find a default heap whose memory is gone.
    default_registry& r = registry();
    std::lock_guard<std::mutex> lock(r.m);
    const auto it = r.current.find(device_);
    if (it != r.current.end() && it->second == meta_) {
      r.current.erase(it);
      const detail::default_heap_slot none{};
      try {
        write_slots(none, r.slots);
      } catch (const std::exception&) {
        // the device is failing; the memory goes anyway
      }
    }
  }
  for (char* p : {raw_heap_, meta_}) {
    if (!p) continue;
    if (options_.pool) (void)cudaFreeAsync(p, options_.stream);
    else (void)cudaFree(p);
  }
  if (options_.pool) (void)cudaStreamSynchronize(options_.stream);
  (void)cudaSetDevice(current);
  raw_heap_ = meta_ = nullptr;
}

heap::~heap() { release(); }

heap::heap(heap&& o) noexcept
    : view_(o.view_), layout_(o.layout_), options_(o.options_), raw_heap_(std::exchange(o.raw_heap_, nullptr)),
      meta_(std::exchange(o.meta_, nullptr)), device_(o.device_), init_ms_(o.init_ms_) {
  o.view_ = device_allocator{};
}

heap& heap::operator=(heap&& o) noexcept {
  if (this != &o) {
    release();
    view_ = o.view_;
    layout_ = o.layout_;
    options_ = o.options_;
    raw_heap_ = std::exchange(o.raw_heap_, nullptr);
    meta_ = std::exchange(o.meta_, nullptr);
    device_ = o.device_;
    init_ms_ = o.init_ms_;
    o.view_ = device_allocator{};
  }
  return *this;
}

heap_ref heap::ref() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::ref: the heap was moved from (it owns no memory); use the heap it was moved to");
  return heap_ref(view_);
}

toga::heap_statistics heap::stats() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::stats: the heap was moved from");
  device_guard guard(device_);
  stats_region r = fetch_stats(view_, layout_, meta_, options_.stream);
  return toga::collect_statistics(r.view);
}

heap_attributes heap::attributes() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::attributes: the heap was moved from");
  const toga::heap_statistics s = stats();
  heap_attributes a;
  a.capacity = s.heap_bytes;
  a.device_bytes = s.heap_bytes + toga::geom::page_bytes + layout_.bytes;
  a.limit_bytes = options_.limit_bytes;
  a.reserved_mem_current = s.buddy_bytes;
  a.reserved_mem_high = std::min(s.buddy_high_bytes, s.heap_bytes);
  a.used_mem_current = s.used_bytes;
  a.used_mem_high = std::min(s.peak_used_bytes, a.reserved_mem_high);
  a.allocations = s.allocations;
  a.deallocations = s.deallocations;
  a.failed_exhausted = s.failed_exhausted;
  a.failed_limit = s.failed_limit;
  a.failed_too_large = s.failed_too_large;
  return a;
}

void heap::reset_high_water() {
  if (!meta_) throw std::logic_error("toga::cuda::heap::reset_high_water: the heap was moved from");
  device_guard guard(device_);
  stats_region r = fetch_stats(view_, layout_, meta_, options_.stream);
  toga::reset_high_water(r.view);  // on the host copy: the arenas' peaks and the block high-water
  // Write the copied region back as a whole (at quiescence nothing else changed it), so that
  // every mark the core resets reaches the device, whichever words it keeps them in.
  TOGA_CUDA_TRY(cudaMemcpyAsync(meta_ + layout_.arena_off, r.bytes.data(), layout_.bytes - layout_.arena_off, cudaMemcpyHostToDevice,
                                options_.stream));
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
}

void heap::trim() {
  if (!meta_) throw std::logic_error("toga::cuda::heap::trim: the heap was moved from");
  device_guard guard(device_);
  trim_kernel<<<1, 1, 0, options_.stream>>>(view_);
  TOGA_CUDA_TRY(cudaGetLastError());
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
}

void heap::reset() {
  if (!meta_) throw std::logic_error("toga::cuda::heap::reset: the heap was moved from");
  device_guard guard(device_);
  initialise();
}

std::vector<heap_error> heap::errors() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::errors: the heap was moved from");
  device_guard guard(device_);
  stats_region r = fetch_stats(view_, layout_, meta_, options_.stream);
  std::vector<heap_error> out;
  const unsigned n = std::min<unsigned>(r.view.globals->error_count, toga::heap_globals::max_errors);
  for (unsigned i = 0; i < n; ++i)
    out.push_back({static_cast<toga::heap_error_kind>(r.view.globals->errors[i][0]), r.view.globals->errors[i][1]});
  return out;
}

// ---- the default heap ----------------------------------------------------------------------------

namespace detail {
void register_default_heap_slot(const void* symbol) noexcept {
  default_registry& r = registry();
  std::lock_guard<std::mutex> lock(r.m);
  r.slots.push_back(symbol);
}
}  // namespace detail

void set_default_heap(const heap& h) {
  if (!h.meta_) throw std::logic_error("toga::cuda::set_default_heap: the heap was moved from (it owns no memory)");
  detail::default_heap_slot slot{};
  const heap_ref ref = h.ref();
  std::memcpy(slot.ref, &ref, sizeof ref);
  slot.set = 1;
  device_guard guard(h.device_);
  default_registry& r = registry();
  std::lock_guard<std::mutex> lock(r.m);
  write_slots(slot, r.slots);
  r.current[h.device_] = h.meta_;
}

void clear_default_heap(int device) {
  if (device < 0) TOGA_CUDA_TRY(cudaGetDevice(&device));
  device_guard guard(device);
  default_registry& r = registry();
  std::lock_guard<std::mutex> lock(r.m);
  const detail::default_heap_slot none{};
  write_slots(none, r.slots);
  r.current.erase(device);
}

}  // namespace toga::cuda
