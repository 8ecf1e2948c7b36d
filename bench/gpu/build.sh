#!/usr/bin/env bash
# Generate the sweep set of kernels (bench/gpu/gen.py --all), verify each with
# `cpflow check` (any diagnostic, warnings included, fails the build) and lower
# it to PTX for sm_90a. Output: bench/gpu/build/{cpf,ptx}/NAME.{cpf,ptx}.
# Run from anywhere; needs cargo and python3 (stdlib only).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/bench/gpu/build"
cd "$root"
# CPFLOW=path/to/cpflow uses that binary instead of building the release one.
if [ -z "${CPFLOW:-}" ]; then
  cargo build -q --release 2>/dev/null
fi
cpflow="${CPFLOW:-$root/target/release/cpflow}"
rm -rf "$out"
mkdir -p "$out/cpf" "$out/ptx"
python3 bench/gpu/gen.py --all "$out/cpf" >/dev/null
# The committed kernels (bench/gpu/kernels) must be what the generator emits.
for f in bench/gpu/kernels/*.cpf; do
  [ -e "$f" ] || continue
  cmp -s "$f" "$out/cpf/$(basename "$f")" || { echo "$f differs from gen.py's output"; exit 1; }
done
n=0
ndiag=0
for f in "$out"/cpf/*.cpf; do
  name=$(basename "$f" .cpf)
  diag=$("$cpflow" check "$f" 2>&1) || true
  if [ -n "$diag" ]; then
    echo "$name: diagnostics:"; echo "$diag"
    # ALLOW_DIAG=1 builds anyway (see README: the in-progress static checker)
    [ "${ALLOW_DIAG:-0}" = 1 ] || exit 1
    ndiag=$((ndiag + 1))
  fi
  "$cpflow" compile "$f" -o "$out/ptx/$name.ptx"
  n=$((n + 1))
done
echo "built $n kernels into $out/ptx ($ndiag with diagnostics)"
