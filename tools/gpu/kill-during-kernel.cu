// kill-during-kernel: what happens to a kernel whose process is killed while it runs (issue 32,
// design.md §23.4). A second process (this program again, fork + exec) imports a shareable toga
// heap and launches one kernel whose thread 0 counts in the heap's memory for `--ms` ms, then
// sets a done flag; this process kills it (SIGKILL) `--kill-ms` ms after the launch and reads the
// counter through its own mapping: right after the kill, and again after the kernel would have
// ended. If the counter moved after waitpid returned, or the done flag is set, the kernel outlived
// its process. Prints one line per trial. Needs a GPU; no allocation is made (offsets 0 and 8 of
// the heap are used as raw memory).
//
//   nvcc -std=c++20 -O2 -arch=sm_90 -Icore/include -Ibackends/cuda/include tools/gpu/kill-during-kernel.cu backends/cuda/src/heap.cu
//   ./a.out [--ms 200] [--kill-ms 20] [--trials 3]
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../examples/fd_passing.hpp"
#include "toga/cuda/heap.cuh"

namespace {

__global__ void count_for(unsigned long long* w, unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    atomicAdd(&w[0], 1ull);
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
  __threadfence_system();
  atomicExch(&w[1], 1ull);
}

struct message {
  toga::share_descriptor d;
  unsigned long long ns;
};

int child(int sock) {
  message m{};
  std::size_t n = 0;
  std::vector<int> fds;
  std::string err;
  if (!toga_example::receive_with_fds(sock, &m, sizeof m, n, fds, err) || fds.size() != 2) return 10;
  toga::cuda::heap h = toga::cuda::heap::import(&m.d, sizeof m.d, fds[0], fds[1]);
  count_for<<<1, 1>>>(static_cast<unsigned long long*>(h.import_pointer(0)), m.ns);
  const char c = 1;
  if (write(sock, &c, 1) != 1) return 11;  // launched
  (void)cudaDeviceSynchronize();
  pause();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--child") return child(std::atoi(argv[2]));
  double ms = 200, kill_ms = 20;
  int trials = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--ms") ms = std::atof(argv[i + 1]);
    else if (k == "--kill-ms") kill_ms = std::atof(argv[i + 1]);
    else if (k == "--trials") trials = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--ms 200] [--kill-ms 20] [--trials 3]\n", argv[0]);
      return 2;
    }
  }
  if (argc % 2 == 0 || ms <= 0 || kill_ms < 0 || trials < 1) {
    std::fprintf(stderr, "usage: %s [--ms 200] [--kill-ms 20] [--trials 3]\n", argv[0]);
    return 2;
  }
  for (int t = 0; t < trials; ++t) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      close(sv[0]);
      const std::string fd = std::to_string(sv[1]);
      execl("/proc/self/exe", argv[0], "--child", fd.c_str(), static_cast<char*>(nullptr));
      _exit(97);
    }
    close(sv[1]);
    toga::cuda::heap_options o;
    o.shareable = true;
    toga::cuda::heap h(64ull << 20, o);
    auto* w = static_cast<unsigned long long*>(h.import_pointer(0));
    cudaMemset(w, 0, 16);
    cudaDeviceSynchronize();
    const toga::cuda::shareable_heap e = h.export_shareable();
    const message m{e.descriptor, static_cast<unsigned long long>(ms * 1e6)};
    std::string err;
    toga_example::send_with_fds(sv[0], &m, sizeof m, {e.heap_fd, e.meta_fd}, err);
    close(e.heap_fd);
    close(e.meta_fd);
    char c;
    if (read(sv[0], &c, 1) != 1) {
      std::fprintf(stderr, "the child did not launch\n");
      return 1;
    }
    using clk = std::chrono::steady_clock;
    const auto t0 = clk::now();
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kill_ms));
    unsigned long long before[2], after_kill[2], later[2];
    cudaMemcpy(before, w, 16, cudaMemcpyDeviceToHost);
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    const double reaped = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
    cudaMemcpy(after_kill, w, 16, cudaMemcpyDeviceToHost);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms + 100));
    cudaMemcpy(later, w, 16, cudaMemcpyDeviceToHost);
    std::printf("trial %d: kernel of %.0f ms, killed at %.0f ms, reaped at %.1f ms; counter %llu before the kill, %llu after waitpid, %llu %.0f ms later; done flag %llu -> %s\n",
                t, ms, kill_ms, reaped, before[0], after_kill[0], later[0], ms + 100, later[1],
                later[1] ? "the kernel ran to its end after its process died" : later[0] == after_kill[0] ? "the kernel stopped with its process" : "the kernel ran on for a while");
    close(sv[0]);
  }
  return 0;
}
