// nccl_ref: a small, standalone reference benchmark for NCCL collectives.
//
// Written for ccltune as an independent cross-check of its timings. It uses
// the same measurement approach as the usual NCCL benchmarking practice
// (warmup, optional CUDA-graph capture, host wall clock around a batch of
// calls, time averaged over ranks, algbw/busbw), but is its own code.
//
// One MPI process per GPU; GPU index = node-local rank.
// Output (rank 0 only):
//   # ref collective=<name> nranks=<n> graph=<N> iters=<I> nccl=<version>
//   size_bytes time_us algbw_gbps busbw_gbps
//   ...

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// ---------------------------------------------------------------- errors

static int g_rank = -1;

[[noreturn]] static void die(const char* file, int line, const char* call,
                             const char* kind, const char* msg) {
  std::fprintf(stderr, "nccl_ref: rank %d: %s:%d: %s failed (%s): %s\n",
               g_rank, file, line, call, kind, msg);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);  // not reached
}

#define CUDA_OK(call)                                                     \
  do {                                                                    \
    cudaError_t e_ = (call);                                              \
    if (e_ != cudaSuccess)                                                \
      die(__FILE__, __LINE__, #call, "CUDA", cudaGetErrorString(e_));     \
  } while (0)

#define NCCL_OK(call)                                                     \
  do {                                                                    \
    ncclResult_t r_ = (call);                                             \
    if (r_ != ncclSuccess) {                                              \
      std::string m_ = ncclGetErrorString(r_);                            \
      const char* l_ = ncclGetLastError(nullptr);                         \
      if (l_ && *l_) { m_ += " | "; m_ += l_; }                           \
      die(__FILE__, __LINE__, #call, "NCCL", m_.c_str());                 \
    }                                                                     \
  } while (0)

#define MPI_OK(call)                                                      \
  do {                                                                    \
    int e_ = (call);                                                      \
    if (e_ != MPI_SUCCESS) {                                              \
      char s_[MPI_MAX_ERROR_STRING];                                      \
      int n_ = 0;                                                         \
      MPI_Error_string(e_, s_, &n_);                                      \
      die(__FILE__, __LINE__, #call, "MPI", s_);                          \
    }                                                                     \
  } while (0)

// ---------------------------------------------------------------- options

enum Coll { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALLTOALL, SENDRECV };

struct Options {
  Coll coll = ALL_REDUCE;
  std::string coll_name = "all_reduce";
  size_t min_bytes = 8;
  size_t max_bytes = 1 << 20;
  size_t factor = 2;
  int warmup = 5;
  int iters = 20;
  int graph = 0;
};

static bool parse_size(const char* s, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) return false;
  double mult = 1;
  if (*end) {
    switch (std::toupper(static_cast<unsigned char>(*end))) {
      case 'K': mult = 1024.0; break;
      case 'M': mult = 1024.0 * 1024; break;
      case 'G': mult = 1024.0 * 1024 * 1024; break;
      default: return false;
    }
    ++end;
    if (*end == 'B' || *end == 'b') ++end;  // allow "1GB"
    if (*end) return false;
  }
  *out = static_cast<size_t>(v * mult);
  return true;
}

static void usage(const char* prog) {
  std::fprintf(stderr,
      "usage: %s [-c COLL] [-b MIN] [-e MAX] [-f FACTOR] [-w WARMUP]\n"
      "          [-n ITERS] [-G GRAPH_LAUNCHES]\n"
      "  -c  all_reduce | all_gather | reduce_scatter | alltoall | sendrecv\n"
      "      (default all_reduce)\n"
      "  -b  min size in bytes, K/M/G suffixes (binary) allowed (default 8)\n"
      "  -e  max size in bytes (default 1M)\n"
      "  -f  multiplicative step factor, integer >= 2 (default 2)\n"
      "  -w  warmup calls per size (default 5)\n"
      "  -n  timed calls per size, or calls captured per graph (default 20)\n"
      "  -G  if > 0: capture -n calls into a CUDA graph and launch it G\n"
      "      times (default 0 = eager launches)\n",
      prog);
}

static bool parse_args(int argc, char** argv, Options* o, bool* help) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") { *help = true; return false; }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "missing value for %s\n", a.c_str());
      return false;
    }
    const char* v = argv[++i];
    if (a == "-c") {
      std::string c = v;
      o->coll_name = c;
      if (c == "all_reduce") o->coll = ALL_REDUCE;
      else if (c == "all_gather") o->coll = ALL_GATHER;
      else if (c == "reduce_scatter") o->coll = REDUCE_SCATTER;
      else if (c == "alltoall") o->coll = ALLTOALL;
      else if (c == "sendrecv") o->coll = SENDRECV;
      else { std::fprintf(stderr, "unknown collective %s\n", v); return false; }
    } else if (a == "-b") {
      if (!parse_size(v, &o->min_bytes)) { std::fprintf(stderr, "bad -b %s\n", v); return false; }
    } else if (a == "-e") {
      if (!parse_size(v, &o->max_bytes)) { std::fprintf(stderr, "bad -e %s\n", v); return false; }
    } else if (a == "-f") {
      long f = std::strtol(v, nullptr, 10);
      if (f < 2) { std::fprintf(stderr, "-f must be an integer >= 2\n"); return false; }
      o->factor = static_cast<size_t>(f);
    } else if (a == "-w") {
      o->warmup = std::atoi(v);
      if (o->warmup < 0) { std::fprintf(stderr, "-w must be >= 0\n"); return false; }
    } else if (a == "-n") {
      o->iters = std::atoi(v);
      if (o->iters < 1) { std::fprintf(stderr, "-n must be >= 1\n"); return false; }
    } else if (a == "-G") {
      o->graph = std::atoi(v);
      if (o->graph < 0) { std::fprintf(stderr, "-G must be >= 0\n"); return false; }
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return false;
    }
  }
  if (o->min_bytes == 0) o->min_bytes = 1;
  if (o->max_bytes < o->min_bytes) {
    std::fprintf(stderr, "-e must be >= -b\n");
    return false;
  }
  return true;
}

