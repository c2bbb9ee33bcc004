/* A Windows torch extension's shape, for librarian's PE reader: nvcc's fatbinary in a section named
   .nv_fatb (PE's 8-byte cut of .nv_fatbin), imports from cudart64_13.dll and torch_cpu.dll, and an
   exported PyInit. EXACT picks what it imports from torch: only the C shim (stable ABI), or also an
   MSVC-mangled c10 symbol (bound to its torch line). Built by rebuild.py with mingw-w64. */
#include "fatbin.h" /* const unsigned char fatbin_bytes[]: tests/data/cuda/multi.fatbin, nvcc-built */

__attribute__((section(".nv_fatb"), used, aligned(8))) const unsigned char nv_fatbin[sizeof fatbin_bytes] = FATBIN_INIT;

__declspec(dllimport) int cudaGetDeviceCount(int *count);
__declspec(dllimport) void *aoti_torch_empty_strided(void);
#if EXACT
/* torch_cpu.def imports it by its MSVC name: c10::detail::torchCheckFail */
__declspec(dllimport) void torch_check_fail(void);
#endif

__declspec(dllexport) void *PyInit__C(void) {
    int n = 0;
    cudaGetDeviceCount(&n);
#if EXACT
    if (n < 0) torch_check_fail();
#endif
    return n ? aoti_torch_empty_strided() : (void *)nv_fatbin;
}
