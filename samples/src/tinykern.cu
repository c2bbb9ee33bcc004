// tinykern: one vector-add kernel behind a C ABI, so Python can call it through ctypes without torch.
// Built by ../build.py for sm_80, sm_86, sm_89, sm_90 (SASS) plus compute_90 (PTX for newer GPUs).
#include <cuda_runtime.h>

__global__ void tinykern_add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

// Every entry point returns a cudaError_t (0 is success) so the caller can report CUDA's own message.
extern "C" int tinykern_device_count(int* count) {
    return cudaGetDeviceCount(count);
}

extern "C" const char* tinykern_error_string(int code) {
    return cudaGetErrorString(static_cast<cudaError_t>(code));
}

extern "C" int tinykern_add(const float* a, const float* b, float* out, int n) {
    size_t bytes = static_cast<size_t>(n) * sizeof(float);
    float *da = nullptr, *db = nullptr, *dout = nullptr;
    cudaError_t err = cudaMalloc(&da, bytes);
    if (err == cudaSuccess) err = cudaMalloc(&db, bytes);
    if (err == cudaSuccess) err = cudaMalloc(&dout, bytes);
    if (err == cudaSuccess) err = cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice);
    if (err == cudaSuccess) err = cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice);
    if (err == cudaSuccess) {
        tinykern_add_kernel<<<(n + 255) / 256, 256>>>(da, db, dout, n);
        err = cudaGetLastError();  // "no kernel image is available" shows up here
    }
    if (err == cudaSuccess) err = cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dout);
    return err;
}
