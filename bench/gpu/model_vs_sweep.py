#!/usr/bin/env python3
"""The cost model's stage count against the sweep: for every pipelined
kernel and launch of a bandwidth.py log, the stage count cpflow's cost model
chooses (build.sh's model-launch.txt, told each launch's trips, and
model-stages.txt, told nothing) beside the best stage count of the sweep.

    python3 bench/gpu/model_vs_sweep.py LOG MODEL_STAGES MODEL_LAUNCH

LOG is a bandwidth.py log (its sweep sections), MODEL_STAGES and
MODEL_LAUNCH build.sh's model-stages.txt and model-launch.txt. Prints one row per kernel and launch
(sweep medians, GB/s) and, per job, the worst ratio and how many rows are
within 2% of the sweep's best. Python 3.11, stdlib only.
"""
import collections
import re
import sys

SWEEP_ROW = re.compile(r"\s+(pipe_(\w+?)_s(\d+)_(\S+))\s+(\S+)\s+\S+\s+([\d.]+)\s+\[")


def sweep(log):
    """{(job, kernel without its stage count, launch): {S: GB/s}} of the
    sweep sections."""
    runs = collections.defaultdict(dict)
    in_sweep = False
    for line in open(log):
        if line.startswith("== "):
            in_sweep = ": sweep" in line
            continue
        m = SWEEP_ROW.match(line)
        if in_sweep and m:
            _, job, s, rest, launch, gbs = m.groups()
            runs[(job, f"pipe_{job}_{rest}", launch)][int(s)] = float(gbs)
    return runs


def models(stages_file, launch_file):
    """{(kernel without its stage count, launch or None): S} of build.sh's
    model files (every S of a kernel gets the same choice; a kernel whose
    loop the model's ring could not be proved for has no count)."""
    out = {}
    for line in open(stages_file):
        words = line.split()
        if len(words) >= 2:
            out[(re.sub(r"_s\d+_", "_", words[0]), None)] = int(words[1])
    for line in open(launch_file):
        words = line.split()
        if len(words) == 3:
            out[(re.sub(r"_s\d+_", "_", words[0]), words[1])] = int(words[2])
    return out


def main():
    log, stages_file, launch_file = sys.argv[1:4]
    chosen = models(stages_file, launch_file)
    per_job = collections.defaultdict(list)
    print(f"{'kernel':<28} {'launch':<7} {'model S':>7} {'GB/s':>7} "
          f"{'untold S':>8} {'GB/s':>7} {'best S':>6} {'GB/s':>7} {'model/best':>10}")
    for (job, kernel, launch), by_s in sorted(sweep(log).items()):
        s = chosen.get((kernel, launch))
        untold = chosen.get((kernel, None))
        if s is None or s not in by_s or len(by_s) < 2:
            continue
        best = max(by_s, key=by_s.get)
        ratio = by_s[s] / by_s[best]
        per_job[job].append((ratio, by_s[untold] / by_s[best] if untold in by_s else None))
        untold_gbs = f"{by_s[untold]:7.0f}" if untold in by_s else f"{'-':>7}"
        print(f"{kernel:<28} {launch:<7} {s:>7} {by_s[s]:7.0f} {untold:>8} {untold_gbs} "
              f"{best:>6} {by_s[best]:7.0f} {ratio:10.3f}")
    for job, pairs in sorted(per_job.items()):
        for label, ratios in (("told the trips", [r for r, _ in pairs]),
                              ("told nothing", [u for _, u in pairs if u is not None])):
            if ratios:
                near = sum(r >= 0.98 for r in ratios)
                print(f"{job}, model {label}: {len(ratios)} kernel launches, worst "
                      f"{min(ratios):.3f}, {near} within 2% of the sweep's best")


if __name__ == "__main__":
    main()
