// Hand-written CUDA C++ copy rings, compiled by nvcc: the reference that
// cpflow's generated rings (bench/gpu/gen.py) are compared against, SASS and
// bandwidth. Same parameters as gen.py's copy kernels: (src, dst, ntiles);
// CTA c copies tiles c, c + nctaid, ... (grid stride).
//
//  cu_bulk_copy_sS_tTk_lL  the shape of gen.py's `bulk` copy ring: thread 0
//                          loads L tiles ahead on full[s], waits, bulk-stores,
//                          `wait_group.read S-L` before each refill. 32 threads.
//  cu_dyn_copy_sS_tTk_lL   the same ring taking its tiles from a global
//                          counter (atomicAdd) instead of the grid stride;
//                          one more parameter: the counter (2 x u32, zeroed).
//  cu_ws_copy_sS_tTk       CUTLASS PipelineTmaAsync structure: a producer
//                          thread waits on empty[s] and loads on full[s]; a
//                          consumer thread (warp 1) waits on full[s], stores,
//                          `wait_group.read 0`, arrives on empty[s]. 64 threads.
//  cu_cpadyn_copy_sS_tTk_wN  the cp.async ring with tiles from the counter.
//  cu_cpa_copy_sS_tTk_wN   the shape of gen.py's `cpa` ring: each thread
//                          copies its 16-byte chunks with cp.async.cg, one
//                          group per tile, S-1 tiles ahead, ld.shared.v4 +
//                          st.global.v4 back (no barrier: own chunks only).
//
// Build: nvcc -arch=sm_90a -cubin -O3 -o rings.cubin rings.cu
#include <cstdint>

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t *b, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(b)), "r"(count));
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(b)) : "memory");
}

// CUTLASS ClusterBarrier::wait: try_wait.parity in a loop.
__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred P1;\n"
      "LAB_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
      "@P1 bra DONE;\n\t"
      "bra LAB_WAIT;\n"
      "DONE:\n\t}" ::"r"(smem_addr(b)),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

__device__ __forceinline__ void bulk_store(void *dst, const void *src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_addr(src)),
               "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

template <int N> __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// One thread per CTA, after the CTA's last tile: counts the CTA done; the
// last CTA zeroes the tile counter (counter[0]) and itself (counter[1]) for
// the next launch (every CTA has taken its last tile by then).
__device__ __forceinline__ void reset_counter(unsigned *counter) {
  __threadfence();
  if (atomicAdd(counter + 1, 1u) == gridDim.x - 1) {
    counter[0] = 0;
    counter[1] = 0;
  }
}

