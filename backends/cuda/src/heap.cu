// toga::cuda::heap: upstream memory, initialisation by kernels, statistics and reset.
#include "toga/cuda/heap.cuh"

#include <algorithm>
#include <cstring>
#include <utility>

namespace toga::cuda {
namespace {

#define TOGA_CUDA_TRY(call)                                                                          \
  do {                                                                                               \
    const cudaError_t toga_e_ = (call);                                                              \
    if (toga_e_ != cudaSuccess) throw ::toga::cuda_error(toga_e_, std::string(#call) + " at " + __FILE__ + ":" + std::to_string(__LINE__)); \
  } while (0)

__global__ void init_kernel(device_allocator a, std::uint64_t limit) { a.init_after_zero(limit); }

// Statistics live in the arena array and the globals at the end of the metadata block: copy only
// that region and read it through a host view whose arena and globals pointers point into it.
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
  TOGA_CUDA_TRY(cudaSetDevice(device_));
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
  layout_ = toga::heap_layout::make<platform>(levels, arenas);
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
      meta_(std::exchange(o.meta_, nullptr)), device_(o.device_), init_ms_(o.init_ms_) {}

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
  }
  return *this;
}

toga::heap_statistics heap::stats() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::stats: the heap was moved from");
  TOGA_CUDA_TRY(cudaSetDevice(device_));
  stats_region r = fetch_stats(view_, layout_, meta_, options_.stream);
  return toga::collect_statistics(r.view);
}

void heap::reset_high_water() {
  if (!meta_) throw std::logic_error("toga::cuda::heap::reset_high_water: the heap was moved from");
  TOGA_CUDA_TRY(cudaSetDevice(device_));
  stats_region r = fetch_stats(view_, layout_, meta_, options_.stream);
  toga::reset_high_water(r.view);
  // write the peaks back, one word per arena
  const char* host_base = reinterpret_cast<const char*>(r.bytes.data());
  for (unsigned i = 0; i < layout_.arenas; ++i) {
    const std::uint64_t* peak = &r.view.small.arenas[i].stats.peak_used_bytes;
    const std::uint64_t off = layout_.arena_off + static_cast<std::uint64_t>(reinterpret_cast<const char*>(peak) - host_base);
    TOGA_CUDA_TRY(cudaMemcpyAsync(meta_ + off, peak, sizeof(std::uint64_t), cudaMemcpyHostToDevice, options_.stream));
  }
  TOGA_CUDA_TRY(cudaStreamSynchronize(options_.stream));
}

void heap::reset() {
  if (!meta_) throw std::logic_error("toga::cuda::heap::reset: the heap was moved from");
  TOGA_CUDA_TRY(cudaSetDevice(device_));
  initialise();
}

std::vector<heap_error> heap::errors() const {
  if (!meta_) throw std::logic_error("toga::cuda::heap::errors: the heap was moved from");
  TOGA_CUDA_TRY(cudaSetDevice(device_));
  stats_region r = fetch_stats(view_, layout_, meta_, options_.stream);
  std::vector<heap_error> out;
  const unsigned n = std::min<unsigned>(r.view.globals->error_count, toga::heap_globals::max_errors);
  for (unsigned i = 0; i < n; ++i)
    out.push_back({static_cast<toga::heap_error_kind>(r.view.globals->errors[i][0]), r.view.globals->errors[i][1]});
  return out;
}

}  // namespace toga::cuda
