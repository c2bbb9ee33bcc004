"""torchkern: the smallest real PyTorch CUDA extension, for the opt-in real build (tests/test_real_build.py).

One kernel and one ``at::Tensor`` binding, built by torch's own ``CUDAExtension`` for whatever
``TORCH_CUDA_ARCH_LIST`` says: its bytes link libc10 and libtorch and import mangled C++ torch symbols, so
they bind it to exactly the torch line it was built against.
"""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="torchkern",
    version="0.1.0",
    packages=["torchkern"],
    ext_modules=[CUDAExtension("torchkern._C", ["csrc/scale.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