// ---------------------------------------------------------------- helpers

__global__ void fill_kernel(float* p, size_t n, float v) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (; i < n; i += stride) p[i] = v;
}

static int local_rank_of(int world_rank) {
  const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (env && *env) return std::atoi(env);
  // Fallback for other launchers: rank inside the node's shared-memory group.
  MPI_Comm node;
  MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank,
                             MPI_INFO_NULL, &node));
  int lr = 0;
  MPI_OK(MPI_Comm_rank(node, &lr));
  MPI_OK(MPI_Comm_free(&node));
  return lr;
}

// Per-size geometry. "size" is the nominal message size in the nccl-tests
// sense; every collective moves float32 elements.
struct Shape {
  size_t size_bytes;  // effective size actually reported
  size_t count;       // element count passed to the NCCL call (per rank/peer)
};

static Shape shape_for(Coll c, size_t size, int nranks) {
  const size_t esz = sizeof(float);
  Shape s{0, 0};
  switch (c) {
    case ALL_REDUCE:
    case SENDRECV:
      s.count = size / esz;
      s.size_bytes = s.count * esz;
      break;
    case ALL_GATHER:      // per-rank send count; recv = nranks * count
    case REDUCE_SCATTER:  // per-rank recv count; send = nranks * count
    case ALLTOALL:        // per-peer block count; buffer = nranks * count
      s.count = size / (esz * nranks);
      s.size_bytes = s.count * esz * nranks;
      break;
  }
  return s;
}

static double busbw_factor(Coll c, int n) {
  switch (c) {
    case ALL_REDUCE: return 2.0 * (n - 1) / n;
    case ALL_GATHER:
    case REDUCE_SCATTER:
    case ALLTOALL: return static_cast<double>(n - 1) / n;
    case SENDRECV: return 1.0;
  }
  return 1.0;
}

// Issue one operation of the selected collective on `stream`.
static void issue(Coll c, const float* send, float* recv, size_t count,
                  int rank, int nranks, ncclComm_t comm, cudaStream_t stream) {
  switch (c) {
    case ALL_REDUCE:
      NCCL_OK(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream));
      break;
    case ALL_GATHER:
      NCCL_OK(ncclAllGather(send, recv, count, ncclFloat32, comm, stream));
      break;
    case REDUCE_SCATTER:
      NCCL_OK(ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, comm, stream));
      break;
    case ALLTOALL:
      NCCL_OK(ncclGroupStart());
      for (int p = 0; p < nranks; ++p) {
        NCCL_OK(ncclSend(send + p * count, count, ncclFloat32, p, comm, stream));
        NCCL_OK(ncclRecv(recv + p * count, count, ncclFloat32, p, comm, stream));
      }
      NCCL_OK(ncclGroupEnd());
      break;
    case SENDRECV: {
      int to = (rank + 1) % nranks;
      int from = (rank - 1 + nranks) % nranks;
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclSend(send, count, ncclFloat32, to, comm, stream));
      NCCL_OK(ncclRecv(recv, count, ncclFloat32, from, comm, stream));
      NCCL_OK(ncclGroupEnd());
      break;
    }
  }
}

