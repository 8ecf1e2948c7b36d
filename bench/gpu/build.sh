#!/usr/bin/env bash
# Generate the sweep set of kernels (bench/gpu/gen.py --all), verify each with
# `cpflow check` (an error fails the build; warnings are printed) and lower
# it to PTX for sm_90a (`pipe_*` kernels through the pipeliner first). Output: bench/gpu/build/{cpf,ptx}/NAME.{cpf,ptx},
# bench/gpu/build/model-stages.txt: each `pipe_*` kernel and the stage
# count cpflow's cost model chooses for it (the sweep builds every S), and
# bench/gpu/build/model-launch.txt: the count it chooses when told the
# trips a launch of bandwidth.py gives each CTA (`// pipeline: trips=N`).
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
  status=0
  diag=$("$cpflow" check "$f" 2>&1) || status=$?
  if [ "$status" != 0 ] || ! echo "$diag" | grep -q '^cpflow check: 0 errors, 0 warnings'; then
    echo "$name: diagnostics:"; echo "$diag"
    # Errors fail the build (ALLOW_DIAG=1 builds anyway); warnings (W1004:
    # the cross-thread analysis's budget) are printed and counted.
    [ "$status" = 0 ] || [ "${ALLOW_DIAG:-0}" = 1 ] || exit 1
    ndiag=$((ndiag + 1))
  fi
  case "$name" in
    pipe_*)
      # Written single-buffered: cpflow pipelines it with S stages (from the
      # name), then lowers the ring; S = 1 is the loop compiled as written.
      # A loop left single-buffered (W2001) fails the build.
      stages=$(echo "$name" | sed 's/.*_s\([0-9]*\)_.*/\1/')
      passes="select,coalesce,sync,fence,cleanup"
      [ "$stages" = 1 ] || passes="pipeline:$stages,$passes"
      optdiag=$("$cpflow" opt "$f" --passes "$passes" -o "$out/cpf/$name.ring.cpf" 2>&1)
      if echo "$optdiag" | grep -q 'W2001'; then
        # SKIP_UNPIPELINED=1 leaves such a kernel out of the sweep (named
        # on stdout and in build/not-pipelined.txt) instead of failing.
        if [ "${SKIP_UNPIPELINED:-0}" = 1 ]; then
          echo "$name: not pipelined, left out: $(echo "$optdiag" | grep -m1 'W2001')"
          echo "$name" >> "$out/not-pipelined.txt"
          rm -f "$f" "$out/cpf/$name.ring.cpf"
          continue
        fi
        echo "$name: not pipelined:"; echo "$optdiag"; exit 1
      fi
      "$cpflow" compile "$out/cpf/$name.ring.cpf" -o "$out/ptx/$name.ptx"
      # The stage count the cost model would choose for this loop: launched
      # with as many CTAs per SM as fit, and persistent at 3 CTAs per SM
      # (`// pipeline: ctas_per_sm=3` on each loop).
      model=$("$cpflow" opt "$f" --explain -q | sed -n 's/.*pipelined, \([0-9]*\) stages.*/\1/p' | head -1)
      model3=$(sed 's|^\( *\)\(.*for %\)|\1// pipeline: ctas_per_sm=3\n\1\2|' "$f" \
        | "$cpflow" opt - --explain -q | sed -n 's/.*pipelined, \([0-9]*\) stages.*/\1/p' | head -1)
      echo "$name $model $model3" >> "$out/model-stages.txt"
      # Told the trips of each launch: the stencil's rows per CTA (rb, as
      # bandwidth.py sweeps them) over R rows a step; one row of the row
      # sums (32768 floats) per CTA over T-byte tiles.
      launches=""
      case "$name" in
        pipe_stencil_*)
          r=$(echo "$name" | sed 's/.*_r\([0-9]*\)$/\1/')
          for rb in 16 32 64 128 512; do launches="$launches rb$rb:$(( (rb + r - 1) / r ))"; done ;;
        pipe_rowsum_*)
          t=$(echo "$name" | sed 's/.*_t\([0-9]*\)k_.*/\1/')
          launches="x1row:$(( 128 / t ))" ;;
      esac
      for l in $launches; do
        modelt=$(sed "s|^\( *\)\(.*for %\)|\1// pipeline: trips=${l#*:}\n\1\2|" "$f" \
          | "$cpflow" opt - --explain -q | sed -n 's/.*pipelined, \([0-9]*\) stages.*/\1/p' | head -1)
        echo "$name ${l%%:*} $modelt" >> "$out/model-launch.txt"
      done
      ;;
    *) "$cpflow" compile "$f" -o "$out/ptx/$name.ptx" ;;
  esac
  n=$((n + 1))
done
echo "built $n kernels into $out/ptx ($ndiag with diagnostics)"
