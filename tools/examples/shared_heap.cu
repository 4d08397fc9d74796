// toga example: one heap shared by two processes (docs/usage.md §13). The producer makes a
// shareable heap, builds a linked list per thread in it, and hands the heap (a descriptor and two
// file descriptors, over a Unix socket) and the lists (as heap offsets) to a consumer process,
// which imports the heap, walks every list in a kernel, frees every node and reports the sum. The
// producer then sees, in the shared statistics, that every block came back. Copy this file to
// start.
//
//   build/default/tools/toga-example-shared-heap [threads] [nodes-per-thread]
//
// The consumer is this executable again (fork, then exec at once: CUDA state never crosses a
// fork), started with `--consumer FD`. Exit status: 0 when the consumer's sum is the producer's
// and every block was freed; 1 otherwise; 2 for bad arguments.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <toga/cuda/heap.cuh>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fd_passing.hpp"

// A node links to the next by its heap offset (+1; 0 ends the list): an address would mean
// nothing in the other process, which maps the heap elsewhere.
struct node {
  unsigned long long next;
  unsigned long long value;
};

// Producer: thread t pushes n nodes (values t*n .. t*n+n-1) and stores its list's head offset.
__global__ void build(toga::cuda::heap_ref heap, unsigned long long* heads, unsigned threads, unsigned n, unsigned* failures) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= threads) return;
  unsigned long long head = 0;
  for (unsigned i = 0; i < n; ++i) {
    node* x = static_cast<node*>(heap.allocate(sizeof(node)));
    if (x == nullptr) {  // the heap is exhausted: toga returns nullptr, never traps
      atomicAdd(failures, 1u);
      break;
    }
    x->value = static_cast<unsigned long long>(t) * n + i;
    x->next = head;
    head = heap.export_pointer(x) + 1;
  }
  heads[t] = head;
}

// Consumer: thread t walks list t, adds its values and frees every node (blocks another
// process allocated: any process that maps the heap may free them).
__global__ void consume(toga::cuda::heap_ref heap, unsigned long long heads_off, unsigned threads, unsigned long long* sum) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= threads) return;
  const auto* heads = static_cast<const unsigned long long*>(heap.import_pointer(heads_off));
  unsigned long long s = 0;
  for (unsigned long long at = heads[t]; at != 0;) {
    node* x = static_cast<node*>(heap.import_pointer(at - 1));
    s += x->value;
    at = x->next;
    heap.deallocate(x);
  }
  atomicAdd(sum, s);
}

__global__ void make_heads(toga::cuda::heap_ref heap, unsigned threads, unsigned long long* off) {
  void* p = heap.allocate(threads * sizeof(unsigned long long));
  *off = p ? heap.export_pointer(p) + 1 : 0;
}
__global__ void free_heads(toga::cuda::heap_ref heap, unsigned long long off) { heap.deallocate(heap.import_pointer(off)); }

#define CHECK(call)                                                                           \
  do {                                                                                        \
    const cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));                 \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// What the producer sends with the two file descriptors.
struct message {
  toga::share_descriptor heap;
  unsigned long long heads;  // heap offset of the heads array
  unsigned threads;
};