static std::string nccl_version_string() {
  int v = 0;
  NCCL_OK(ncclGetVersion(&v));
  int major, minor, patch;
  if (v >= 10000) {  // 2.9+ encoding: X*10000 + Y*100 + Z
    major = v / 10000; minor = (v % 10000) / 100; patch = v % 100;
  } else {           // older encoding: X*1000 + Y*100 + Z
    major = v / 1000; minor = (v % 1000) / 100; patch = v % 100;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%d.%d.%d", major, minor, patch);
  return buf;
}

// ---------------------------------------------------------------- main

int main(int argc, char** argv) {
  MPI_OK(MPI_Init(&argc, &argv));
  int rank = 0, nranks = 1;
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
  g_rank = rank;
  // Let MPI errors come back to MPI_OK so they are reported with file:line.
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

  Options opt;
  bool help = false;
  if (!parse_args(argc, argv, &opt, &help)) {
    if (rank == 0) usage(argv[0]);
    MPI_Finalize();
    return help ? 0 : 2;
  }

  int ndev = 0;
  CUDA_OK(cudaGetDeviceCount(&ndev));
  int dev = local_rank_of(rank);
  if (dev >= ndev) {
    char msg[128];
    std::snprintf(msg, sizeof(msg), "local rank %d but only %d GPUs visible", dev, ndev);
    die(__FILE__, __LINE__, "device selection", "setup", msg);
  }
  CUDA_OK(cudaSetDevice(dev));

  ncclUniqueId id;
  if (rank == 0) NCCL_OK(ncclGetUniqueId(&id));
  MPI_OK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));
  ncclComm_t comm;
  NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // Buffers are allocated once, big enough for the largest size of any
  // collective (whole-buffer side is at most max_bytes in every case).
  size_t max_elems = (opt.max_bytes + sizeof(float) - 1) / sizeof(float);
  if (max_elems == 0) max_elems = 1;
  float* sendbuf = nullptr;
  float* recvbuf = nullptr;
  CUDA_OK(cudaMalloc(&sendbuf, max_elems * sizeof(float)));
  CUDA_OK(cudaMalloc(&recvbuf, max_elems * sizeof(float)));
  fill_kernel<<<1024, 256, 0, stream>>>(sendbuf, max_elems, static_cast<float>(rank + 1));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaMemsetAsync(recvbuf, 0, max_elems * sizeof(float), stream));
  CUDA_OK(cudaStreamSynchronize(stream));

  std::string ver = nccl_version_string();
  if (rank == 0) {
    std::printf("# ref collective=%s nranks=%d graph=%d iters=%d nccl=%s\n",
                opt.coll_name.c_str(), nranks, opt.graph, opt.iters, ver.c_str());
    std::fflush(stdout);
  }

  const double bw_factor = busbw_factor(opt.coll, nranks);

  for (size_t size = opt.min_bytes; size <= opt.max_bytes;) {
    Shape sh = shape_for(opt.coll, size, nranks);
    if (sh.count == 0) {
      if (rank == 0) {
        std::printf("# skip size=%zu: less than one element per rank\n", size);
        std::fflush(stdout);
      }
    } else {
      // Warmup (eager), then drain.
      for (int i = 0; i < opt.warmup; ++i)
        issue(opt.coll, sendbuf, recvbuf, sh.count, rank, nranks, comm, stream);
      CUDA_OK(cudaStreamSynchronize(stream));

      double elapsed_s = 0.0;
      long long calls = 0;
      if (opt.graph > 0) {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < opt.iters; ++i)
          issue(opt.coll, sendbuf, recvbuf, sh.count, rank, nranks, comm, stream);
        CUDA_OK(cudaStreamEndCapture(stream, &graph));
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
        // One untimed launch: uploads the graph and runs it once.
        CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));

        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        auto t0 = std::chrono::steady_clock::now();
        for (int g = 0; g < opt.graph; ++g) CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        auto t1 = std::chrono::steady_clock::now();
        elapsed_s = std::chrono::duration<double>(t1 - t0).count();
        calls = static_cast<long long>(opt.iters) * opt.graph;

        CUDA_OK(cudaGraphExecDestroy(exec));
        CUDA_OK(cudaGraphDestroy(graph));
      } else {
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < opt.iters; ++i)
          issue(opt.coll, sendbuf, recvbuf, sh.count, rank, nranks, comm, stream);
        CUDA_OK(cudaStreamSynchronize(stream));
        auto t1 = std::chrono::steady_clock::now();
        elapsed_s = std::chrono::duration<double>(t1 - t0).count();
        calls = opt.iters;
      }

      double per_call_s = elapsed_s / static_cast<double>(calls);
      double sum_s = 0.0;
      MPI_OK(MPI_Allreduce(&per_call_s, &sum_s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
      double avg_s = sum_s / nranks;

      if (rank == 0) {
        double algbw = static_cast<double>(sh.size_bytes) / avg_s / 1e9;
        double busbw = algbw * bw_factor;
        std::printf("%zu %.3f %.3f %.3f\n", sh.size_bytes, avg_s * 1e6, algbw, busbw);
        std::fflush(stdout);
      }
    }

    if (size > opt.max_bytes / opt.factor) break;  // next step would overflow/exceed
    size *= opt.factor;
  }

  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaFree(sendbuf));
  CUDA_OK(cudaFree(recvbuf));
  NCCL_OK(ncclCommDestroy(comm));
  CUDA_OK(cudaStreamDestroy(stream));
  MPI_OK(MPI_Finalize());
  return 0;
}
