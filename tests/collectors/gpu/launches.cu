// Known launch counts for the capture check: 7 kernels before the NVTX range
// "pipescope-check/measure", 150 inside it (100 scale, 50 shift), plus 3
// host-to-device copies, 1 device-to-host copy and 2 memsets inside.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

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

int main()
{
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