int consumer(int sock) {
  message m{};
  std::size_t n = 0;
  std::vector<int> fds;
  std::string err;
  const bool got = toga_example::receive_with_fds(sock, &m, sizeof m, n, fds, err);
  if (!got || n != sizeof m || fds.size() != 2) {
    for (int fd : fds) close(fd);
    std::fprintf(stderr, "consumer: %s\n", err.empty() ? "not a heap message" : err.c_str());
    return 1;
  }
  // import maps the memory; the descriptors are ours to close either way
  struct closer {
    std::vector<int>& fds;
    ~closer() {
      for (int fd : fds) close(fd);
    }
  } close_fds{fds};
  toga::cuda::heap heap = toga::cuda::heap::import(&m.heap, sizeof m.heap, fds[0], fds[1]);
  unsigned long long* sum = nullptr;
  CHECK(cudaMalloc(&sum, sizeof *sum));
  CHECK(cudaMemset(sum, 0, sizeof *sum));
  consume<<<(m.threads + 255) / 256, 256>>>(heap.ref(), m.heads, m.threads, sum);
  free_heads<<<1, 1>>>(heap.ref(), m.heads);
  unsigned long long s = 0;
  CHECK(cudaMemcpy(&s, sum, sizeof s, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(sum));
  return write(sock, &s, sizeof s) == sizeof s ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--consumer") {
    try {
      return consumer(std::atoi(argv[2]));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "consumer: %s\n", e.what());
      return 1;
    }
  }
  const long threads = argc > 1 ? std::atol(argv[1]) : 65536;
  const long nodes = argc > 2 ? std::atol(argv[2]) : 16;
  if (argc > 3 || threads <= 0 || threads > (1L << 24) || nodes <= 0 || nodes > 4096) {
    std::fprintf(stderr, "usage: %s [threads 1..16777216] [nodes-per-thread 1..4096]\n", argv[0]);
    return 2;
  }
  // The consumer first (before this process touches CUDA), with one end of a socket pair.
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) {
    std::perror("socketpair");
    return 1;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    const std::string fd = std::to_string(sv[1]);
    execl("/proc/self/exe", argv[0], "--consumer", fd.c_str(), static_cast<char*>(nullptr));
    std::perror("exec");
    _exit(1);
  }
  close(sv[1]);

  toga::cuda::heap_options options;
  options.shareable = true;  // memory other processes can map
  toga::cuda::heap heap(std::uint64_t{512} << 20, options);
  unsigned long long* scratch = nullptr;  // [0]: the heads' offset + 1, [1]: failures
  CHECK(cudaMalloc(&scratch, 2 * sizeof *scratch));
  CHECK(cudaMemset(scratch, 0, 2 * sizeof *scratch));
  make_heads<<<1, 1>>>(heap.ref(), static_cast<unsigned>(threads), scratch);
  unsigned long long heads = 0;
  CHECK(cudaMemcpy(&heads, scratch, sizeof heads, cudaMemcpyDeviceToHost));
  if (heads == 0) {
    std::fprintf(stderr, "the heap has no room for %ld list heads\n", threads);
    return 1;
  }
  build<<<(threads + 255) / 256, 256>>>(heap.ref(), static_cast<unsigned long long*>(heap.import_pointer(heads - 1)), static_cast<unsigned>(threads),
                                        static_cast<unsigned>(nodes), reinterpret_cast<unsigned*>(scratch + 1));
  unsigned failures = 0;
  CHECK(cudaMemcpy(&failures, scratch + 1, sizeof failures, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(scratch));

  // Hand the heap and the lists over; the consumer owns the nodes from here on.
  const toga::cuda::shareable_heap exported = heap.export_shareable();
  const message m{exported.descriptor, heads - 1, static_cast<unsigned>(threads)};
  std::string err;
  const bool sent = toga_example::send_with_fds(sv[0], &m, sizeof m, {exported.heap_fd, exported.meta_fd}, err);
  close(exported.heap_fd);
  close(exported.meta_fd);
  unsigned long long sum = 0;
  const bool got = sent && read(sv[0], &sum, sizeof sum) == sizeof sum;
  int status = 0;
  waitpid(pid, &status, 0);
  if (!got) {
    std::fprintf(stderr, "the consumer did not answer (%s; exit status %d)\n", sent ? "no sum" : err.c_str(), WEXITSTATUS(status));
    return 1;
  }
  const unsigned long long total = static_cast<unsigned long long>(threads) * nodes;
  const unsigned long long expect = failures ? 0 : total * (total - 1) / 2;
  const toga::cuda::heap_attributes a = heap.attributes();
  std::printf("producer: %ld lists of %ld nodes (%u allocation failures); consumer's sum %llu (expected %llu)\n", threads, nodes, failures, sum,
              expect);
  std::printf("shared statistics: %llu allocations, %llu deallocations (by the consumer), %llu B in use\n",
              static_cast<unsigned long long>(a.allocations), static_cast<unsigned long long>(a.deallocations),
              static_cast<unsigned long long>(a.used_mem_current));
  return failures == 0 && sum == expect && a.used_mem_current == 0 && a.allocations == a.deallocations ? 0 : 1;
}
