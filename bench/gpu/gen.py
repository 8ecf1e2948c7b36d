#!/usr/bin/env python3
"""Emit cpflow IR (.cpf) for the bandwidth kernels of bench/gpu.

Jobs and copy mechanisms (the table BODIES maps each pair to its emitter):

  job copy    y = x              job scale   y = a * x   (f32)
  job rowsum  y[r] = sum of row r of an nrows x (tpr * T/4) f32 matrix
  job stencil 5-point stencil over a zero-padded f32 grid (bulk_stencil,
              pipe_stencil)
  mech bulk   cp.async.bulk ring (sm_90): one elected thread issues the
              global->shared::cluster loads on mbarriers (arrive.expect_tx) and
              the shared->global bulk stores (bulk_group, wait_group.read
              before a slot is reused); `_wf` waits for the writes too.
  mech bulkws warp-specialised bulk ring (copy): a producer thread waits for
              free slots on @empty, a storer thread releases them.
  mech bulk1  one tile per CTA (grid = ntiles), same copies, no ring: the
              "let the block scheduler pipeline" variant.
  mech pipe   no ring at all (copy, scale, rowsum, stencil): the loop written
              single-buffered, each thread copying its 16 bytes of the tile
              with the abstract `copy` and `await`, between two
              `barrier.cta`; build.sh pipelines it with `cpflow opt --passes
              pipeline:S,...` (S from the name; the stencil's S = 1: compiled
              as written, not pipelined). Copy and scale store with
              `st` through a `noalias` %dst, apart from the `noalias` %src.
              The stencil copies R + 2 input rows per step of R output rows
              (`_r{R}`).
  mech cpa    cp.async ring (sm_80 style): every thread copies 16-byte chunks
              with cp.async.cg, one commit group per tile, wait_group N derived
              from a window of loop-carried groups, ordinary ld/st back out;
              `_nb` without the barrier before each refill.

Copy and scale rings loop with a grid stride: CTA c handles tiles c,
c + nctaid, c + 2*nctaid... (`_c`: a contiguous run of tiles), so they run
persistent (a few CTAs per SM), with a few tiles per CTA, or with one tile
per CTA (grid = ntiles). Parameters: (src, dst, ntiles[, a][, policy]);
rowsum (src, dst, nrows, tpr); stencil (src, dst, w, rb). With --hint the
bulk copies carry .L2::cache_hint and take the 64-bit cache policy as the
last parameter. The kernel assumes blockDim.x = threads (one-thread bulk copy
kernels: launch them with 32 threads).

Usage:
  gen.py --job copy --mech bulk --stages 4 --tile 8192 --lookahead 2 -o out.cpf
  gen.py --name            (prints the canonical name for a configuration)
  gen.py --all DIR         (writes the sweep set into DIR, prints the names)
"""
import argparse
import os
import sys

SMEM_LIMIT = 48 * 1024  # static shared memory per CTA (0xc000)
# pipe kernels: the pipeliner's rings past 48 KiB take dynamic shared memory
# (up to the H100's 227 KiB per CTA), which bandwidth.py asks for at launch
PIPE_SMEM_LIMIT = 227 * 1024
STENCIL_C0, STENCIL_C1 = 0.5, 0.125  # y = C0 * x + C1 * (sum of the 4 neighbours)


