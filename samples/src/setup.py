"""tinykern as a source package: ``pip wheel`` compiles the kernel for ``TORCH_CUDA_ARCH_LIST``.

What a torch extension's build does with that variable, without torch (the sample links none): each
``X.Y`` becomes SASS ``sm_XY``, and ``+PTX`` adds PTX ``compute_XY``. The example workflow's build job
runs it this way (tests/test_examples.py), as it would run ``pip wheel flash-attn==2.8.3``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def gencode(arch_list: str) -> list[str]:
    """``8.0;8.9+PTX`` -> ``-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_89,code=[sm_89,compute_89]``."""
    flags = []
    for item in filter(None, arch_list.replace(" ", ";").split(";")):
        ptx = item.endswith("+PTX")
        number = item.removesuffix("+PTX").replace(".", "")
        code = f"[sm_{number},compute_{number}]" if ptx else f"sm_{number}"
        flags.append(f"-gencode=arch=compute_{number},code={code}")
    if not flags:
        raise SystemExit("tinykern: set TORCH_CUDA_ARCH_LIST (e.g. 8.0;8.9) to say which GPUs to build for")
    return flags


class BuildWithKernel(build_py):
    """Compile ``tinykern.cu`` into ``tinykern/_tinykern.so`` beside the Python files."""

    def run(self) -> None:
        super().run()
        nvcc = os.environ.get("NVCC") or shutil.which("nvcc") or "nvcc"
        out = Path(self.build_lib) / "tinykern" / "_tinykern.so"
        out.parent.mkdir(parents=True, exist_ok=True)
        obj = Path(self.build_temp if hasattr(self, "build_temp") else self.build_lib) / "tinykern.o"
        obj.parent.mkdir(parents=True, exist_ok=True)
        # compiled, then linked, as a torch extension's objects are: a compile cache keeps the compile
        compile_cmd = [nvcc, "-O2", "-c", "-Xcompiler", "-fPIC",
                       *gencode(os.environ.get("TORCH_CUDA_ARCH_LIST", "")), "-o", str(obj),
                       str(HERE / "tinykern.cu")]  # fmt: skip
        subprocess.run(compile_cmd, check=True)
        cmd = [nvcc, "-shared", "-cudart", "shared", "-o", str(out), str(obj)]
        subprocess.run(cmd, check=True)


class BinaryDistribution(Distribution):
    """A platform wheel with its files in platlib (the .so is native code), as an extension module's is,
    though no Python extension module is declared: auditwheel repairs only platlib wheels."""

    def has_ext_modules(self) -> bool:
        return True


setup(
    name="tinykern",
    version="0.1.0",
    packages=["tinykern"],
    cmdclass={"build_py": BuildWithKernel},
    distclass=BinaryDistribution,
    zip_safe=False,
)
