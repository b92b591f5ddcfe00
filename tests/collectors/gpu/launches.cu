// Known launch counts for the capture check: 7 kernels before the NVTX range
// "pipescope-check/measure", 150 inside it (100 scale, 50 shift), plus 3
// host-to-device copies, 1 device-to-host copy and 2 memsets inside.
//   launches --rate N   instead: N launches of a tiny kernel, timed; prints
//                       the host time per launch (the capture's per-kernel cost)
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void scale(float* x, int n, float a)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= a;
}

__global__ void shift(float* x, int n, float b)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += b;
}

// Host microseconds per launch of a one-block kernel: the loop alone
// (launch_us) and until the GPU has run them all (total_us).
int launchRate(int n)
{
    float* d = nullptr;
    if (cudaMalloc(&d, 256 * sizeof(float)) != cudaSuccess) {
        std::fprintf(stderr, "cudaMalloc failed\n");
        return 1;
    }
    for (int i = 0; i < 1000; ++i)
        shift<<<1, 32>>>(d, 32, 0.0f);
    cudaDeviceSynchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i)
        shift<<<1, 32>>>(d, 32, 0.0f);
    auto t1 = std::chrono::steady_clock::now();
    cudaDeviceSynchronize();
    auto t2 = std::chrono::steady_clock::now();
    auto us = [n](auto a, auto b) { return std::chrono::duration<double, std::micro>(b - a).count() / n; };
    std::printf("RESULT launches=%d launch_us=%.3f total_us=%.3f\n", n, us(t0, t1), us(t0, t2));
    cudaFree(d);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

int main(int argc, char** argv)
{
    if (argc == 3 && std::strcmp(argv[1], "--rate") == 0)
        return launchRate(std::atoi(argv[2]) > 0 ? std::atoi(argv[2]) : 20000);
    const int n = 1 << 20;
    float* d = nullptr;
    static float h[1 << 20];
    if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) {
        std::fprintf(stderr, "cudaMalloc failed\n");
        return 1;
    }
    for (int i = 0; i < 7; ++i)
        scale<<<n / 256, 256>>>(d, n, 1.0f);
    cudaDeviceSynchronize();

    nvtxRangePushA("pipescope-check/measure");
    for (int i = 0; i < 3; ++i)
        cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(d, 0, n * sizeof(float));
    cudaMemset(d, 0, n / 2 * sizeof(float));
    for (int i = 0; i < 100; ++i)
        scale<<<n / 256, 256>>>(d, n, 1.0001f);
    for (int i = 0; i < 50; ++i)
        shift<<<n / 256, 256>>>(d, n, 0.5f);
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaDeviceSynchronize();
    nvtxRangePop();

    cudaFree(d);
    std::printf("launches: 7 before, 150 measured; h[0]=%g\n", h[0]);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