class Cfg:
    def __init__(self, job, mech, stages, tile, threads, lookahead=None, hint=False, nobar=False,
                 fullwait=False, chunk=False, emptybar=False, rows=None):
        self.hint = hint
        # pipe stencil: output rows per loop step (R + 2 input rows copied)
        self.rows = rows
        self.emptybar = emptybar
        self.chunk = chunk
        self.nobar = nobar
        self.fullwait = fullwait
        self.job = job
        self.mech = mech
        self.stages = stages
        self.tile = tile
        self.threads = threads
        if lookahead is None:
            lookahead = stages - 1 if mech == "cpa" or job != "copy" else max(1, stages // 2)
        self.lookahead = lookahead
        self.check()

    def check(self):
        S, T, L, N = self.stages, self.tile, self.lookahead, self.threads
        assert (self.job, self.mech) in BODIES
        assert not self.hint or self.mech in ("bulk", "bulk1")
        assert not self.nobar or self.mech == "cpa"
        assert not self.fullwait or (self.mech, self.job) == ("bulk", "copy")
        assert not self.emptybar or self.job in ("rowsum", "stencil")
        assert not self.chunk or (self.mech in ("bulk", "cpa") and self.job in ("copy", "scale"))
        if self.mech == "bulk1":
            assert S == 1
        elif self.mech == "pipe":
            if self.job == "stencil":
                # S = 1: compiled as written, without the pipeline pass
                assert S >= 1 and N == T // 16 + 2, "pipe stencil: a 16-byte chunk of a row and its halo per thread"
            else:
                assert S >= 2 and T % (16 * N) == 0, "pipe: each thread copies 16-byte multiples"
                assert T == 16 * N or self.job == "rowsum", "pipe copy/scale: 16 bytes per thread"
        else:
            assert S >= 2 and 1 <= L <= S - 1, (S, L)
        assert T % 16 == 0
        limit = PIPE_SMEM_LIMIT if self.mech == "pipe" else SMEM_LIMIT
        assert self.smem() <= limit, "ring does not fit the shared memory of a CTA"
        if self.mech == "cpa":
            assert T % (16 * N) == 0, "tile must be a multiple of 16 bytes per thread"
        if self.mech not in ("cpa", "pipe") and self.job in ("scale", "rowsum", "stencil"):
            assert T % (4 * N) == 0
        assert (self.rows is not None) == ((self.job, self.mech) == ("stencil", "pipe"))
        if self.job == "stencil" and self.mech != "pipe":
            assert S >= 3, "output row r needs input rows r, r+1, r+2 resident"
        if self.mech == "bulkws":
            assert N == 64
        elif self.mech not in ("cpa", "pipe") and self.job == "copy":
            assert N == 32

    def smem(self):
        if self.job == "stencil" and self.mech == "pipe":
            return self.stages * (self.rows + 2) * (self.tile + 32)
        if self.job == "stencil":
            return self.stages * (self.tile + 32) + 8 * self.stages
        if self.mech == "pipe":
            return self.stages * (self.tile + 8) + (4 * self.threads if self.job == "rowsum" else 0)
        return self.stages * self.tile + (8 * self.stages if self.mech != "cpa" else 0)

    @property
    def name(self):
        n = f"{self.mech}_{self.job}_s{self.stages}_t{self.tile // 1024}k"
        if self.mech == "bulk" and (self.job == "copy" or self.lookahead != self.stages - 1):
            n += f"_l{self.lookahead}"
        if self.job != "copy" or self.mech in ("cpa", "pipe"):
            n += f"_w{self.threads}"
        return n + ("_h" if self.hint else "") + ("_nb" if self.nobar else "") + ("_wf" if self.fullwait else "") + ("_c" if self.chunk else "") + ("_e" if self.emptybar else "") + (f"_r{self.rows}" if self.rows else "")

    def module(self):
        body = BODIES[(self.job, self.mech)](self)
        head = (f"// Generated by bench/gpu/gen.py: job={self.job} mech={self.mech} "
                f"stages={self.stages} tile={self.tile} lookahead={self.lookahead} "
                f"threads={self.threads} hint={int(self.hint)}\n")
        target = "module @stream target sm_90a ptx 8.0\n\n"
        return head + target + body


def params(c):
    if c.job == "rowsum":
        return "%src: ptr<global> align 16, %dst: ptr<global> align 16, %nrows: i32, %tpr: i32"
    na = " noalias" if c.mech == "pipe" else ""
    p = f"%src: ptr<global> align 16{na}, %dst: ptr<global> align 16{na}, %ntiles: i32"
    if c.job == "scale":
        p += ", %a: f32"
    if c.hint:
        p += ", %policy: i64"
    return p


def hint(c):
    """(.L2::cache_hint qualifier, policy operand) for the bulk copies."""
    return (".L2::cache_hint", ", %policy") if c.hint else ("", "")


def my_count(out, c):
    """Number of tiles of this CTA. Grid stride: ceil((ntiles - cta) / ncta)
    (0 if cta >= ntiles). Chunked (`_c`): the CTA's tiles are the contiguous
    run [cta * tpc, min(cta * tpc + tpc, ntiles)), tpc = ceil(ntiles / ncta)."""
    out += [
        "  %cta = sreg ctaid.x",
        "  %ncta = sreg nctaid.x",
        "  %ncta1 = sub %ncta, 1 : i32",
    ]
    if c.chunk:
        out += [
            "  %tpc0 = add %ntiles, %ncta1 : i32",
            "  %tpc = div.u %tpc0, %ncta : i32",
            "  %first = mul %cta, %tpc : i32",
            "  %has = cmp.slt %first, %ntiles : i32",
            "  %left = sub %ntiles, %first : i32",
            "  %short = cmp.ult %left, %tpc : i32",
            "  %cnt0 = select %short, %left, %tpc : i32",
            "  %cnt = select %has, %cnt0, 0 : i32",
        ]
    else:
        out += [
            "  %rest = sub %ntiles, %cta : i32",
            "  %rest1 = add %rest, %ncta1 : i32",
            "  %has = cmp.slt %cta, %ntiles : i32",
            "  %cnt0 = div.u %rest1, %ncta : i32",
            "  %cnt = select %has, %cnt0, 0 : i32",
        ]


def tile_src(out, c, ind, i, name, base, T):
    """%name = base + k * T (global, i64 arithmetic) for the CTA's tile i:
    k = cta + i * ncta (grid stride) or first + i (chunked)."""
    if c.chunk:
        out.append(f"{ind}%{name}_k = add %first, %{i} : i32")
    else:
        out += [
            f"{ind}%{name}_k0 = mul %{i}, %ncta : i32",
            f"{ind}%{name}_k = add %{name}_k0, %cta : i32",
        ]
    out += [
        f"{ind}%{name}_k64 = zext %{name}_k : i32 to i64",
        f"{ind}%{name}_off = mul %{name}_k64, {T} : i64",
        f"{ind}%{name} = ptr.add %{base}, %{name}_off",
    ]


def wait_tile(out, ind, c, i):
    """Wait for the CTA's tile %i on full[i % S] (phase i / S); %s, %r and
    %slot (its shared-memory slot) are defined after."""
    S, T = c.stages, c.tile
    out += [
        f"{ind}%s = rem.u %{i}, {S} : i32",
        f"{ind}%r = div.u %{i}, {S} : i32",
        f"{ind}%bar = addr @full[%s]",
        f"{ind}%ready = mbarrier.phase %bar, %r",
        f"{ind}mbarrier.wait %ready",
        f"{ind}%so = mul %s, {T} : i32",
        f"{ind}%slot = ptr.add %ring, %so",
    ]


def store_tile(out, ind, c):
    """Bulk-store slot %slot to the CTA's tile %i of dst and commit it (%g)."""
    T = c.tile
    q, pol = hint(c)
    tile_src(out, c, ind, "i", "d", "dst", T)
    out += [
        f"{ind}%st = cp.async.bulk.global.shared::cta.bulk_group{q} %d, %slot, {T}{pol}",
        f"{ind}%g = cp.async.bulk.commit_group %st",
    ]


def arm_slot(out, ind, c, j, tag, nbytes):
    """tid 0, before loading the CTA's j-th tile (nbytes) into ring slot
    j % S: arrive.expect_tx on full[j % S] phase j / S (%TAG_ph), and the
    slot's address (%TAG_slot)."""
    S = c.stages
    out += [
        f"{ind}%{tag}_s = rem.u %{j}, {S} : i32",
        f"{ind}%{tag}_r = div.u %{j}, {S} : i32",
        f"{ind}%{tag}_bar = addr @full[%{tag}_s]",
        f"{ind}%{tag}_ph = mbarrier.phase %{tag}_bar, %{tag}_r",
        f"{ind}mbarrier.arrive.expect_tx.release.cta %{tag}_ph, {nbytes}",
        f"{ind}%{tag}_so = mul %{tag}_s, {nbytes} : i32",
        f"{ind}%{tag}_slot = ptr.add %ring, %{tag}_so",
    ]


def issue_load(out, ind, c, j, tag):
    """tid 0: arrive.expect_tx on full[j % S] phase j / S and bulk-load tile j."""
    T = c.tile
    arm_slot(out, ind, c, j, tag, T)
    tile_src(out, c, ind, j, f"{tag}_g", "src", T)
    q, pol = hint(c)
    out.append(f"{ind}%{tag}_t = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes{q} "
               f"%{tag}_slot, %{tag}_g, {T}, %{tag}_ph{pol}")


def ring_decl(out, c):
    S, T = c.stages, c.tile
    out += [
        f"  shared @ring: bytes[{S * T}] align 128",
        f"  shared @full: mbarrier[{S}]",
        "  %tid = sreg tid.x",
        "  %ring = addr @ring",
        "  %leader = cmp.eq %tid, 0 : i32",
    ]


def init_bars(out, c):
    """tid 0 initialises full[S] (one arrival each) and, for `_e`, empty[S]
    (one arrival per thread); then a CTA barrier."""
    out += [
        "  if %leader {",
        f"    for %b = 0 to {c.stages} step 1 {{",
        "      %fb = addr @full[%b]",
        "      mbarrier.init %fb, 1",
    ]
    if c.emptybar:
        out += [
            "      %eb = addr @empty[%b]",
            f"      mbarrier.init %eb, {c.threads}",
        ]
    out += [
        "    }",
        "    fence.mbarrier_init.release.cluster",
        "  }",
        "  barrier.cta",
    ]


def release_slot(out, c, s, r):
    """Every thread is done reading slot s (holding phase r of full[s]):
    `barrier.cta`, or for `_e` each thread arrives on phase r of empty[s]
    and tid 0 (below, before the refill) waits for that phase. Returns the
    line tid 0 runs before refilling the slot ("" for the barrier)."""
    if not c.emptybar:
        out.append("    barrier.cta")
        return ""
    out += [
        f"    %fe = addr @empty[%{s}]",
        f"    %fph = mbarrier.phase %fe, %{r}",
        "    mbarrier.arrive.release.cta %fph",
    ]
    return "        mbarrier.wait %fph"


def prologue(out, c):
    """tid 0 issues tiles 0 .. L-1 (those that exist)."""
    out += [
        "  if %leader {",
        f"    for %pj = 0 to {c.lookahead} step 1 {{",
        "      %pin = cmp.ult %pj, %cnt : i32",
        "      if %pin {",
    ]
    issue_load(out, "        ", c, "pj", "p")
    out += ["      }", "    }", "  }"]


def bulk_copy(c):
    """One thread per CTA does everything: loads run L tiles ahead; a slot is
    reloaded once the bulk store that read it has finished reading (S - L
    stores may be pending when the load is issued)."""
    S, T, L = c.stages, c.tile, c.lookahead
    out = [f"kernel @{c.name}({params(c)}) {{"]
    ring_decl(out, c)
    my_count(out, c)
    init_bars(out, c)
    prologue(out, c)
    out += [
        "  if %leader {",
        "    for %i = 0 to %cnt step 1 {",
    ]
    wait_tile(out, "      ", c, "i")
    store_tile(out, "      ", c)
    out += [
        f"      %j = add %i, {L} : i32",
        "      %more = cmp.ult %j, %cnt : i32",
        "      if %more {",
        # Slot j % S last held tile j - S; the stores committed after its
        # store are those of tiles j-S+1 .. i, S - L of them: wait_group.read
        # S-L leaves exactly those pending (`_wf`: wait for the writes too,
        # which bounds the stores in flight to S - L).
        f"        cp.async.bulk.wait_group{'' if c.fullwait else '.read'} {S - L}",
    ]
    issue_load(out, "        ", c, "j", "n")
    out += [
        "      }",
        "    }",
        "    cp.async.bulk.wait_group 0",
        "  }",
        "}",
    ]
    return "\n".join(out) + "\n"


def bulk_scale(c):
    """All threads: wait for tile i, scale it in place with ordinary ld/st,
    fence.proxy.async + barrier, then tid 0 bulk-stores it. tid 0 issues tile
    i + L after the store of tile i + L - S has finished reading its slot."""
    S, T, L, N = c.stages, c.tile, c.lookahead, c.threads
    per = T // (4 * N)
    out = [f"kernel @{c.name}({params(c)}) {{"]
    ring_decl(out, c)
    my_count(out, c)
    out += ["  %col = mul %tid, 4 : i32"]
    init_bars(out, c)
    prologue(out, c)
    out += [
        "  for %i = 0 to %cnt step 1 {",
    ]
    wait_tile(out, "    ", c, "i")
    out.append("    %mine = ptr.add %slot, %col")
    for e in range(per):
        o = e * 4 * N
        out += [
            f"    %p{e} = ptr.add %mine, {o}",
            f"    %x{e} = ld %p{e} : f32",
        ]
    for e in range(per):
        out += [
            f"    %y{e} = fmul %x{e}, %a : f32",
            f"    st %p{e}, %y{e} : f32",
        ]
    out += [
        "    fence.proxy.async.shared::cta",
        "    barrier.cta",
        "    if %leader {",
    ]
    store_tile(out, "      ", c)
    out += [
        f"      %j = add %i, {L} : i32",
        "      %more = cmp.ult %j, %cnt : i32",
        "      if %more {",
        f"        cp.async.bulk.wait_group.read {S - L}",
    ]
    issue_load(out, "        ", c, "j", "n")
    out += [
        "      }",
        "    }",
        "  }",
        "  if %leader {",
        "    cp.async.bulk.wait_group 0",
        "  }",
        "}",
    ]
    return "\n".join(out) + "\n"


def single_tile(c):
    """One tile per CTA (grid = ntiles, no loop): tid 0 loads tile ctaid on the
    one mbarrier; every thread waits on phase 0; scale multiplies in place
    (fence.proxy.async + barrier before the store); tid 0 bulk-stores it and
    waits for the store to complete (`wait_group 0`: the verifier rejects a
    kernel that exits with bulk writes in flight, E1015) before the CTA exits."""
    T, N = c.tile, c.threads
    q, pol = hint(c)
    out = [f"kernel @{c.name}({params(c)}) {{",
           f"  shared @buf: bytes[{T}] align 128",
           "  shared @full: mbarrier[1]",
           "  %tid = sreg tid.x",
           "  %cta = sreg ctaid.x",
           "  %buf = addr @buf",
           "  %bar = addr @full[0]",
           "  %leader = cmp.eq %tid, 0 : i32",
           "  %live = cmp.ult %cta, %ntiles : i32",
           "  if %leader {",
           "    mbarrier.init %bar, 1",
           "    fence.mbarrier_init.release.cluster",
           "  }",
           "  barrier.cta",
           "  %ph = mbarrier.phase %bar, 0",
           "  %cta64 = zext %cta : i32 to i64",
           f"  %off = mul %cta64, {T} : i64",
           "  %g = ptr.add %src, %off",
           "  %d = ptr.add %dst, %off",
           "  if %live {",
           "    if %leader {",
           f"      mbarrier.arrive.expect_tx.release.cta %ph, {T}",
           f"      %t = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes{q} %buf, %g, {T}, %ph{pol}",
           "    }"]
    if c.job == "scale":
        per = T // (4 * N)
        out += ["    mbarrier.wait %ph",
                "    %col = mul %tid, 4 : i32",
                "    %mine = ptr.add %buf, %col"]
        for e in range(per):
            out += [f"    %p{e} = ptr.add %mine, {e * 4 * N}", f"    %x{e} = ld %p{e} : f32"]
        for e in range(per):
            out += [f"    %y{e} = fmul %x{e}, %a : f32", f"    st %p{e}, %y{e} : f32"]
        out += ["    fence.proxy.async.shared::cta",
                "    barrier.cta",
                "    if %leader {"]
    else:
        out += ["    if %leader {",
                "      mbarrier.wait %ph"]
    out += [f"      %st = cp.async.bulk.global.shared::cta.bulk_group{q} %d, %buf, {T}{pol}",
            "      %sg = cp.async.bulk.commit_group %st",
            "      cp.async.bulk.wait_group %sg",
            "    }",
            "  }",
            "}"]
    return "\n".join(out) + "\n"


def cpa_kernel(c):
    """cp.async ring: each thread copies its own 16-byte chunks of every tile
    (chunk e of thread t at byte 16*(t + e*threads)), one commit group per
    tile, tiles issued L = S-1 ahead, zero-filled (src_size 0) past the end so
    that every iteration commits one group; the window of pending groups is
    carried through the loop so wait_group N is derived. Each thread reads
    back only the bytes it copied itself; a CTA barrier before each refill
    orders the slot's reads before its overwrite unless `nobar` (`_nb`)."""
    S, T, L, N = c.stages, c.tile, c.lookahead, c.threads
    per = T // (16 * N)
    out = [f"kernel @{c.name}({params(c)}) {{"]
    out += [
        f"  shared @ring: bytes[{S * T}] align 128",
        "  %tid = sreg tid.x",
        "  %ring = addr @ring",
    ]
    my_count(out, c)
    out += [
        "  %col = mul %tid, 16 : i32",
        "  %col64 = zext %col : i32 to i64",
        "  %srct = ptr.add %src, %col64",
        "  %dstt = ptr.add %dst, %col64",
        "  %mine = ptr.add %ring, %col",
    ]

    def issue(ind, j, tag):
        out.extend([
            f"{ind}%{tag}_s = rem.u %{j}, {S} : i32",
            f"{ind}%{tag}_so = mul %{tag}_s, {T} : i32",
            f"{ind}%{tag}_slot = ptr.add %mine, %{tag}_so",
            f"{ind}%{tag}_in = cmp.ult %{j}, %cnt : i32",
            f"{ind}%{tag}_n = select %{tag}_in, 16, 0 : i32",
            # Out-of-range tiles read nothing (src_size 0); clamp the index
            # anyway so the address stays inside the buffer.
            f"{ind}%{tag}_jc = select %{tag}_in, %{j}, 0 : i32",
        ])
        tile_src(out, c, ind, f"{tag}_jc", f"{tag}_g", "srct", T)
        toks = []
        for e in range(per):
            o = e * 16 * N
            out.extend([
                f"{ind}%{tag}_d{e} = ptr.add %{tag}_slot, {o}",
                f"{ind}%{tag}_a{e} = ptr.add %{tag}_g, {o}",
                f"{ind}%{tag}_t{e} = cp.async.cg.shared.global %{tag}_d{e}, %{tag}_a{e}, 16, %{tag}_n",
            ])
            toks.append(f"%{tag}_t{e}")
        out.append(f"{ind}%{tag}_grp = cp.async.commit_group {', '.join(toks)}")
        return f"%{tag}_grp"

    groups = []
    for j in range(L):
        out.append(f"  %pj{j} = const {j} : i32")
        groups.append(issue("  ", f"pj{j}", f"p{j}"))
    win = ", ".join(f"%w{q} = {g}" for q, g in enumerate(groups))
    res = ", ".join(f"%h{q}" for q in range(L))
    out.append(f"  {res} = for %i = 0 to %cnt step 1 iter({win}) {{")
    out.append(f"    %j = add %i, {L} : i32")
    # Slot (i+L) % S held tile i+L-S, read back in an earlier iteration by
    # this thread only (each thread reads back the chunks it copied). The
    # barrier variant orders every thread's reads before any refill; `_nb`
    # leaves it out, so warps run apart as in a load-to-register kernel.
    if not c.nobar:
        out.append("    barrier.cta")
    g = issue("    ", "j", "n")
    out += [
        "    cp.async.wait_group %w0",
        f"    %s = rem.u %i, {S} : i32",
        f"    %so = mul %s, {T} : i32",
        "    %slot = ptr.add %mine, %so",
    ]
    tile_src(out, c, "    ", "i", "d", "dstt", T)
    for e in range(per):
        o = e * 16 * N
        for h in (0, 8):
            v = f"{e}_{h}"
            if c.job == "copy":
                out += [
                    f"    %q{v} = ptr.add %slot, {o + h}",
                    f"    %x{v} = ld %q{v} : i64",
                    f"    %o{v} = ptr.add %d, {o + h}",
                    f"    st %o{v}, %x{v} : i64",
                ]
            else:
                for f4 in (0, 4):
                    v2 = f"{v}_{f4}"
                    out += [
                        f"    %q{v2} = ptr.add %slot, {o + h + f4}",
                        f"    %x{v2} = ld %q{v2} : f32",
                        f"    %y{v2} = fmul %x{v2}, %a : f32",
                        f"    %o{v2} = ptr.add %d, {o + h + f4}",
                        f"    st %o{v2}, %y{v2} : f32",
                    ]
    nxt = ", ".join([f"%w{q}" for q in range(1, L)] + [g])
    out += [
        f"    yield {nxt}",
        "  }",
        "  cp.async.wait_all",
        "}",
    ]
    return "\n".join(out) + "\n"


def bulkws_copy(c):
    """Warp-specialised ring (two warps): tid 0 produces (waits until a slot
    is free on @empty, arrive.expect_tx + bulk load on @full), tid 32 stores
    (waits on @full, bulk store, `wait_group.read 0`, arrives on @empty).
    The producer waits only for free slots, never on a load or a store, so
    S loads are in flight whenever the stores keep up."""
    S, T = c.stages, c.tile
    out = [f"kernel @{c.name}({params(c)}) {{"]
    ring_decl(out, c)
    out += [f"  shared @empty: mbarrier[{S}]"]
    my_count(out, c)
    out += [
        "  if %leader {",
        f"    for %b = 0 to {S} step 1 {{",
        "      %fb = addr @full[%b]",
        "      mbarrier.init %fb, 1",
        "      %eb = addr @empty[%b]",
        "      mbarrier.init %eb, 1",
        "    }",
        "    fence.mbarrier_init.release.cluster",
        "  }",
        "  barrier.cta",
        "  if %leader {",
        "    for %j = 0 to %cnt step 1 {",
        f"      %e_s = rem.u %j, {S} : i32",
        f"      %e_r = div.u %j, {S} : i32",
        # Phase r-1 of empty[s]: the store of tile j - S has read the slot
        # (phase -1 counts as complete: the first pass waits for nothing).
        "      %e_r1 = sub %e_r, 1 : i32",
        "      %e_bar = addr @empty[%e_s]",
        "      %e_ph = mbarrier.phase %e_bar, %e_r1",
        "      mbarrier.wait %e_ph",
    ]
    issue_load(out, "      ", c, "j", "n")
    out += [
        "    }",
        "  }",
        "  %storer = cmp.eq %tid, 32 : i32",
        "  if %storer {",
        "    for %i = 0 to %cnt step 1 {",
    ]
    wait_tile(out, "      ", c, "i")
    store_tile(out, "      ", c)
    out += [
        "      cp.async.bulk.wait_group.read 0",
        "      %fr = addr @empty[%s]",
        "      %free = mbarrier.phase %fr, %r",
        "      mbarrier.arrive.release.cta %free",
        "    }",
        "    cp.async.bulk.wait_group 0",
        "  }",
        "}",
    ]
    return "\n".join(out) + "\n"


# %myrows: the rows of CTA %cta of %ncta under the grid stride,
# ceil((nrows - cta) / ncta), 0 when cta >= nrows.
MY_ROWS = [
    "  %rest = sub %nrows, %cta : i32",
    "  %ncta1 = sub %ncta, 1 : i32",
    "  %rest1 = add %rest, %ncta1 : i32",
    "  %has = cmp.slt %cta, %nrows : i32",
    "  %myrows0 = div.u %rest1, %ncta : i32",
    "  %myrows = select %has, %myrows0, 0 : i32",
]


def store_row_sum(out, ind, N, row, row_lines):
    """tid 0, after `barrier.cta`: adds the N threads' sums in @part and
    stores the total at %dst[row] (`row_lines` compute `row` first). Eight
    running sums over eight words a step keep eight loads in flight (one
    sum would make each load wait for the add before it)."""
    lanes = range(8)
    out += [
        f"{ind}%s0_, %s1_, %s2_, %s3_, %s4_, %s5_, %s6_, %s7_ = for %q = 0 to {N // 8} step 1 iter("
        + ", ".join(f"%sb{e} = %zero" for e in lanes) + ") {",
        f"{ind}  %qo = mul %q, 32 : i32",
        f"{ind}  %qp = ptr.add %part, %qo",
    ]
    for e in lanes:
        out += [
            f"{ind}  %qp{e} = ptr.add %qp, {4 * e}",
            f"{ind}  %y{e} = ld %qp{e} : f32",
            f"{ind}  %sc{e} = fadd %sb{e}, %y{e} : f32",
        ]
    out += [
        f"{ind}  yield " + ", ".join(f"%sc{e}" for e in lanes),
        f"{ind}}}",
        f"{ind}%h0 = fadd %s0_, %s1_ : f32",
        f"{ind}%h1 = fadd %s2_, %s3_ : f32",
        f"{ind}%h2 = fadd %s4_, %s5_ : f32",
        f"{ind}%h3 = fadd %s6_, %s7_ : f32",
        f"{ind}%h4 = fadd %h0, %h1 : f32",
        f"{ind}%h5 = fadd %h2, %h3 : f32",
        f"{ind}%tot = fadd %h4, %h5 : f32",
    ] + [ind + l for l in row_lines] + [
        f"{ind}%orow4 = mul {row}, 4 : i32",
        f"{ind}%orow64 = zext %orow4 : i32 to i64",
        f"{ind}%op = ptr.add %dst, %orow64",
        f"{ind}st %op, %tot : f32",
    ]


def bulk_rowsum(c):
    """Row sums of an nrows x (tpr * T/4) f32 matrix: CTA c takes rows c,
    c + nctaid, ...; its tiles (tpr per row) stream through a ring of S slots
    as one sequence across rows. Every thread waits for tile k and adds its
    T/(4N) words to a register sum; after `barrier.cta` tid 0 refills the
    slot with tile k + S. At a row's end the threads' sums meet in @part,
    and tid 0 adds them and stores the row's sum."""
    S, T, N = c.stages, c.tile, c.threads
    per = T // (4 * N)
    out = [f"kernel @{c.name}({params(c)}) {{"]
    ring_decl(out, c)
    if c.emptybar:
        out.append(f"  shared @empty: mbarrier[{S}]")
    out += [
        f"  shared @part: bytes[{4 * N}] align 16",
        "  %part = addr @part",
        "  %cta = sreg ctaid.x",
        "  %ncta = sreg nctaid.x",
    ] + MY_ROWS + [
        "  %cnt = mul %myrows, %tpr : i32",
        "  %col = mul %tid, 4 : i32",
        "  %mypart = ptr.add %part, %col",
        f"  %rowbytes = mul %tpr, {T} : i32",
        "  %rowbytes64 = zext %rowbytes : i32 to i64",
    ]
    init_bars(out, c)

    def load(ind, j, tag):
        """tid 0: arrive.expect_tx on full[j % S] phase j / S and load tile
        j of this CTA (row cta + (j / tpr) * ncta, column tile j % tpr)."""
        arm_slot(out, ind, c, j, tag, T)
        out.extend([
            f"{ind}%{tag}_lr = div.u %{j}, %tpr : i32",
            f"{ind}%{tag}_ct = rem.u %{j}, %tpr : i32",
            f"{ind}%{tag}_row0 = mul %{tag}_lr, %ncta : i32",
            f"{ind}%{tag}_row = add %{tag}_row0, %cta : i32",
            f"{ind}%{tag}_row64 = zext %{tag}_row : i32 to i64",
            f"{ind}%{tag}_ro = mul %{tag}_row64, %rowbytes64 : i64",
            f"{ind}%{tag}_co = mul %{tag}_ct, {T} : i32",
            f"{ind}%{tag}_co64 = zext %{tag}_co : i32 to i64",
            f"{ind}%{tag}_off = add %{tag}_ro, %{tag}_co64 : i64",
            f"{ind}%{tag}_g = ptr.add %src, %{tag}_off",
            f"{ind}%{tag}_t = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
            f"%{tag}_slot, %{tag}_g, {T}, %{tag}_ph",
        ])

    out += [
        "  if %leader {",
        f"    for %pj = 0 to {S} step 1 {{",
        "      %pin = cmp.ult %pj, %cnt : i32",
        "      if %pin {",
    ]
    load("        ", "pj", "p")
    out += [
        "      }",
        "    }",
        "  }",
        "  %zero = const 0.0 : f32",
        "  %tpr1 = sub %tpr, 1 : i32",
        "  %acc = for %k = 0 to %cnt step 1 iter(%a = %zero) {",
    ]
    wait_tile(out, "    ", c, "k")
    out.append("    %mine = ptr.add %slot, %col")
    prev = "%a"
    for e in range(per):
        out += [
            f"    %p{e} = ptr.add %mine, {e * 4 * N}",
            f"    %x{e} = ld %p{e} : f32",
        ]
    for e in range(per):
        out.append(f"    %a{e} = fadd {prev}, %x{e} : f32")
        prev = f"%a{e}"
    # Every thread has read slot s: tid 0 refills it with tile k + S.
    before = release_slot(out, c, "s", "r")
    out += [
        "    if %leader {",
        f"      %j = add %k, {S} : i32",
        "      %more = cmp.ult %j, %cnt : i32",
        "      if %more {",
    ] + ([before] if before else [])
    load("        ", "j", "n")
    out += [
        "      }",
        "    }",
        # The row's last tile: the threads' sums meet in @part.
        "    %t = rem.u %k, %tpr : i32",
        "    %last = cmp.eq %t, %tpr1 : i32",
        "    if %last {",
        f"      st %mypart, {prev} : f32",
        "      barrier.cta",
        "      if %leader {",
    ]
    store_row_sum(out, "        ", N, "%orow", [
        "%lr = div.u %k, %tpr : i32",
        "%orow0 = mul %lr, %ncta : i32",
        "%orow = add %orow0, %cta : i32",
    ])
    out += [
        "      }",
        # tid 0's reads of @part come before the next row's writes to it.
        "      barrier.cta",
        "    }",
        f"    %next = select %last, %zero, {prev} : f32",
        "    yield %next",
        "  }",
        "}",
    ]
    return "\n".join(out) + "\n"


def stencil_strip(T):
    """The stencil's CTA c: its column strip %sx = c % (w / (T/4)) (first
    byte %colb of a padded row), its first output row %row0 = (c / (w /
    (T/4))) * rb, and the padded row pitch %pitchb64 = (w + 8) * 4 bytes,
    a multiple of 16 (w % 4 == 0)."""
    return ["  %cta = sreg ctaid.x",
            f"  %nstrips = div.u %w, {T // 4} : i32",
            "  %sx = rem.u %cta, %nstrips : i32",
            "  %ub = div.u %cta, %nstrips : i32",
            "  %row0 = mul %ub, %rb : i32",
            "  %wq = div.u %w, 4 : i32",
            "  %pitchq = add %wq, 2 : i32",
            "  %pitchb = mul %pitchq, 16 : i32",
            "  %pitchb64 = zext %pitchb : i32 to i64",
            f"  %colb = mul %sx, {T} : i32"]


def bulk_stencil(c):
    """5-point stencil y = C0 * x + C1 * (4 neighbours) over a zero-padded
    input (1 row above and below, 4 columns left and right; row pitch w + 8
    floats, w a multiple of T/4). CTA c computes output rows [u * rb, u * rb + rb) of the column
    strip s (T bytes wide), u = c / (w / (T/4)), s = c % (w / (T/4)): the
    rb + 2 input rows it needs (T + 32 bytes each, halo included) stream
    through a ring of S slots. Output row r needs input rows r, r+1, r+2:
    every thread waits on their phases (waiting again on a completed phase
    returns at once), computes T/(4N) outputs from shared memory and stores
    them; after `barrier.cta` tid 0 refills row r's slot with row r + S."""
    S, T, N = c.stages, c.tile, c.threads
    W = T // 4
    slot = T + 32
    per = W // N
    out = [f"kernel @{c.name}(%src: ptr<global> align 16, %dst: ptr<global> align 16, %w: i32, %rb: i32) {{",
           f"  shared @ring: bytes[{S * slot}] align 128",
           f"  shared @full: mbarrier[{S}]"] + ([f"  shared @empty: mbarrier[{S}]"] if c.emptybar else []) + [
           "  %tid = sreg tid.x",
           "  %ring = addr @ring",
           "  %leader = cmp.eq %tid, 0 : i32"] + stencil_strip(T) + [
           "  %colb64 = zext %colb : i32 to i64",
           "  %nrows = add %rb, 2 : i32",
           f"  %c0 = const {STENCIL_C0} : f32",
           f"  %c1 = const {STENCIL_C1} : f32"]
    init_bars(out, c)

    def load(ind, j, tag):
        """tid 0: input row row0 + j of the strip into slot j % S (phase j / S)."""
        arm_slot(out, ind, c, j, tag, slot)
        out.extend([
            f"{ind}%{tag}_row = add %row0, %{j} : i32",
            f"{ind}%{tag}_row64 = zext %{tag}_row : i32 to i64",
            f"{ind}%{tag}_ro = mul %{tag}_row64, %pitchb64 : i64",
            f"{ind}%{tag}_off = add %{tag}_ro, %colb64 : i64",
            f"{ind}%{tag}_g = ptr.add %src, %{tag}_off",
            f"{ind}%{tag}_t = cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
            f"%{tag}_slot, %{tag}_g, {slot}, %{tag}_ph",
        ])

    out += ["  if %leader {",
            f"    for %pj = 0 to {S} step 1 {{",
            "      %pin = cmp.ult %pj, %nrows : i32",
            "      if %pin {"]
    load("        ", "pj", "p")
    out += ["      }",
            "    }",
            "  }",
            "  %col = mul %tid, 4 : i32",
            "  %w4 = mul %w, 4 : i32",
            "  %w464 = zext %w4 : i32 to i64",
            "  %ocol = add %colb, %col : i32",
            "  %ocol64 = zext %ocol : i32 to i64",
            "  %dcol = ptr.add %dst, %ocol64",
            "  for %r = 0 to %rb step 1 {"]
    for k, nm in enumerate(("up", "mid", "dn")):
        out += [f"    %{nm}_j = add %r, {k} : i32",
                f"    %{nm}_s = rem.u %{nm}_j, {S} : i32",
                f"    %{nm}_q = div.u %{nm}_j, {S} : i32",
                f"    %{nm}_bar = addr @full[%{nm}_s]",
                f"    %{nm}_ph = mbarrier.phase %{nm}_bar, %{nm}_q",
                f"    mbarrier.wait %{nm}_ph",
                f"    %{nm}_so = mul %{nm}_s, {slot} : i32",
                f"    %{nm}_slot = ptr.add %ring, %{nm}_so",
                f"    %{nm} = ptr.add %{nm}_slot, %col"]
    out += ["    %orow = add %row0, %r : i32",
            "    %orow64 = zext %orow : i32 to i64",
            "    %oro = mul %orow64, %w464 : i64",
            "    %drow = ptr.add %dcol, %oro"]
    for e in range(per):
        o = e * 4 * N + 16  # column 4 of the padded row is output column 0
        out += [f"    %pm{e} = ptr.add %mid, {o}",
                f"    %m{e} = ld %pm{e} : f32",
                f"    %pl{e} = ptr.add %mid, {o - 4}",
                f"    %l{e} = ld %pl{e} : f32",
                f"    %pr{e} = ptr.add %mid, {o + 4}",
                f"    %rr{e} = ld %pr{e} : f32",
                f"    %pu{e} = ptr.add %up, {o}",
                f"    %u{e} = ld %pu{e} : f32",
                f"    %pd{e} = ptr.add %dn, {o}",
                f"    %d{e} = ld %pd{e} : f32",
                f"    %s1_{e} = fadd %u{e}, %d{e} : f32",
                f"    %s2_{e} = fadd %l{e}, %rr{e} : f32",
                f"    %s3_{e} = fadd %s1_{e}, %s2_{e} : f32",
                f"    %t1_{e} = fmul %s3_{e}, %c1 : f32",
                f"    %t0_{e} = fmul %m{e}, %c0 : f32",
                f"    %y{e} = fadd %t0_{e}, %t1_{e} : f32",
                f"    %po{e} = ptr.add %drow, {e * 4 * N}",
                f"    st %po{e}, %y{e} : f32"]
    before = release_slot(out, c, "up_s", "up_q")
    out += ["    if %leader {",
            f"      %k = add %r, {S} : i32",
            "      %more = cmp.ult %k, %nrows : i32",
            "      if %more {"] + ([before] if before else [])
    load("        ", "k", "n")
    out += ["      }",
            "    }",
            "  }",
            "}"]
    return "\n".join(out) + "\n"


def pipe_stream(c):
    """Copy or scale written the plain way for the pipeliner: CTA c takes
    tiles c, c + nctaid, ...; for each, the threads copy the tile into the
    one @tile (each its 16 bytes), await it, `barrier.cta`, load their
    T/(4N) words, scale them (scale), store them to %dst with `st`,
    `barrier.cta`. %src and %dst are `noalias`, which lets the pipeliner
    issue later tiles' copies ahead of the stores."""
    T, N = c.tile, c.threads
    per = T // (4 * N)
    out = [
        f"kernel @{c.name}({params(c)}) block({N}) {{",
        f"  shared @tile: bytes[{T}] align 128",
        "  %tid = sreg tid.x",
    ]
    my_count(out, c)
    out += [
        "  %tile = addr @tile",
        "  %off = mul %tid, 16 : i32",
        "  %off64 = zext %off : i32 to i64",
        "  %mine_t = ptr.add %tile, %off",
        "  %src_t = ptr.add %src, %off64",
        "  %col = mul %tid, 4 : i32",
        "  %col64 = zext %col : i32 to i64",
        "  %p = ptr.add %tile, %col",
        "  for %i = 0 to %cnt step 1 {",
        "    %i0 = mul %i, %ncta : i32",
        "    %t = add %i0, %cta : i32",
        "    %t64 = zext %t : i32 to i64",
        f"    %t_off = mul %t64, {T} : i64",
        "    %src_k = ptr.add %src_t, %t_off",
        "    %tk = copy %mine_t, %src_k, 16",
        "    await %tk",
        "    barrier.cta",
        "    %dst_k = ptr.add %dst, %t_off",
        "    %q = ptr.add %dst_k, %col64",
    ]
    for e in range(per):
        o = e * 4 * N
        out += [
            f"    %p{e} = ptr.add %p, {o}",
            f"    %x{e} = ld %p{e} : f32",
        ]
        y = f"%x{e}"
        if c.job == "scale":
            out.append(f"    %y{e} = fmul %x{e}, %a : f32")
            y = f"%y{e}"
        out += [
            f"    %q{e} = ptr.add %q, {o}",
            f"    st %q{e}, {y} : f32",
        ]
    out += [
        "    barrier.cta",
        "  }",
        "}",
    ]
    return "\n".join(out) + "\n"


def pipe_stencil(c):
    """The 5-point stencil written the plain way for the pipeliner, over the
    zero-padded input of bulk_stencil (row pitch w + 8 floats). CTA c owns
    output rows [u * rb, u * rb + rb) of the column strip s (T/4 outputs),
    u and s as in bulk_stencil. A tile row is the strip's T bytes with
    their halo, T + 32 bytes: one 16-byte chunk per thread, so the block
    has T/16 + 2 threads. Each step of the CTA's loop computes R output
    rows: the threads copy the R + 2 input rows they need (rows past the
    CTA's last are clamped to it) into the one @tile, await them,
    `barrier.cta`; threads t < T/16 compute the four adjacent output
    columns 4t .. 4t + 3 of every row from the tile and store them with
    `st`; `barrier.cta`. A thread's four loads and four stores are 16
    contiguous bytes at 16-byte-aligned addresses (the output pitch is
    (w / 4) * 16 bytes), which LLVM merges into one 16-byte access each.
    %src and %dst are `noalias`."""
    T, N, R = c.tile, c.threads, c.rows
    K = T // 16  # the threads that compute, 4 output columns each
    row = T + 32
    out = [f"kernel @{c.name}(%src: ptr<global> align 16 noalias, %dst: ptr<global> align 16 noalias, "
           f"%w: i32, %rb: i32) block({N}) {{",
           f"  shared @tile: bytes[{(R + 2) * row}] align 128",
           "  %tid = sreg tid.x"] + stencil_strip(T) + [
           # copy: thread t's chunk, bytes [16t, 16t + 16) of a tile row
           "  %col = mul %tid, 16 : i32",
           "  %gcol = add %colb, %col : i32",
           "  %gcol64 = zext %gcol : i32 to i64",
           "  %src_c = ptr.add %src, %gcol64",
           "  %tile = addr @tile",
           "  %mine = ptr.add %tile, %col",
           # compute: thread t's output columns 4t .. 4t + 3 are bytes
           # 16 + 16t .. 16 + 16t + 15 of a tile row
           "  %ccol = mul %tid, 16 : i32",
           "  %ctile = ptr.add %tile, %ccol",
           "  %ocol = add %colb, %ccol : i32",
           "  %ocol64 = zext %ocol : i32 to i64",
           "  %dcol = ptr.add %dst, %ocol64",
           "  %w4 = mul %wq, 16 : i32",
           "  %w464 = zext %w4 : i32 to i64",
           f"  %computes = cmp.ult %tid, {K} : i32",
           "  %lastin = add %rb, 1 : i32",
           f"  %rb1 = add %rb, {R - 1} : i32",
           f"  %steps = div.u %rb1, {R} : i32",
           f"  %c0 = const {STENCIL_C0} : f32",
           f"  %c1 = const {STENCIL_C1} : f32",
           "  for %g = 0 to %steps step 1 {",
           f"    %r0 = mul %g, {R} : i32"]
    for j in range(R + 2):
        out += [f"    %in{j} = add %r0, {j} : i32",
                f"    %inc{j} = min.u %in{j}, %lastin : i32",
                f"    %ir{j} = add %row0, %inc{j} : i32",
                f"    %ir{j}_64 = zext %ir{j} : i32 to i64",
                f"    %io{j} = mul %ir{j}_64, %pitchb64 : i64",
                f"    %src{j} = ptr.add %src_c, %io{j}",
                f"    %dst{j} = ptr.add %mine, {j * row}",
                f"    %t{j} = copy %dst{j}, %src{j}, 16"]
    out += [f"    await %t{j}" for j in range(R + 2)]
    out += ["    barrier.cta",
            "    if %computes {"]
    # Thread t computes columns 4t .. 4t + 3 of every output row (a warp's
    # loads and stores are 512 contiguous bytes); each value of its own
    # columns is loaded once per step.
    for j in range(R + 2):
        for q in range(4):
            out += [f"      %pv{j}_{q} = ptr.add %ctile, {j * row + 16 + 4 * q}",
                    f"      %v{j}_{q} = ld %pv{j}_{q} : f32"]
    for e in range(R):
        m = e + 1  # the output row's own input row
        out += [f"      %o{e} = add %r0, {e} : i32",
                f"      %in_{e} = cmp.ult %o{e}, %rb : i32",
                f"      if %in_{e} {{",
                f"        %orow{e} = add %row0, %o{e} : i32",
                f"        %orow{e}_64 = zext %orow{e} : i32 to i64",
                f"        %oro{e} = mul %orow{e}_64, %w464 : i64",
                f"        %drow{e} = ptr.add %dcol, %oro{e}"]
        for q in range(4):
            x = m * row + 16 + 4 * q
            out += [f"        %pl{e}_{q} = ptr.add %ctile, {x - 4}",
                    f"        %l{e}_{q} = ld %pl{e}_{q} : f32",
                    f"        %pr{e}_{q} = ptr.add %ctile, {x + 4}",
                    f"        %r{e}_{q} = ld %pr{e}_{q} : f32",
                    f"        %s1_{e}_{q} = fadd %v{e}_{q}, %v{e + 2}_{q} : f32",
                    f"        %s2_{e}_{q} = fadd %l{e}_{q}, %r{e}_{q} : f32",
                    f"        %s3_{e}_{q} = fadd %s1_{e}_{q}, %s2_{e}_{q} : f32",
                    f"        %t1_{e}_{q} = fmul %s3_{e}_{q}, %c1 : f32",
                    f"        %t0_{e}_{q} = fmul %v{m}_{q}, %c0 : f32",
                    f"        %y{e}_{q} = fadd %t0_{e}_{q}, %t1_{e}_{q} : f32",
                    f"        %po{e}_{q} = ptr.add %drow{e}, {4 * q}",
                    f"        st %po{e}_{q}, %y{e}_{q} : f32"]
        out += ["      }"]
    out += ["    }",
            "    barrier.cta",
            "  }",
            "}"]
    return "\n".join(out) + "\n"


def pipe_rowsum(c):
    """Row sums written the plain way for the pipeliner: CTA c takes rows c,
    c + nctaid, ...; for each row a loop over its tiles copies tile k into
    the one @tile (thread t its 16-byte chunks t, t + N, ..., so a warp's
    copies read 512 contiguous bytes), awaits it, `barrier.cta`, adds the
    thread's T/(4N) words (a tree of adds, onto its running sum),
    `barrier.cta`. At the row's end the threads' sums meet in @part and tid
    0 stores the row's sum. The stage count is build.sh's `pipeline:S`, not
    this kernel's."""
    T, N = c.tile, c.threads
    per = T // (4 * N)
    share = T // N
    out = [
        f"kernel @{c.name}({params(c)}) block({N}) {{",
        f"  shared @tile: bytes[{T}] align 128",
        f"  shared @part: bytes[{4 * N}] align 16",
        "  %tid = sreg tid.x",
        "  %cta = sreg ctaid.x",
        "  %ncta = sreg nctaid.x",
        "  %leader = cmp.eq %tid, 0 : i32",
        "  %tile = addr @tile",
        "  %part = addr @part",
        "  %off = mul %tid, 16 : i32",
        "  %off64 = zext %off : i32 to i64",
        "  %mine_t = ptr.add %tile, %off",
        "  %col = mul %tid, 4 : i32",
        "  %mypart = ptr.add %part, %col",
    ] + MY_ROWS + [
        f"  %rowbytes = mul %tpr, {T} : i32",
        "  %rowbytes64 = zext %rowbytes : i32 to i64",
        "  %zero = const 0.0 : f32",
        "  for %r = 0 to %myrows step 1 {",
        "    %row0 = mul %r, %ncta : i32",
        "    %row = add %row0, %cta : i32",
        "    %row64 = zext %row : i32 to i64",
        "    %ro = mul %row64, %rowbytes64 : i64",
        "    %src_r = ptr.add %src, %ro",
        "    %src_t = ptr.add %src_r, %off64",
        "    %acc = for %k = 0 to %tpr step 1 iter(%a = %zero) {",
        "      %k64 = zext %k : i32 to i64",
        f"      %k_off = mul %k64, {T} : i64",
        "      %src_k = ptr.add %src_t, %k_off",
    ]
    # thread t copies the 16-byte chunks t, t + N, ...: each chunk of a
    # warp's copies is 512 contiguous bytes
    for j in range(share // 16):
        out += [f"      %src_k{j} = ptr.add %src_k, {16 * N * j}",
                f"      %mine_t{j} = ptr.add %mine_t, {16 * N * j}",
                f"      %t{j} = copy %mine_t{j}, %src_k{j}, 16"]
    out += [f"      await %t{j}" for j in range(share // 16)]
    out += [
        "      barrier.cta",
        "      %p = ptr.add %tile, %col",
    ]
    for e in range(per):
        out += [
            f"      %p{e} = ptr.add %p, {e * 4 * N}",
            f"      %x{e} = ld %p{e} : f32",
        ]
    # the tile's words in a tree of adds, then onto the running sum
    level, n = [f"%x{e}" for e in range(per)], 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            out.append(f"      %u{n} = fadd {level[i]}, {level[i + 1]} : f32")
            nxt.append(f"%u{n}")
            n += 1
        level = nxt + level[len(level) - len(level) % 2:]
    out += [
        f"      %sum = fadd %a, {level[0]} : f32",
        "      barrier.cta",
        "      yield %sum",
        "    }",
        "    st %mypart, %acc : f32",
        "    barrier.cta",
        "    if %leader {",
    ]
    store_row_sum(out, "      ", N, "%row", [])
    out += [
        "    }",
        "    barrier.cta",
        "  }",
        "}",
    ]
    return "\n".join(out) + "\n"


BODIES = {
    ("copy", "bulk"): bulk_copy,
    ("scale", "bulk"): bulk_scale,
    ("copy", "bulk1"): single_tile,
    ("scale", "bulk1"): single_tile,
    ("copy", "bulkws"): bulkws_copy,
    ("copy", "cpa"): cpa_kernel,
    ("scale", "cpa"): cpa_kernel,
    ("rowsum", "bulk"): bulk_rowsum,
    ("rowsum", "pipe"): pipe_rowsum,
    ("copy", "pipe"): pipe_stream,
    ("scale", "pipe"): pipe_stream,
    ("stencil", "bulk"): bulk_stencil,
    ("stencil", "pipe"): pipe_stencil,
}


def sweep():
    cfgs = []
    # bulk copy: one thread; stages x tile x lookahead
    for S, T in [(2, 16384), (2, 8192), (4, 8192), (5, 8192),
                 (4, 4096), (8, 4096), (11, 4096), (8, 2048), (16, 2048)]:
        for L in sorted({max(1, S // 2), S - 1}):
            if S * T + 8 * S <= SMEM_LIMIT:
                cfgs.append(Cfg("copy", "bulk", S, T, 32, L))
    # bulk scale
    for S, T in [(2, 16384), (4, 8192), (5, 8192), (4, 4096), (8, 4096), (11, 4096)]:
        for N in (128, 256, 512):
            if T % (4 * N) == 0 and S * T + 8 * S <= SMEM_LIMIT:
                cfgs.append(Cfg("scale", "bulk", S, T, N))
                if S >= 4:
                    cfgs.append(Cfg("scale", "bulk", S, T, N, S // 2))
    # one tile per CTA (no ring); one with an L2 evict-first hint
    for T in (2048, 4096, 8192, 16384):
        cfgs.append(Cfg("copy", "bulk1", 1, T, 32))
        for N in (128, 256):
            cfgs.append(Cfg("scale", "bulk1", 1, T, N))
    cfgs.append(Cfg("copy", "bulk1", 1, 2048, 32, hint=True))
    cfgs.append(Cfg("copy", "bulk", 8, 2048, 32, 4, hint=True))
    # bulk copy ring that waits for its stores' writes, not only their reads
    for S, T, L in [(5, 8192, 2), (4, 8192, 2), (8, 4096, 4), (8, 2048, 4)]:
        cfgs.append(Cfg("copy", "bulk", S, T, 32, L, fullwait=True))
    # rings over contiguous runs of tiles (chunked order) instead of the grid stride
    for S, T, L in [(5, 8192, 4), (4, 8192, 2), (8, 2048, 4), (8, 4096, 4)]:
        cfgs.append(Cfg("copy", "bulk", S, T, 32, L, chunk=True))
    for S, T, N in [(5, 8192, 256), (4, 4096, 256)]:
        cfgs.append(Cfg("scale", "bulk", S, T, N, chunk=True))
    for job in ("copy", "scale"):
        for S, T, N in [(4, 2048, 128), (4, 8192, 256)]:
            cfgs.append(Cfg(job, "cpa", S, T, N, chunk=True))
    # warp-specialised bulk copy ring
    for S, T in [(2, 16384), (4, 8192), (5, 8192), (8, 4096), (8, 2048), (16, 2048)]:
        cfgs.append(Cfg("copy", "bulkws", S, T, 64))
    # cp.async ring, with and without the barrier before each refill
    for job in ("copy", "scale"):
        for S, T, N in [(2, 8192, 256), (3, 8192, 256), (4, 8192, 256), (4, 4096, 256),
                        (4, 8192, 512), (4, 16384, 512), (3, 16384, 512), (4, 2048, 128),
                        (8, 2048, 128), (8, 4096, 256)]:
            if S * T <= SMEM_LIMIT:
                for nb in (False, True):
                    cfgs.append(Cfg(job, "cpa", S, T, N, nobar=nb))
    # row sums through a bulk ring
    for S, T, N in [(2, 16384, 256), (4, 8192, 256), (5, 8192, 256), (4, 8192, 512),
                    (4, 4096, 128), (8, 4096, 128), (8, 4096, 256), (11, 4096, 256)]:
        cfgs.append(Cfg("rowsum", "bulk", S, T, N))
    # copy and scale written single-buffered, pipelined by cpflow (S stages)
    for job in ("copy", "scale"):
        for N in (128, 256, 512, 1024):
            for S in range(2, 9):
                if S * (16 * N + 8) <= SMEM_LIMIT:
                    cfgs.append(Cfg(job, "pipe", S, 16 * N, N))
    # row sums written single-buffered, pipelined by cpflow (S stages; each
    # thread copies T/N bytes of a tile)
    for T, N in [(4096, 256), (2048, 128), (8192, 512), (8192, 256), (8192, 128), (16384, 256)]:
        for S in range(2, 9):
            if S * (T + 8) + 4 * N <= SMEM_LIMIT:
                cfgs.append(Cfg("rowsum", "pipe", S, T, N))
    # ... and with tiles of 16 and 32 KiB, past 48 KiB of shared memory
    # (Triton's best row sum streams 32 KiB blocks through 4 stages)
    for T, N in [(16384, 128), (32768, 128), (32768, 256), (32768, 512), (65536, 256), (65536, 512), (65536, 1024)]:
        for S in range(2, 7):
            if SMEM_LIMIT < S * (T + 8) + 4 * N <= PIPE_SMEM_LIMIT:
                cfgs.append(Cfg("rowsum", "pipe", S, T, N))
    # 5-point stencil: column strips of T bytes, input rows through a ring
    for S, T, N in [(4, 4096, 256), (6, 4096, 256), (8, 4096, 256), (4, 4096, 128),
                    (6, 2048, 128), (8, 2048, 128), (4, 8192, 256), (5, 8192, 512)]:
        cfgs.append(Cfg("stencil", "bulk", S, T, N))
    # the stencil written single-buffered, pipelined by cpflow: R output rows
    # of a column strip per step, each thread copying its 16 bytes of the
    # R + 2 input rows; S = 1 is the loop compiled as written
    for T, R in [(1024, 4), (1024, 6), (1024, 8), (1024, 12), (1024, 16),
                 (2048, 2), (2048, 4), (2048, 6), (2048, 8), (2048, 12),
                 (4096, 2), (4096, 4), (4096, 8)]:
        for S in range(1, 9):
            if S * (R + 2) * (T + 32) <= PIPE_SMEM_LIMIT:
                cfgs.append(Cfg("stencil", "pipe", S, T, T // 16 + 2, rows=R))
    return cfgs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--job", choices=sorted({j for j, _ in BODIES}), default="copy")
    ap.add_argument("--mech", choices=sorted({m for _, m in BODIES}), default="bulk",
                    help="bulk: ring; bulk1: one tile per CTA; bulkws: warp-specialised ring; cpa: cp.async ring")
    ap.add_argument("--hint", action="store_true", help="L2 cache-hint policy parameter on the bulk copies")
    ap.add_argument("--nobar", action="store_true", help="cpa: no barrier before each refill")
    ap.add_argument("--chunk", action="store_true", help="ring: contiguous runs of tiles per CTA, not the grid stride")
    ap.add_argument("--emptybar", action="store_true", help="rowsum/stencil: free slots through empty mbarriers, not barrier.cta")
    ap.add_argument("--fullwait", action="store_true", help="bulk copy: wait_group (not .read) before a refill")
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--tile", type=int, default=8192, help="tile bytes")
    ap.add_argument("--threads", type=int, default=None, help="threads per CTA")
    ap.add_argument("--rows", type=int, default=None, help="pipe stencil: output rows per loop step")
    ap.add_argument("--lookahead", type=int, default=None, help="tiles loaded ahead (bulk: default S/2 for copy, S-1 for scale)")
    ap.add_argument("-o", "--output")
    ap.add_argument("--name", action="store_true", help="print the configuration's name and exit")
    ap.add_argument("--all", metavar="DIR", help="write the whole sweep set into DIR")
    a = ap.parse_args()
    if a.all:
        os.makedirs(a.all, exist_ok=True)
        for c in sweep():
            with open(os.path.join(a.all, c.name + ".cpf"), "w") as f:
                f.write(c.module())
            print(c.name)
        return
    threads = a.threads or {"bulkws": 64}.get(a.mech, 32 if a.mech != "cpa" and a.job == "copy" else 256)
    stages = 1 if a.mech == "bulk1" else a.stages
    c = Cfg(a.job, a.mech, stages, a.tile, threads, a.lookahead, hint=a.hint, nobar=a.nobar,
            fullwait=a.fullwait, chunk=a.chunk,
            emptybar=a.emptybar, rows=a.rows)
    if a.name:
        print(c.name)
        return
    text = c.module()
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