template <int S> __device__ __forceinline__ void init_full(uint64_t *full) {
  for (int s = 0; s < S; ++s)
    mbar_init(&full[s], 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ uint32_t my_count(int ntiles) {
  int c = blockIdx.x, n = gridDim.x;
  return c < ntiles ? (ntiles - c + n - 1) / n : 0;
}

template <int S, int T, int L>
__device__ __forceinline__ void bulk_copy_ring(const char *src, char *dst, int ntiles) {
  __shared__ alignas(128) char ring[S * T];
  __shared__ alignas(8) uint64_t full[S];
  uint32_t cnt = my_count(ntiles);
  if (threadIdx.x != 0)
    return;
  init_full<S>(full);
  const size_t stride = size_t(gridDim.x) * T;
  const char *g = src + size_t(blockIdx.x) * T;
  char *d = dst + size_t(blockIdx.x) * T;
  for (uint32_t j = 0; j < L && j < cnt; ++j) {
    mbar_arrive_expect_tx(&full[j % S], T);
    bulk_load(ring + (j % S) * T, g + j * stride, T, &full[j % S]);
  }
  for (uint32_t i = 0; i < cnt; ++i) {
    uint32_t s = i % S;
    mbar_wait(&full[s], (i / S) & 1);
    bulk_store(d + i * stride, ring + s * T, T);
    uint32_t j = i + L;
    if (j < cnt) {
      bulk_wait_read<S - L>();
      mbar_arrive_expect_tx(&full[j % S], T);
      bulk_load(ring + (j % S) * T, g + j * stride, T, &full[j % S]);
    }
  }
  bulk_wait_all();
}

// The bulk ring of bulk_copy_ring with tiles taken from a global counter
// (atomicAdd when a load is issued) instead of the static grid stride, so
// that the tiles in flight stay a narrow, advancing window of the buffer
// as with one tile per CTA. counter[0]: next tile, counter[1]: CTAs done;
// the last CTA to finish zeroes both for the next launch.
template <int S, int T, int L>
__device__ __forceinline__ void dyn_copy_ring(const char *src, char *dst, int ntiles, unsigned *counter) {
  __shared__ alignas(128) char ring[S * T];
  __shared__ alignas(8) uint64_t full[S];
  if (threadIdx.x != 0)
    return;
  init_full<S>(full);
  uint32_t tile[S];
  uint32_t cnt = 0;
  bool more = true;
  auto grab = [&](uint32_t j) {
    uint32_t t = atomicAdd(counter, 1u);
    more = t < uint32_t(ntiles);
    if (more) {
      tile[j % S] = t;
      mbar_arrive_expect_tx(&full[j % S], T);
      bulk_load(ring + (j % S) * T, src + size_t(t) * T, T, &full[j % S]);
      ++cnt;
    }
  };
  for (uint32_t j = 0; j < L && more; ++j)
    grab(j);
  for (uint32_t i = 0; i < cnt; ++i) {
    uint32_t s = i % S;
    mbar_wait(&full[s], (i / S) & 1);
    bulk_store(dst + size_t(tile[s]) * T, ring + s * T, T);
    if (more) {
      bulk_wait_read<S - L>();
      grab(i + L);
    }
  }
  bulk_wait_all();
  reset_counter(counter);
}

template <int S, int T>
__device__ __forceinline__ void ws_copy_ring(const char *src, char *dst, int ntiles) {
  __shared__ alignas(128) char ring[S * T];
  __shared__ alignas(8) uint64_t full[S];
  __shared__ alignas(8) uint64_t empty[S];
  uint32_t cnt = my_count(ntiles);
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const size_t stride = size_t(gridDim.x) * T;
  if (threadIdx.x == 0) {
    const char *g = src + size_t(blockIdx.x) * T;
    for (uint32_t j = 0; j < cnt; ++j) {
      uint32_t s = j % S;
      mbar_wait(&empty[s], ((j / S) & 1) ^ 1);
      mbar_arrive_expect_tx(&full[s], T);
      bulk_load(ring + s * T, g + j * stride, T, &full[s]);
    }
  } else if (threadIdx.x == 32) {
    char *d = dst + size_t(blockIdx.x) * T;
    for (uint32_t i = 0; i < cnt; ++i) {
      uint32_t s = i % S;
      mbar_wait(&full[s], (i / S) & 1);
      bulk_store(d + i * stride, ring + s * T, T);
      bulk_wait_read<0>();
      mbar_arrive(&empty[s]);
    }
    bulk_wait_all();
  }
}

template <int S, int T, int N>
__device__ __forceinline__ void cpa_copy_ring(const char *src, char *dst, int ntiles) {
  constexpr int PER = T / (16 * N);
  __shared__ alignas(128) char ring[S * T];
  uint32_t cnt = my_count(ntiles);
  const size_t stride = size_t(gridDim.x) * T;
  const int col = threadIdx.x * 16;
  const char *g = src + size_t(blockIdx.x) * T + col;
  char *d = dst + size_t(blockIdx.x) * T + col;
  char *mine = ring + col;
  auto issue = [&](uint32_t j) {
    uint32_t n = j < cnt ? 16 : 0;
    uint32_t jc = j < cnt ? j : 0;
    for (int e = 0; e < PER; ++e)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                       smem_addr(mine + (j % S) * T + e * 16 * N)),
                   "l"(g + jc * stride + e * 16 * N), "r"(n)
                   : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (uint32_t j = 0; j < S - 1; ++j)
    issue(j);
  for (uint32_t i = 0; i < cnt; ++i) {
    issue(i + S - 1);
    asm volatile("cp.async.wait_group %0;" ::"n"(S - 1) : "memory");
    for (int e = 0; e < PER; ++e) {
      int4 v = *reinterpret_cast<const int4 *>(mine + (i % S) * T + e * 16 * N);
      *reinterpret_cast<int4 *>(d + i * stride + e * 16 * N) = v;
    }
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// The cp.async ring with tiles from a global counter: thread 0 takes the
// tile of the slot it is about to refill before the per-tile barrier, every thread copies its chunks of it; a CTA stops at the first
// tile >= ntiles. counter as in dyn_copy_ring.
template <int S, int T, int N>
__device__ __forceinline__ void cpa_dyn_copy_ring(const char *src, char *dst, int ntiles, unsigned *counter) {
  constexpr int PER = T / (16 * N);
  __shared__ alignas(128) char ring[S * T];
  // tile of the CTA's j-th tile at j % 2S: the entry written for tile
  // i + S - 1 is not the one other threads may still read for tile i - 1
  __shared__ uint32_t tile_of[2 * S];
  const int col = threadIdx.x * 16;
  char *mine = ring + col;
  auto grab = [&](uint32_t j) {
    if (threadIdx.x == 0)
      tile_of[j % (2 * S)] = atomicAdd(counter, 1u);
  };
  auto issue = [&](uint32_t j) {
    uint32_t t = tile_of[j % (2 * S)];
    bool in = t < uint32_t(ntiles);
    const char *g = src + size_t(in ? t : 0) * T + col;
    for (int e = 0; e < PER; ++e)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                       smem_addr(mine + (j % S) * T + e * 16 * N)),
                   "l"(g + e * 16 * N), "r"(in ? 16 : 0)
                   : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (uint32_t j = 0; j < S - 1; ++j)
    grab(j);
  __syncthreads();
  for (uint32_t j = 0; j < S - 1; ++j)
    issue(j);
  for (uint32_t i = 0;; ++i) {
    // slot (i + S - 1) % S held tile i - 1, read back by every thread in
    // the previous iteration: the barrier orders those reads (and the
    // tile_of entry) before the refill
    grab(i + S - 1);
    __syncthreads();
    uint32_t t = tile_of[i % (2 * S)];
    if (t >= uint32_t(ntiles))
      break;
    issue(i + S - 1);
    asm volatile("cp.async.wait_group %0;" ::"n"(S - 1) : "memory");
    char *d = dst + size_t(t) * T + col;
    for (int e = 0; e < PER; ++e) {
      int4 v = *reinterpret_cast<const int4 *>(mine + (i % S) * T + e * 16 * N);
      *reinterpret_cast<int4 *>(d + e * 16 * N) = v;
    }
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  if (threadIdx.x == 0)
    reset_counter(counter);
}

#define BULK(S, T, L)                                                                                     \
  extern "C" __global__ void cu_bulk_copy_s##S##_t##T##k_l##L(const char *src, char *dst, int ntiles) {  \
    bulk_copy_ring<S, T * 1024, L>(src, dst, ntiles);                                                    \
  }
#define DYN(S, T, L)                                                                                      \
  extern "C" __global__ void cu_dyn_copy_s##S##_t##T##k_l##L(const char *src, char *dst, int ntiles,      \
                                                             unsigned *counter) {                        \
    dyn_copy_ring<S, T * 1024, L>(src, dst, ntiles, counter);                                            \
  }
#define CPADYN(S, T, N)                                                                                   \
  extern "C" __global__ void cu_cpadyn_copy_s##S##_t##T##k_w##N(const char *src, char *dst, int ntiles,   \
                                                                unsigned *counter) {                     \
    cpa_dyn_copy_ring<S, T * 1024, N>(src, dst, ntiles, counter);                                        \
  }
#define WS(S, T)                                                                                          \
  extern "C" __global__ void cu_ws_copy_s##S##_t##T##k(const char *src, char *dst, int ntiles) {         \
    ws_copy_ring<S, T * 1024>(src, dst, ntiles);                                                         \
  }
#define CPA(S, T, N)                                                                                      \
  extern "C" __global__ void cu_cpa_copy_s##S##_t##T##k_w##N(const char *src, char *dst, int ntiles) {   \
    cpa_copy_ring<S, T * 1024, N>(src, dst, ntiles);                                                     \
  }

BULK(5, 8, 4)
BULK(4, 8, 2)
BULK(8, 2, 4)
BULK(8, 4, 4)
DYN(5, 8, 4)
DYN(4, 8, 2)
DYN(8, 4, 4)
DYN(8, 2, 4)
WS(4, 8)
WS(5, 8)
WS(8, 4)
WS(8, 2)
WS(16, 2)
CPA(4, 2, 128)
CPA(8, 2, 128)
CPA(4, 4, 256)
CPA(4, 8, 256)
CPADYN(4, 2, 128)
CPADYN(8, 2, 128)
CPADYN(4, 8, 256)
