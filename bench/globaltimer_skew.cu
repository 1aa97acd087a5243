// Do the GPUs of one host agree on %globaltimer? NCCL's kernel stamps the profiler's KernelCh events
// with it (src/device/common.h globaltimer()), and ccltune's waiting split compares those stamps across
// the ranks of a node (docs/workload.md, "In-job times"). For each GPU: a one-thread kernel reads
// %globaltimer; the host reads CLOCK_REALTIME before the launch and after the synchronize; of 200 tries
// the one with the narrowest host bracket gives the GPU's offset from the host clock (its midpoint).
//   nvcc -O2 -o globaltimer_skew bench/globaltimer_skew.cu && ./globaltimer_skew
// Prints one line per GPU (offset us, bracket us) and the spread (max - min offset): offsets that differ
// by more than the brackets mean the GPUs' timers are not one clock.
#include <cstdio>
#include <cstdint>
#include <ctime>
#include <cuda_runtime.h>

__global__ void read_timer(unsigned long long* out) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  *out = t;
}

static int64_t host_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("no GPU\n");
    return 1;
  }
  double lo = 1e300, hi = -1e300;
  printf("# gpu offset_us(globaltimer - host CLOCK_REALTIME) bracket_us\n");
  for (int d = 0; d < n; d++) {
    cudaSetDevice(d);
    unsigned long long* buf;
    cudaMallocHost(&buf, sizeof *buf);
    read_timer<<<1, 1>>>(buf);  // warm: module load, context
    cudaDeviceSynchronize();
    double best_w = 1e300, best_off = 0;
    for (int i = 0; i < 200; i++) {
      int64_t t0 = host_ns();
      read_timer<<<1, 1>>>(buf);
      cudaDeviceSynchronize();
      int64_t t1 = host_ns();
      double w = (double)(t1 - t0);
      if (w < best_w) {
        best_w = w;
        best_off = (double)((int64_t)*buf - (t0 + (t1 - t0) / 2));
      }
    }
    printf("gpu %d %.1f %.1f\n", d, best_off / 1000, best_w / 1000);
    lo = best_off < lo ? best_off : lo;
    hi = best_off > hi ? best_off : hi;
    cudaFreeHost(buf);
  }
  printf("# spread of the offsets across the %d GPUs: %.1f us\n", n, (hi - lo) / 1000);
  return 0;
}
