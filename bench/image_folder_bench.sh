#!/usr/bin/env bash
# Issue 36's benchmark: decode-and-batch throughput of Loom's ImageFolder + DataLoader
# (bench/image_folder_bench.cpp) against torchvision's ImageFolder + DataLoader
# (bench/torch_image_folder_peer.py, Debian's python3-torchvision under /usr/bin/python3) on the
# same generated files: N JPEGs of 256 x 256 (quality 90, 10 classes) resized to 224 (shorter side,
# antialiased bilinear) in batches of 64, n_jobs / num_workers 0 and 2, in one run. Prints the CPU,
# both figures and the ratio Loom images/s / torchvision images/s (above 1: Loom faster).
#   bash bench/image_folder_bench.sh [BUILD=build] [N=2000] [epochs=3]
# With LOOM_BENCH_RESULTS=FILE it also appends result records (docs/benchmarks.md's "ops" table).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
n=${2:-2000}
epochs=${3:-3}
dir=$(mktemp -d /tmp/loom-image-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir/root" "$n" <<'PY'
# Photographs are smooth with some texture: low-frequency random fields plus noise, per image.
import os, sys
import numpy as np
from PIL import Image
root, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
for i in range(n):
    d = os.path.join(root, "class%02d" % (i % 10))
    os.makedirs(d, exist_ok=True)
    low = rng.integers(0, 256, (8, 8, 3)).astype(np.uint8)
    img = np.asarray(Image.fromarray(low).resize((256, 256), Image.BICUBIC), dtype=np.int16)
    img = np.clip(img + rng.integers(-12, 13, img.shape), 0, 255).astype(np.uint8)
    Image.fromarray(img).save(os.path.join(d, "%05d.jpg" % i), quality=90)
PY
echo "CPU: $(cd "$here" && python3 -c 'import bench_results as b; print(b.cpu_description(b.cpuinfo()))'), $(nproc) threads available; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/bench/image_folder_bench" "$dir/root" "$epochs" | tee "$dir/loom.txt"
/usr/bin/python3 "$here/torch_image_folder_peer.py" "$dir/root" "$epochs" | tee "$dir/torch.txt"
python3 - "$dir/loom.txt" "$dir/torch.txt" "$n" <<'PY'
import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv[0] != "-" else ".")
pat = re.compile(r"n_jobs (\d): +([\d.]+) images/s")
read = lambda p: {int(j): float(v) for j, v in pat.findall(open(p).read())}
loom, tv = read(sys.argv[1]), read(sys.argv[2])
print("ImageFolder + DataLoader, JPEG 256x256 -> 224, batch 64: Loom images/s / torchvision images/s (goal >= 1.5)")
for j in sorted(loom):
    print(f"  n_jobs {j}: Loom {loom[j]:8.1f} images/s, torchvision {tv[j]:8.1f} images/s, ratio {loom[j] / tv[j]:.2f}")
open(sys.argv[1] + ".ratios", "w").write(repr((loom, tv)))
PY
if [[ -n ${LOOM_BENCH_RESULTS:-} ]]; then
  python3 - "$dir/loom.txt.ratios" "$n" <<PY
import os, sys
sys.path.insert(0, "$here")
import bench_results as br
loom, tv = eval(open(sys.argv[1]).read())
recs = []
for j in sorted(loom):
    # threads: the machine's (Loom's pool and torch's intra-op threads); the row names the workers
    r = br.base_record("ops", "image_folder_jpeg224_jobs%d" % j,
                       "ImageFolder + DataLoader, %s JPEGs 256² → 224, batch 64, n_jobs / num_workers %d" % (sys.argv[2], j),
                       os.cpu_count(), command="bash bench/image_folder_bench.sh")
    r.update({"units": "images/s", "loom": br.number(loom[j], 0),
              "peers": [{"name": "torchvision ImageFolder + DataLoader", "value": br.number(tv[j], 0),
                         "ratio": br.number(loom[j] / tv[j], 2), "goal": 1.5, "ratio_note": "(Loom / torchvision)"}],
              "goal_text": "≥ 1.5"})
    recs.append(r)
br.append("$LOOM_BENCH_RESULTS", recs)
PY
fi
