#!/bin/bash
# The device check, for a session lent a GPU machine (/work/.library/device): the machine as librarian sees
# it, the sample kernel pulled for it and run, and uv 0.13.9 picking the wheel variant by the real GPU (no
# NV_VARIANT_PROVIDER_FORCE_*), librarian's pull agreeing. Nothing can be fetched there: first, here,
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 -d .whl uv==0.13.9 tomli_w huggingface_hub==2.4.0 httpx2 httpcore2 \
#     truststore idna hf-xet typer click pydantic pydantic_core typing-inspection annotated-types annotated-doc
# (.whl ignored by .git/info/exclude), copy this file to .whl/check.sh, build the verdict configurations
# (.venv/bin/python scripts/gpu_verdicts.py build), and run it there with carry [".whl", "build/gpu_verdicts"].
set -u
exec > >(tee $OUT/log) 2>&1
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
L="python3 -m librarian"
echo "== nvidia-smi"; nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda, torch.cuda.get_device_capability())"
RT=$(python3 -c "import nvidia, pathlib; print(next(p.parent for p in pathlib.Path(nvidia.__path__[0]).rglob('libcudart.so.13*')))" 2>/dev/null)
echo "libcudart.so.13 in: $RT"; export LD_LIBRARY_PATH=$RT
echo "== doctor --machine"; $L doctor --machine
echo "== doctor --env of this machine's own torch environment"; time $L doctor --env --python "$(command -v python3)"
echo "== doctor's verdict beside the real launch, per kind of device code"; python3 scripts/gpu_verdicts.py run
echo "== publish the samples with --variants"; $L publish samples/dist/*.whl --torch 2.11 --cuda 13.0 --variants --repo /tmp/store | tail -2
python3 - <<'PY'
from pathlib import Path
from tests.builders import make_wheel
for sm in ("86", "90"):
    files = {"kern/__init__.py": b"", "kern/_C.so": Path(f"tests/data/cuda/sm_{sm}.so").read_bytes()}
    make_wheel(Path(f"/tmp/kb/{sm}"), "kern", "1.0", "cp312-cp312-linux_x86_64", files, modes={"kern/_C.so": 0o755})
PY
for sm in 86 90; do $L publish /tmp/kb/$sm/*.whl --torch 2.11 --cuda 13.0 --variants --repo /tmp/store | tail -1; done
python3 -c "import json; d = json.load(open('/tmp/store/variants/kern-1.0-variants.json')); print({k: v['nvidia']['sm_arch'] for k, v in d['variants'].items()})"
$L ls --repo /tmp/store
echo "== pull for this machine (detected), install, run"; $L pull tinykern --repo /tmp/store -o /tmp/pulled && \
python3 -m venv --system-site-packages /tmp/pv && /tmp/pv/bin/pip install -q --no-deps --no-index /tmp/pulled/*.whl && \
/tmp/pv/bin/python -c "import tinykern; print('pulled tinykern.add ->', tinykern.add([1.0, 2.0], [3.0, 4.0]))"
echo "== doctor on the pulled wheel"; $L doctor /tmp/pulled/*.whl
echo "== uv 0.13.9, the real GPU: no librarian in the client venv"; uv --version
uv venv -q --clear -p python3 /tmp/uvv
C="env -u PYTHONPATH -C /tmp"  # the client: no librarian on its path, nor in its working folder
VIRTUAL_ENV=/tmp/uvv $C uv pip install --no-index --preview-features wheel-variants tinykern --find-links /tmp/store/variants/tinykern.html
$C /tmp/uvv/bin/python -c "import json, importlib.metadata as m, tinykern; d = m.distribution('tinykern'); print('uv chose', list(json.loads(d.read_text('variant.json'))['variants']), '->', tinykern.add([1.0, 2.0], [3.0, 4.0]))"
$C /tmp/uvv/bin/python -c "import librarian" 2>&1 | tail -1  # expected: No module named 'librarian'
echo "== a driver too old for the code, forced (uv must refuse)"
NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION=12.4 VIRTUAL_ENV=/tmp/uvv $C uv pip install --reinstall --no-index --preview-features wheel-variants tinykern --find-links /tmp/store/variants/tinykern.html 2>&1 | tail -2
uv venv -q --clear -p python3 /tmp/uvk
VIRTUAL_ENV=/tmp/uvk $C uv pip install --no-index --preview-features wheel-variants kern --find-links /tmp/store/variants/kern.html
python3 - <<'PY'
import hashlib, pathlib
got = next(pathlib.Path("/tmp/uvk").glob("lib/python*/site-packages/kern/_C.so")).read_bytes()
for sm in ("86", "90"):
    if got == pathlib.Path(f"tests/data/cuda/sm_{sm}.so").read_bytes():
        print("uv installed the sm_%s build of kern" % sm)
PY
$L pull kern --repo /tmp/store -o /tmp/pk && python3 - <<'PY'
import pathlib, zipfile
w = next(pathlib.Path("/tmp/pk").glob("*.whl"))
data = zipfile.ZipFile(w).read("kern/_C.so")
print("pull served", w.name, "sm_90 build" if data == pathlib.Path("tests/data/cuda/sm_90.so").read_bytes() else "other bytes")
PY
echo "== done"
