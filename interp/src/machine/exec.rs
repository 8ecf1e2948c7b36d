//! Executing one instruction; issuing and completing async ops; mbarriers
//! and barriers.

use super::*;

/// What `issue` needs to start an async op.
struct Issue {
    mech: Mech,
    /// The proxy its data accesses go through (the table's effects).
    proxy: Proxy,
    src: Option<(Addr, u64)>,
    dsts: Vec<Dst>,
    len: u64,
    reduce: Option<(Qual, Qual)>,
    byte_mask: Option<u16>,
    data: Vec<u8>,
    seq: u32,
    /// Required alignment of source and destination.
    align: u64,
}

impl Machine<'_> {
    /// The proxy through which `inst`'s data accesses go, from the table's
    /// effects (generic for an op without accesses).
    fn data_proxy(&self, inst: Inst) -> Proxy {
        self.decoded[inst.index()]
            .as_ref()
            .and_then(|d| d.variant.accesses.first())
            .map_or(Proxy::Generic, |a| a.proxy)
    }

    pub(super) fn step(&mut self, g: u32, inst: Inst) -> Result<Flow, Stop> {
        let k = self.k;
        let data: &InstData = &k.insts[inst];
        let result_scalar = data
            .results
            .first()
            .and_then(|&r| k.ty(r).scalar())
            .unwrap_or(Scalar::I32);
        match &data.op {
            Op::Const(c) => {
                let v = match (c, result_scalar) {
                    (Constant::Int(i), s) => arith::int_as(s, *i),
                    (Constant::Float(f), Scalar::F32) => Val::F32(*f as f32),
                    (Constant::Float(f), _) => Val::F64(*f),
                };
                self.set(g, data.results[0], v);
            }
            Op::Binary(b) => {
                let (x, y) = (
                    self.typed(g, data.args[0], result_scalar),
                    self.typed(g, data.args[1], result_scalar),
                );
                self.set(g, data.results[0], arith::binary(*b, result_scalar, x, y));
            }
            Op::Cmp(p, s) => {
                let (x, y) = (
                    self.typed(g, data.args[0], *s),
                    self.typed(g, data.args[1], *s),
                );
                self.set(
                    g,
                    data.results[0],
                    Val::Int(u64::from(arith::compare(*p, *s, x, y))),
                );
            }
            Op::Select => {
                let c = self.val(g, data.args[0]).as_u64() & 1 == 1;
                let v = self.typed(g, data.args[if c { 1 } else { 2 }], result_scalar);
                self.set(g, data.results[0], v);
            }
            Op::Cast(c, from) => {
                let v = self.typed(g, data.args[0], *from);
                self.set(g, data.results[0], arith::cast(*c, *from, result_scalar, v));
            }
            Op::PtrAdd => {
                let a = data.args[1];
                let off = match (a.operand, k.arg_ty(a)) {
                    (Operand::Imm(i), _) => i,
                    (_, Some(Type::Scalar(Scalar::I32))) => {
                        arith::sext(self.val(g, a).as_u64(), 32)
                    }
                    _ => self.val(g, a).as_u64() as i64,
                };
                let v = match self.val(g, data.args[0]) {
                    Val::Ptr(p) => Val::Ptr(p.add(off)),
                    other => other,
                };
                self.set(g, data.results[0], v);
            }
            Op::Addr(id) => {
                let cta = self.threads[g as usize].cta;
                let mem = Mem::Shared {
                    cta,
                    alloc: id.index() as u32,
                };
                let v = match k.shared[*id].kind {
                    SharedKind::Bytes(_) => Val::Ptr(Addr { mem, off: 0 }),
                    SharedKind::Mbarriers(_) => {
                        let i = data
                            .args
                            .first()
                            .map_or(0, |&a| arith::sext(self.val(g, a).as_u64(), 32));
                        Val::Mbar(Addr { mem, off: i * 8 })
                    }
                };
                self.set(g, data.results[0], v);
            }
            Op::Sreg(r) => {
                let v = self.sreg(g, *r);
                self.set(g, data.results[0], Val::Int(u64::from(v)));
            }
            Op::Load(s) => {
                let Val::Ptr(a) = self.val(g, data.args[0]) else {
                    return Err(self.limit(Some(inst), "load through a non-pointer value".into()));
                };
                let n = u64::from(s.bytes());
                self.observe_mem(a, n);
                let v = match self.generic_access(g, inst, a, n, false) {
                    Some((obj, st)) => {
                        self.read_stamp_generic(g, inst, obj, st, n as usize);
                        let bytes = &self.objects[obj].data[st..st + n as usize];
                        decode(*s, bytes)
                    }
                    None => arith::int_as(*s, 0),
                };
                self.set(g, data.results[0], v);
            }
            Op::Store(s) => {
                let Val::Ptr(a) = self.val(g, data.args[0]) else {
                    return Err(self.limit(Some(inst), "store through a non-pointer value".into()));
                };
                let n = u64::from(s.bytes());
                let v = self.typed(g, data.args[1], *s);
                self.observe_mem(a, n);
                if let Some((obj, st)) = self.generic_access(g, inst, a, n, true) {
                    let bytes = v.as_u64().to_le_bytes();
                    self.objects[obj].data[st..st + n as usize]
                        .copy_from_slice(&bytes[..n as usize]);
                    self.write_stamp_generic(g, inst, obj, st, n as usize);
                }
            }
            Op::For => {
                let lo = arith::sext(self.typed(g, data.args[0], Scalar::I32).as_u64(), 32);
                let hi = arith::sext(self.typed(g, data.args[1], Scalar::I32).as_u64(), 32);
                let step = arith::sext(self.typed(g, data.args[2], Scalar::I32).as_u64(), 32);
                let inits: Vec<Val> = data.args[3..].iter().map(|&a| self.val(g, a)).collect();
                self.advance(g);
                let runs = if step > 0 { lo < hi } else { lo > hi };
                let t = &mut self.threads[g as usize];
                if !runs || step == 0 {
                    for (r, v) in data.results.iter().zip(inits) {
                        t.vals[r.index()] = v;
                    }
                    return Ok(Flow::Stay);
                }
                let body = data.regions[0];
                let args = &k.regions[body].args;
                t.vals[args[0].index()] = Val::Int(lo as u32 as u64);
                for (a, v) in args[1..].iter().zip(inits) {
                    t.vals[a.index()] = v;
                }
                t.frames.push(Frame {
                    region: body,
                    pc: 0,
                    owner: Some(inst),
                    iv: lo,
                    hi,
                    step,
                });
                return Ok(Flow::Stay);
            }
            Op::While => {
                self.enter(g, inst, data.regions[0]);
                return Ok(Flow::Stay);
            }
            Op::If => {
                let c = self.val(g, data.args[0]).as_u64() & 1 == 1;
                self.enter(g, inst, data.regions[if c { 0 } else { 1 }]);
                return Ok(Flow::Stay);
            }
            Op::Yield => {
                let vals: Vec<Val> = data.args.iter().map(|&a| self.val(g, a)).collect();
                self.end_region(g, vals);
                return Ok(Flow::Stay);
            }
            Op::Ptx(p) => return self.ptx(g, inst, p),
        }
        Ok(Flow::Next)
    }

    /// Enters `region` of `inst` (an `if` branch or a poll loop's body),
    /// past `inst` in the current frame.
    fn enter(&mut self, g: u32, inst: Inst, region: Region) {
        self.advance(g);
        self.threads[g as usize].frames.push(Frame {
            region,
            pc: 0,
            owner: Some(inst),
            iv: 0,
            hi: 0,
            step: 0,
        });
    }

    /// Moves the current frame past its instruction (before entering a region).
    fn advance(&mut self, g: u32) {
        if let Some(f) = self.threads[g as usize].frames.last_mut() {
            f.pc += 1;
        }
    }

    fn sreg(&self, g: u32, r: SpecialReg) -> u32 {
        let t = &self.threads[g as usize];
        let geo = self.geo;
        let rank = t.cta % geo.cluster;
        use SpecialReg as S;
        let [bx, by, bz] = geo.block;
        let [cx, cy, cz] = geo.cluster_shape;
        match r {
            S::TidX => t.tid % bx,
            S::TidY => t.tid / bx % by,
            S::TidZ => t.tid / (bx * by),
            S::NtidX => bx,
            S::NtidY => by,
            S::NtidZ => bz,
            // Clusters tile a grid of (ctas / (cy·cz), cy, cz) CTAs along x:
            // consecutive CTAs form a cluster, ranked x first.
            S::CtaidX => t.cta / geo.cluster * cx + rank % cx,
            S::CtaidY => rank / cx % cy,
            S::CtaidZ => rank / (cx * cy),
            S::NctaidX => geo.ctas / (cy * cz),
            S::NctaidY => cy,
            S::NctaidZ => cz,
            S::LaneId => t.tid % 32,
            S::ClusterCtaRank => rank,
            S::ClusterCtaidX => rank % cx,
            S::ClusterCtaidY => rank / cx % cy,
            S::ClusterCtaidZ => rank / (cx * cy),
            S::ClusterNctaRank => geo.cluster,
            S::ClusterNctaidX => cx,
            S::ClusterNctaidY => cy,
            S::ClusterNctaidZ => cz,
            S::ClusteridX => t.cta / geo.cluster,
            S::ClusteridY | S::ClusteridZ => 0,
        }
    }

    /// An observation point before a memory access (exhaustive mode only
    /// branches when the bytes are in flight).
    fn observe_mem(&mut self, a: Addr, len: u64) {
        if self.inflight.is_empty() {
            return;
        }
        let relevant = self.chooser.replaying() && {
            let obj = self.obj_index(a.mem);
            self.culprit(obj, a.off.max(0) as u64, len, true, None)
                .is_some()
                || self
                    .culprit(obj, a.off.max(0) as u64, len, false, None)
                    .is_some()
        };
        self.observe_point(relevant);
    }

    fn ptx(&mut self, g: u32, inst: Inst, p: &PtxOp) -> Result<Flow, Stop> {
        if self.decoded[inst.index()].is_none() {
            return Err(self.limit(
                Some(inst),
                format!("`{p}` matches no form (run `cpflow check` first)"),
            ));
        }
        let k = self.k;
        let data = &k.insts[inst];
        let res = data.results.first().copied();
        let effect = p.family.sync();
        match effect {
            SyncEffect::Commit(group) => {
                let bulk = group == GroupKind::Bulk;
                let n = self.commit(g, bulk);
                self.set_res(
                    g,
                    res,
                    if bulk {
                        Val::BulkGroup(n)
                    } else {
                        Val::Group(n)
                    },
                );
            }
            SyncEffect::WaitAll => {
                self.commit(g, false);
                let upto = self.threads[g as usize].groups.len() as u32;
                return Ok(self.wait_groups(g, inst, false, false, upto));
            }
            SyncEffect::WaitGroup(group) => {
                let bulk = group == GroupKind::Bulk;
                let read = p.has(Qual::Read);
                let Some(a) = self.operand(inst, "N") else {
                    return Err(self.limit(Some(inst), "wait_group without N".into()));
                };
                let t = &self.threads[g as usize];
                let have = if bulk {
                    t.bulk_groups.len()
                } else {
                    t.groups.len()
                } as u32;
                let upto = match self.val(g, a) {
                    Val::Group(n) | Val::BulkGroup(n) => n,
                    v => sem::groups_waited(have as usize, v.as_u64()) as u32,
                };
                return Ok(self.wait_groups(g, inst, bulk, read, upto));
            }
            SyncEffect::AsyncArrive => {
                let Some(Val::Phase(a, name)) = self.operand(inst, "mbar").map(|x| self.val(g, x))
                else {
                    return Err(self.limit(Some(inst), "bad mbarrier operand".into()));
                };
                let Some(slot) = self.slot(g, inst, a) else {
                    return Ok(Flow::Next);
                };
                if !self.mbar_use(g, inst, slot) {
                    return Ok(Flow::Next);
                }
                let ph = self.named_phase(slot, name);
                let noinc = p.has(Qual::Noinc);
                if !noinc {
                    let m = &mut self.mbars[slot as usize];
                    m.pending += 1;
                    if m.pending > COUNT_MAX {
                        self.count_range(g, inst, slot, "pending arrival count");
                    }
                }
                // All prior cp.async of this thread: those still in flight
                // (the arrive waits for them) and those since the last
                // arrive (observing the phase observes them).
                let mut tracked = std::mem::take(&mut self.threads[g as usize].recent_cp);
                for &id in &self.inflight {
                    let op = &self.ops[id as usize];
                    if op.thread == g
                        && op.mech == Mech::Group
                        && !op.done
                        && !tracked.contains(&id)
                    {
                        tracked.push(id);
                    }
                }
                let seq = self.threads[g as usize].cp_seq;
                let id = self.push_op(AsyncOp {
                    inst,
                    thread: g,
                    mech: Mech::Arrive,
                    proxy: Proxy::Generic,
                    src: None,
                    dsts: vec![Dst {
                        addr: a,
                        bar: Some((slot, ph)),
                    }],
                    len: 0,
                    reduce: None,
                    byte_mask: None,
                    data: Vec::new(),
                    seq,
                    tracked,
                    pool_pos: 0,
                    read_done: true,
                    done: false,
                    observed: true,
                });
                self.start(id);
                self.issue_point();
            }
            SyncEffect::Init => {
                let Some(a) = self.addr_of(g, inst, "addr") else {
                    return Err(self.limit(Some(inst), "bad mbarrier operand".into()));
                };
                let count = self
                    .operand(inst, "count")
                    .map_or(1, |c| i64::from(self.u32_of(g, c)));
                let Some(slot) = self.slot(g, inst, a) else {
                    return Ok(Flow::Next);
                };
                if self.mbars[slot as usize].life == Life::Live {
                    let other = self.mbars[slot as usize]
                        .init_inst
                        .map(|i| (i, "initialised here before".to_string()));
                    self.report(
                        "U0205",
                        "`mbarrier.init` over a live mbarrier".into(),
                        inst,
                        Some(g),
                        "this mbarrier is already initialised".into(),
                        other,
                        vec![],
                    );
                }
                if !(1..=COUNT_MAX).contains(&count) {
                    self.report(
                        "U0201",
                        format!("mbarrier expected-arrival count {count} is out of range"),
                        inst,
                        Some(g),
                        format!("must be in [1, {COUNT_MAX}]"),
                        None,
                        vec![],
                    );
                }
                let init_stamp = Stamp {
                    comp: self.comps.thread(g, PROG),
                    epoch: self.epoch(g),
                };
                let m = &mut self.mbars[slot as usize];
                m.life = Life::Live;
                m.phase = 0;
                m.pending = count.clamp(1, COUNT_MAX);
                m.expected = m.pending;
                m.tx = 0;
                m.tx_sites.clear();
                for vc in [
                    &mut m.cur_vc,
                    &mut m.prev_vc,
                    &mut m.cur_peer_vc,
                    &mut m.prev_peer_vc,
                ] {
                    vc.iter_mut().for_each(|x| *x = 0);
                }
                m.cur_ops.clear();
                m.prev_ops.clear();
                m.completed_by = None;
                m.init_stamp = init_stamp;
                m.init_inst = Some(inst);
            }
            SyncEffect::Inval => {
                let Some(a) = self.addr_of(g, inst, "addr") else {
                    return Err(self.limit(Some(inst), "bad mbarrier operand".into()));
                };
                let Some(slot) = self.slot(g, inst, a) else {
                    return Ok(Flow::Next);
                };
                if self.mbar_use(g, inst, slot) {
                    self.mbars[slot as usize].life = Life::Invalid;
                }
            }
            SyncEffect::Phase => {
                let Some(Val::Mbar(a)) = self.operand(inst, "mbar").map(|x| self.val(g, x)) else {
                    return Err(self.limit(Some(inst), "bad mbarrier.phase operands".into()));
                };
                let name = match (self.operand(inst, "index"), self.operand(inst, "parity")) {
                    (Some(i), _) => PhaseName::Index(self.u32_of(g, i) as i32),
                    (None, Some(b)) => PhaseName::Parity(self.u32_of(g, b) & 1),
                    (None, None) => {
                        return Err(self.limit(Some(inst), "bad mbarrier.phase operands".into()))
                    }
                };
                self.set_res(g, res, Val::Phase(a, name));
            }
            SyncEffect::Arrive { .. } | SyncEffect::ExpectTx => {
                let Some(Val::Phase(a, name)) = self.operand(inst, "addr").map(|x| self.val(g, x))
                else {
                    return Err(self.limit(Some(inst), "bad mbarrier operand".into()));
                };
                let Some(slot) = self.slot(g, inst, a) else {
                    return Ok(Flow::Next);
                };
                if !self.mbar_use(g, inst, slot) {
                    return Ok(Flow::Next);
                }
                let ph = self.named_phase(slot, name);
                if let Some(tx) = self.operand(inst, "txCount") {
                    let n = i64::from(self.u32_of(g, tx));
                    self.expect_tx(g, inst, slot, n);
                }
                if effect != SyncEffect::ExpectTx {
                    let count = self
                        .operand(inst, "count")
                        .map_or(1, |c| i64::from(self.u32_of(g, c)));
                    let release = sem::ordering(p);
                    self.arrive_on(g, inst, slot, ph, count, release);
                }
            }
            SyncEffect::PhaseWait(kind) => {
                if kind == WaitKind::Try && !self.threads[g as usize].resumed {
                    // try_wait may suspend: let others run (and ops complete) first.
                    self.threads[g as usize].resumed = true;
                    return Ok(Flow::Yield);
                }
                self.threads[g as usize].resumed = false;
                let Some(Val::Phase(a, name)) = self.operand(inst, "addr").map(|x| self.val(g, x))
                else {
                    return Err(self.limit(Some(inst), "bad mbarrier operand".into()));
                };
                let Some(slot) = self.slot(g, inst, a) else {
                    self.set_res(g, res, Val::Int(1));
                    return Ok(Flow::Next);
                };
                let ph = self.named_phase(slot, name);
                let relevant = self.chooser.replaying()
                    && self.inflight.iter().any(|&id| {
                        self.ops[id as usize]
                            .dsts
                            .iter()
                            .any(|d| d.bar.is_some_and(|(s, _)| s == slot))
                    });
                self.observe_point(relevant);
                let acquire = sem::ordering(p);
                let done = self.observe_phase(g, inst, slot, ph, acquire);
                if kind == WaitKind::Blocking {
                    if !done {
                        self.mbars[slot as usize].waiters.push(g);
                        self.threads[g as usize].state = State::Blocked(
                            Block::Phase {
                                slot,
                                parity: (ph & 1) as u32,
                            },
                            inst,
                        );
                        // Re-executed when woken: a wait is a try_wait loop,
                        // so it observes the barrier as it is then (and a
                        // waiter that lags two phases is caught, PTX ISA 9.7.13.15).
                        return Ok(Flow::Stay);
                    }
                } else {
                    self.set_res(g, res, Val::Int(u64::from(done)));
                }
            }
            SyncEffect::ProxyFence => {
                let e = self.epoch(g);
                let t = &mut self.threads[g as usize];
                let space = p.qual(Role::Space);
                t.fences.push((t.seq, e, space));
            }
            SyncEffect::InitFence => {
                self.threads[g as usize].init_fenced = true;
            }
            SyncEffect::CtaBarrier { named, waits } => {
                let (id, count) = if named {
                    let id = self.operand(inst, "id").map_or(0, |a| self.u32_of(g, a));
                    (id, self.operand(inst, "count").map(|a| self.u32_of(g, a)))
                } else {
                    (0, None)
                };
                self.cta_barrier(g, inst, id, count, waits);
            }
            SyncEffect::ClusterArrive => {
                let cl = (self.threads[g as usize].cta / self.geo.cluster) as usize;
                let phase = self.clusters[cl].phase;
                if self.threads[g as usize].cluster_arrived == Some(phase) {
                    self.report(
                        "U0403",
                        "`barrier.cluster.arrive` twice in one phase".into(),
                        inst,
                        Some(g),
                        "this thread already arrived in this phase".into(),
                        None,
                        vec![format!(
                            "{}: one arrive per thread per phase",
                            cite::BARRIER_CLUSTER
                        )],
                    );
                    return Ok(Flow::Next);
                }
                let release = p.qual(Role::Sem) != Some(Qual::Relaxed)
                    || self.threads[g as usize].init_fenced;
                self.threads[g as usize].init_fenced = false;
                if release {
                    let vc = std::mem::take(&mut self.threads[g as usize].vc);
                    clock::join(&mut self.clusters[cl].vc, &vc);
                    self.threads[g as usize].vc = vc;
                    self.bump(g);
                }
                self.threads[g as usize].cluster_arrived = Some(phase);
                self.clusters[cl].arrived += 1;
                self.check_cluster_barrier(cl as u32);
            }
            SyncEffect::ClusterWait => {
                let cl = (self.threads[g as usize].cta / self.geo.cluster) as usize;
                let phase = self.threads[g as usize]
                    .cluster_arrived
                    .unwrap_or(self.clusters[cl].phase);
                if self.clusters[cl].phase > phase {
                    let vc = &self.clusters[cl].done_vc;
                    clock::join(&mut self.threads[g as usize].vc, vc);
                } else {
                    self.clusters[cl].waiters.push(g);
                    self.threads[g as usize].state =
                        State::Blocked(Block::ClusterWait(phase), inst);
                }
            }
            SyncEffect::Await => {
                let Some(Val::Token(id)) = self.operand(inst, "token").map(|x| self.val(g, x))
                else {
                    return Err(self.limit(Some(inst), "bad await operand".into()));
                };
                let Some(op) = self.ops.get(id as usize) else {
                    return Err(self.limit(Some(inst), "await of an unknown token".into()));
                };
                if op.mech == Mech::Abstract && !op.done {
                    // The abstract copy is executed now, by the awaiting thread.
                    self.complete((id, Stage::Complete));
                }
                if self.ops[id as usize].done {
                    self.observe_op(g, id);
                } else {
                    self.threads[g as usize].state = State::Blocked(Block::Op(id), inst);
                }
            }
            SyncEffect::Issue | SyncEffect::Hint | SyncEffect::Address | SyncEffect::Elect => {
                return self.operation(g, inst, p, res);
            }
        }
        Ok(Flow::Next)
    }

    /// The operations whose effect is their own: issuing an async operation
    /// (its operands follow its completion mechanism), a hint, an address
    /// or an election.
    fn operation(
        &mut self,
        g: u32,
        inst: Inst,
        p: &PtxOp,
        res: Option<Value>,
    ) -> Result<Flow, Stop> {
        let k = self.k;
        let completion = p.variant().map(|v| v.completion);
        let takes_value = p.variant().is_some_and(Variant::takes_value);
        match (p.family.sync(), completion) {
            (SyncEffect::Issue, Some(Completion::AsyncGroup)) => {
                let (Some(dst), Some(src)) =
                    (self.addr_of(g, inst, "dst"), self.addr_of(g, inst, "src"))
                else {
                    return Err(self.limit(Some(inst), "bad cp.async operands".into()));
                };
                let cp = self
                    .operand(inst, "cp-size")
                    .map_or(16, |a| self.u32_of(g, a)) as u64;
                let (src_size, ignore_src) = match self.operand(inst, "src-size") {
                    Some(a) if k.arg_ty(a) == Some(Type::I1) => {
                        (None, Some(self.val(g, a).as_u64() & 1 == 1))
                    }
                    Some(a) => (Some(self.val(g, a).as_u64() & 0xffff_ffff), None),
                    None => (None, None),
                };
                let n = match sem::cp_async_reads(cp, src_size, ignore_src) {
                    SrcSize::Copies(n) => n,
                    SrcSize::TooLarge(n) => {
                        self.report(
                            "U0302",
                            format!("`cp.async` src-size {n} is larger than cp-size {cp}"),
                            inst,
                            Some(g),
                            "src-size larger than cp-size".into(),
                            None,
                            vec![format!("{}: only a run-time src-size > cp-size is UB; equal is a full copy", cite::reading(1))],
                        );
                        cp
                    }
                };
                let t = &mut self.threads[g as usize];
                t.cp_seq += 1;
                let seq = t.cp_seq;
                let id = self.issue(
                    g,
                    inst,
                    Issue {
                        mech: Mech::Group,
                        proxy: self.data_proxy(inst),
                        src: Some((src, n)),
                        dsts: vec![Dst {
                            addr: dst,
                            bar: None,
                        }],
                        len: cp,
                        reduce: None,
                        byte_mask: None,
                        data: Vec::new(),
                        seq,
                        align: cp,
                    },
                );
                self.threads[g as usize].uncommitted.push(id);
                self.threads[g as usize].recent_cp.push(id);
                self.set_res(g, res, Val::Token(id));
                self.issue_point();
            }
            (SyncEffect::Issue, Some(Completion::Abstract)) => {
                self.abstract_copy(g, inst, p, res)?
            }
            (SyncEffect::Issue, _) if takes_value => self.red_async(g, inst, p)?,
            (SyncEffect::Issue, _) => self.bulk(g, inst, p)?,
            (SyncEffect::Hint, _) => {}
            (SyncEffect::Elect, _) => {
                let mask = self
                    .operand(inst, "membermask")
                    .map_or(u32::MAX, |a| self.u32_of(g, a));
                let tid = self.threads[g as usize].tid;
                let lane = tid % 32;
                // Lanes of this warp that exist in the CTA.
                let present = match self.geo.threads - (tid - lane) {
                    n if n >= 32 => u32::MAX,
                    n => (1u32 << n) - 1,
                };
                if mask & (1 << lane) == 0 {
                    self.report(
                        "U0308",
                        format!("`elect.sync` by lane {lane}, outside membermask {mask:#010x}"),
                        inst,
                        Some(g),
                        "this thread is not in the membermask".into(),
                        None,
                        vec![],
                    );
                }
                // docs/readings.md #24: the leader is the lowest lane of the
                // mask among the warp's threads.
                let leader = (mask & present).trailing_zeros();
                self.set_res(g, res, Val::Int(u64::from(lane == leader)));
            }
            (SyncEffect::Address, _) => {
                let a = self.operand(inst, "a").map(|x| self.val(g, x));
                let rank = self.operand(inst, "rank").map_or(0, |r| self.u32_of(g, r));
                let me = self.threads[g as usize].cta;
                let target = if rank >= self.geo.cluster {
                    self.report(
                        "U0307",
                        format!(
                            "`mapa` rank {rank} is outside the cluster of {} CTAs",
                            self.geo.cluster
                        ),
                        inst,
                        Some(g),
                        "no CTA has this rank".into(),
                        None,
                        vec![format!(
                            "{}: `b` out of range is unspecified [gap]",
                            cite::MAPA
                        )],
                    );
                    me
                } else {
                    self.cluster_first_cta(me) + rank
                };
                let moved = |x: Addr| match x.mem {
                    Mem::Shared { alloc, .. } => Addr {
                        mem: Mem::Shared { cta: target, alloc },
                        off: x.off,
                    },
                    Mem::Global(_) => x,
                };
                let v = match a {
                    Some(Val::Ptr(x)) => Val::Ptr(moved(x)),
                    Some(Val::Mbar(x)) => Val::Mbar(moved(x)),
                    _ => return Err(self.limit(Some(inst), "bad mapa operand".into())),
                };
                self.set_res(g, res, v);
            }
            // The other effects are run by `ptx`.
            _ => {}
        }
        Ok(Flow::Next)
    }

    /// cpflow's abstract `copy` (and `copy.reduce`): one op of the whole
    /// size, completing when awaited.
    fn abstract_copy(
        &mut self,
        g: u32,
        inst: Inst,
        p: &PtxOp,
        res: Option<Value>,
    ) -> Result<(), Stop> {
        let (Some(dst), Some(src)) = (self.addr_of(g, inst, "dst"), self.addr_of(g, inst, "src"))
        else {
            return Err(self.limit(Some(inst), "bad copy operands".into()));
        };
        let size = self.operand(inst, "size").map_or(0, |a| self.u32_of(g, a)) as u64;
        let reduce = p.qual(Role::RedOp).zip(p.qual(Role::Type));
        let id = self.issue(
            g,
            inst,
            Issue {
                mech: Mech::Abstract,
                proxy: self.data_proxy(inst),
                src: Some((src, size)),
                dsts: vec![Dst {
                    addr: dst,
                    bar: None,
                }],
                len: size,
                reduce,
                byte_mask: None,
                data: Vec::new(),
                seq: 0,
                align: 1,
            },
        );
        self.set_res(g, res, Val::Token(id));
        Ok(())
    }

    fn set_res(&mut self, g: u32, res: Option<Value>, v: Val) {
        if let Some(r) = res {
            self.set(g, r, v);
        }
    }

    fn push_op(&mut self, op: AsyncOp) -> u32 {
        self.ops.push(op);
        (self.ops.len() - 1) as u32
    }

    /// `cp.async.bulk` and `cp.reduce.async.bulk`, all directions.
    fn bulk(&mut self, g: u32, inst: Inst, p: &PtxOp) -> Result<(), Stop> {
        let (Some(dst), Some(src)) = (
            self.addr_of(g, inst, "dstMem"),
            self.addr_of(g, inst, "srcMem"),
        ) else {
            return Err(self.limit(Some(inst), "bad bulk operands".into()));
        };
        let size = self.operand(inst, "size").map_or(0, |a| self.u32_of(g, a)) as u64;
        if !size.is_multiple_of(16) {
            self.report(
                "U0303",
                format!("bulk size {size} is not a multiple of 16"),
                inst,
                Some(g),
                "size must be a multiple of 16".into(),
                None,
                vec![format!(
                    "{}: if the value is not a multiple of 16, the behavior is undefined",
                    cite::BULK
                )],
            );
        }
        let me = self.threads[g as usize].cta;
        let dst_q = p.qual(Role::Dst);
        let src_q = p.qual(Role::Src);
        if dst_q == Some(Qual::SharedCluster)
            && src_q == Some(Qual::SharedCta)
            && dst.cta() == Some(me)
            && !p.variant().is_some_and(Variant::reduces)
        {
            self.report(
                "U0305",
                "bulk copy from `.shared::cta` to the executing CTA's own shared memory".into(),
                inst,
                Some(g),
                "the destination maps to this CTA".into(),
                None,
                vec![format!(
                    "{}: the destination has to be in the shared memory of a different CTA",
                    cite::reading(13)
                )],
            );
        }
        let variant = self.decoded[inst.index()]
            .as_ref()
            .map(|d| d.variant.completion);
        let mbar = self.operand(inst, "mbar").map(|x| self.val(g, x));
        let mut bar = None;
        if let Some(Val::Phase(a, name)) = mbar {
            if let Some(slot) = self.slot(g, inst, a) {
                bar = Some((a, slot, self.named_phase(slot, name)));
            }
        }
        let mut dsts = Vec::new();
        if p.has(Qual::MulticastCluster) {
            let mask = self
                .operand(inst, "ctaMask")
                .map_or(0, |a| self.u32_of(g, a))
                & 0xffff;
            let first = self.cluster_first_cta(me);
            for rank in 0..16 {
                if mask & (1 << rank) == 0 {
                    continue;
                }
                if rank >= self.geo.cluster {
                    self.report(
                        "U0306",
                        format!("multicast mask {mask:#x} names CTA rank {rank}, outside the cluster of {}", self.geo.cluster),
                        inst,
                        Some(g),
                        "bit set for a CTA that does not exist".into(),
                        None,
                        vec![format!("{}: bit i selects the CTA whose %cluster_ctarank is i", cite::reading(4))],
                    );
                    continue;
                }
                let at = |x: Addr| match x.mem {
                    Mem::Shared { alloc, .. } => Addr {
                        mem: Mem::Shared {
                            cta: first + rank,
                            alloc,
                        },
                        off: x.off,
                    },
                    Mem::Global(_) => x,
                };
                let b = match bar {
                    Some((a, _, ph)) => self.slot(g, inst, at(a)).map(|s| (s, ph)),
                    None => None,
                };
                dsts.push(Dst {
                    addr: at(dst),
                    bar: b,
                });
            }
        } else {
            dsts.push(Dst {
                addr: dst,
                bar: bar.map(|(_, s, ph)| (s, ph)),
            });
        }
        self.mbar_issue_use(g, inst, &dsts);
        let (mech, seq) = if variant == Some(Completion::BulkGroup) {
            let t = &mut self.threads[g as usize];
            t.bulk_seq += 1;
            (Mech::BulkGroup, t.bulk_seq)
        } else {
            (Mech::Mbarrier, 0)
        };
        let byte_mask = if p.has(Qual::CpMask) {
            self.operand(inst, "byteMask")
                .map(|a| self.u32_of(g, a) as u16)
        } else {
            None
        };
        let reduce = if p.variant().is_some_and(Variant::reduces) {
            p.qual(Role::RedOp).zip(p.qual(Role::Type))
        } else {
            None
        };
        let id = self.issue(
            g,
            inst,
            Issue {
                mech,
                proxy: self.data_proxy(inst),
                src: Some((src, size)),
                dsts,
                len: size,
                reduce,
                byte_mask,
                data: Vec::new(),
                seq,
                align: 16,
            },
        );
        if mech == Mech::BulkGroup {
            self.threads[g as usize].bulk_uncommitted.push(id);
        }
        let res = self.k.insts[inst].results.first().copied();
        self.set_res(g, res, Val::Token(id));
        self.issue_point();
        Ok(())
    }

    fn red_async(&mut self, g: u32, inst: Inst, p: &PtxOp) -> Result<(), Stop> {
        let (Some(a), Some(b)) = (self.addr_of(g, inst, "a"), self.operand(inst, "b")) else {
            return Err(self.limit(Some(inst), "bad red.async operands".into()));
        };
        let (Some(op), Some(ty)) = (p.qual(Role::RedOp), p.qual(Role::Type)) else {
            return Err(self.limit(Some(inst), "red.async without op and type".into()));
        };
        let width = u64::from(cpflow_ir::spec::type_bytes(ty));
        let value = self.val(g, b).as_u64().to_le_bytes()[..width as usize].to_vec();
        let me = self.threads[g as usize].cta;
        let mut bar = None;
        let mech = if p.qual(Role::Sem) == Some(Qual::Release) {
            Mech::EndOfCta
        } else {
            if a.cta() == Some(me) {
                self.report(
                    "U0305",
                    "`red.async` to the executing CTA's own shared memory".into(),
                    inst,
                    Some(g),
                    "the destination maps to this CTA".into(),
                    None,
                    vec![format!("{}: the destination and mbarrier must belong to a CTA other than the executing one", cite::RED_ASYNC)],
                );
            }
            if let Some(Val::Phase(m, name)) = self.operand(inst, "mbar").map(|x| self.val(g, x)) {
                if m.cta() != a.cta() {
                    self.report(
                        "U0305",
                        "`red.async` destination and mbarrier are in different CTAs".into(),
                        inst,
                        Some(g),
                        "the mbarrier belongs to another CTA than the destination".into(),
                        None,
                        vec![format!(
                            "{}: the destination and the mbarrier must belong to the same CTA",
                            cite::RED_ASYNC
                        )],
                    );
                }
                bar = self
                    .slot(g, inst, m)
                    .map(|s| (s, self.named_phase(s, name)));
            }
            Mech::Mbarrier
        };
        let dsts = vec![Dst { addr: a, bar }];
        self.mbar_issue_use(g, inst, &dsts);
        let id = self.issue(
            g,
            inst,
            Issue {
                mech,
                proxy: self.data_proxy(inst),
                src: None,
                dsts,
                len: width,
                reduce: Some((op, ty)),
                byte_mask: None,
                data: value,
                seq: 0,
                align: width,
            },
        );
        let res = self.k.insts[inst].results.first().copied();
        self.set_res(g, res, Val::Token(id));
        self.issue_point();
        Ok(())
    }

    /// Starts an async op: checks its ranges against memory, in-flight ops,
    /// ordering and proxies, then marks its bytes busy.
    fn issue(&mut self, g: u32, inst: Inst, is: Issue) -> u32 {
        let mut ok = true;
        let what = if is.mech == Mech::Abstract {
            "copy"
        } else {
            "async op"
        };
        let mut src = None;
        if let Some((a, n)) = is.src {
            match self.resolve(
                g,
                inst,
                a,
                n,
                is.align,
                if is.mech == Mech::Abstract {
                    "copy source"
                } else {
                    "async op source"
                },
            ) {
                Some((obj, s)) => src = Some((obj, s, n, a)),
                None => ok = false,
            }
        }
        let mut dsts = Vec::new();
        for d in &is.dsts {
            match self.resolve(
                g,
                inst,
                d.addr,
                is.len,
                is.align,
                if is.mech == Mech::Abstract {
                    "copy destination"
                } else {
                    "async op destination"
                },
            ) {
                Some((obj, s)) => dsts.push((obj, s, d.addr)),
                None => ok = false,
            }
        }
        let id = self.ops.len() as u32;
        let mut op = AsyncOp {
            inst,
            thread: g,
            mech: is.mech,
            proxy: is.proxy,
            src: is.src,
            dsts: is.dsts,
            len: is.len,
            reduce: is.reduce,
            byte_mask: is.byte_mask,
            data: is.data,
            seq: is.seq,
            tracked: Vec::new(),
            pool_pos: 0,
            read_done: is.src.is_none(),
            done: false,
            observed: false,
        };
        if !ok {
            // Not performed: the findings above say why.
            op.done = true;
            op.read_done = true;
            op.observed = true;
            return self.push_op(op);
        }
        let cluster = self.comps.cluster_of_thread(g);
        if let Some((obj, s, n, a)) = src {
            if self.cta_exited(a) {
                self.exited_peer(g, inst, a);
            }
            let s = s as usize;
            let mut unseen = None;
            let mut busy = false;
            let mut unfenced = None;
            let mut cw = (Stamp::INIT, true);
            for i in s..s + n as usize {
                let o = &self.objects[obj];
                busy |= o.busy_w[i] > 0;
                let sh = o.shadow[i];
                if unseen.is_none()
                    && !self
                        .comps
                        .sees_cached(cluster, &self.threads[g as usize].vc, sh.w, &mut cw)
                {
                    unseen = Some(sh);
                }
                if unfenced.is_none()
                    && sem::needs_proxy_fence(Proxy::Generic, is.proxy)
                    && o.cta.is_some()
                    && !sh.w_by_op
                    && sh.w_inst != u32::MAX
                    && !self.fenced(g, sh)
                {
                    unfenced = Some(sh);
                }
            }
            let range = if busy || unseen.is_some() || unfenced.is_some() {
                self.describe_range(obj, s as u64, n)
            } else {
                String::new()
            };
            if busy {
                let other = self.culprit(obj, s as u64, n, true, None).map(|o| {
                    (
                        self.ops[o as usize].inst,
                        "this in-flight op writes them".to_string(),
                    )
                });
                self.report(
                    "U0103",
                    format!("{what} reads bytes an in-flight async op writes"),
                    inst,
                    Some(g),
                    format!("source {range}"),
                    other,
                    vec![format!(
                        "{}: there is no ordering between async ops not synchronised by a wait",
                        cite::ASYNC_COPY
                    )],
                );
            } else if let Some(sh) = unseen {
                self.unseen_write(g, inst, &format!("{what} read"), &range, sh);
            } else if let Some(sh) = unfenced {
                self.unfenced(g, inst, sh, "read of", format!("reads {range}"));
            }
            for b in &mut self.objects[obj].busy_r[s..s + n as usize] {
                *b = b.saturating_add(1);
            }
        }
        for (obj, s, a) in dsts {
            if self.cta_exited(a) {
                self.exited_peer(g, inst, a);
            }
            self.live_mbar_overlap(g, inst, obj, s, is.len);
            let s = s as usize;
            let n = is.len as usize;
            let mut busy = None;
            let mut unseen = None;
            let mut war = None;
            let mut unfenced = None;
            let reduce = is.reduce.is_some();
            // A reduction reads the destination: through the async proxy,
            // the bytes' generic-proxy writer must have fenced them.
            let reads_async = reduce && sem::needs_proxy_fence(Proxy::Generic, is.proxy);
            let (mut cw, mut cr) = ((Stamp::INIT, true), (Stamp::INIT, true));
            for i in s..s + n {
                let o = &self.objects[obj];
                if busy.is_none() && (o.busy_w[i] > 0 || o.busy_r[i] > 0) {
                    busy = Some(o.busy_w[i] > 0);
                }
                let sh = o.shadow[i];
                let vc = &self.threads[g as usize].vc;
                // Reductions commute: one need not be ordered after another.
                let commutes = reduce && sh.w_reduce;
                if unseen.is_none()
                    && !commutes
                    && !self.comps.sees_cached(cluster, vc, sh.w, &mut cw)
                {
                    unseen = Some(sh);
                }
                if war.is_none() && !self.comps.sees_cached(cluster, vc, sh.r, &mut cr) {
                    war = Some(sh);
                }
                if unfenced.is_none()
                    && reads_async
                    && o.cta.is_some()
                    && !sh.w_by_op
                    && sh.w_inst != u32::MAX
                    && !self.fenced(g, sh)
                {
                    unfenced = Some(sh);
                }
            }
            let range = if busy.is_some() || unseen.is_some() || war.is_some() || unfenced.is_some()
            {
                self.describe_range(obj, s as u64, n as u64)
            } else {
                String::new()
            };
            if reduce
                && busy == Some(true)
                && self.only_reductions_in_flight(obj, s as u64, n as u64)
            {
                busy = None;
            }
            if let Some(writes) = busy {
                let other_id = self.culprit(obj, s as u64, n as u64, writes, None);
                let same_group = other_id.is_some_and(|o| {
                    let other = &self.ops[o as usize];
                    let t = &self.threads[g as usize];
                    other.thread == g
                        && (t.uncommitted.contains(&o) || t.bulk_uncommitted.contains(&o))
                });
                let msg = if same_group {
                    format!("two {what}s in one async-group write the same bytes")
                } else if writes {
                    format!("{what} writes bytes another in-flight async op writes")
                } else {
                    format!("{what} writes bytes another in-flight async op reads")
                };
                let other =
                    other_id.map(|o| (self.ops[o as usize].inst, "this in-flight op".to_string()));
                self.report(
                    "U0103",
                    msg,
                    inst,
                    Some(g),
                    format!("destination {range}"),
                    other,
                    vec![format!("{}: two cp.async in one group copying to the same location is UB; no ordering exists between async ops not synchronised by a wait", cite::CP_ASYNC)],
                );
            } else if let Some(sh) = unseen {
                self.unseen_write(g, inst, &format!("{what} write"), &range, sh);
            } else if let Some(sh) = war {
                let other = (sh.r_inst != u32::MAX)
                    .then(|| (Inst::new(sh.r_inst as usize), "read here".to_string()));
                self.report(
                    "U0106",
                    format!("{what} overwrites bytes another thread reads, with no barrier ordering them"),
                    inst,
                    Some(g),
                    format!("destination {range}"),
                    other,
                    vec![],
                );
            } else if let Some(sh) = unfenced {
                self.unfenced(
                    g,
                    inst,
                    sh,
                    "reduction into",
                    format!("reduces into {range}"),
                );
            }
            for b in &mut self.objects[obj].busy_w[s..s + n] {
                *b = b.saturating_add(1);
            }
        }
        let id2 = self.push_op(op);
        debug_assert_eq!(id, id2);
        self.start(id2);
        id2
    }

    /// Whether every in-flight op touching these bytes is a reduction that
    /// only writes them.
    fn only_reductions_in_flight(&self, obj: usize, start: u64, len: u64) -> bool {
        let range = (start as i64, len);
        self.inflight.iter().all(|&id| {
            let op = &self.ops[id as usize];
            let hits = |a: Addr, l: u64| self.obj_index(a.mem) == obj && overlap((a.off, l), range);
            let reads = !op.read_done && op.src.is_some_and(|(a, l)| hits(a, l));
            let writes = !op.done && op.dsts.iter().any(|d| hits(d.addr, op.len));
            !reads && (!writes || op.reduce.is_some())
        })
    }

    fn exited_peer(&mut self, g: u32, inst: Inst, a: Addr) {
        self.report(
            "U0401",
            format!(
                "async op accesses the shared memory of CTA {} after it exited",
                a.cta().unwrap_or(0)
            ),
            inst,
            Some(g),
            "this CTA's shared memory no longer exists".into(),
            None,
            vec![format!(
                "{}: a peer must not exit before the access completes",
                cite::CLUSTER
            )],
        );
    }

    /// U0104: the async proxy reads (`access`: "read of", "reduction into")
    /// bytes whose generic-proxy write `sh` no `fence.proxy.async` orders.
    fn unfenced(&mut self, g: u32, inst: Inst, sh: Shadow, access: &str, label: String) {
        let other = Some((
            Inst::new(sh.w_inst as usize),
            "generic-proxy store here".to_string(),
        ));
        self.report(
            "U0104",
            format!("async-proxy {access} shared memory written through the generic proxy without `fence.proxy.async`"),
            inst,
            Some(g),
            label,
            other,
            vec![format!("{}: the writer must execute `fence.proxy.async` after its store and before the async op is issued (e.g. fence, then a barrier)", cite::ASYNC_PROXY)],
        );
    }

    /// Whether a generic write (`sh`) was followed, in its writer, by a
    /// `fence.proxy.async` covering shared memory that happens before now.
    fn fenced(&self, g: u32, sh: Shadow) -> bool {
        let writer = sh.w.comp / 4;
        if sh.w.comp >= self.comps.total_threads * 4 || sh.w.comp % 4 != PROG {
            return true;
        }
        let cluster = self.comps.cluster_of_thread(g);
        let vc = &self.threads[g as usize].vc;
        self.threads[writer as usize]
            .fences
            .iter()
            .any(|&(seq, epoch, space)| {
                seq > sh.w_seq
                    && space != Some(Qual::Global)
                    && self.comps.sees(
                        cluster,
                        vc,
                        Stamp {
                            comp: self.comps.thread(writer, PROG),
                            epoch,
                        },
                    )
            })
    }

    /// Performs a completion event.
    pub(super) fn complete(&mut self, (id, stage): (u32, Stage)) {
        self.progress += 1;
        let i = id as usize;
        match stage {
            Stage::Read => {
                self.read_source(id);
                let t = self.ops[i].thread;
                self.try_wake(t);
                return;
            }
            Stage::Complete => {
                if self.ops[i].mech == Mech::Arrive {
                    self.fire_arrive(id);
                } else {
                    if !self.ops[i].read_done {
                        self.read_source(id);
                    }
                    self.write_dsts(id);
                }
            }
        }
        self.ops[i].done = true;
        self.finish(id);
        let t = self.ops[i].thread;
        if self.trace.is_some() {
            let (span, track) = (self.k.insts[self.ops[i].inst].span, self.track(id));
            if let Some(r) = &mut self.trace {
                r.complete(id, t, span, track);
            }
        }
        self.try_wake(t);
    }

    /// The stamp an op's accesses carry, for one destination barrier.
    fn op_stamp(&self, id: u32, bar: Option<(u32, i32)>) -> Stamp {
        let op = &self.ops[id as usize];
        match op.mech {
            Mech::Group | Mech::Arrive => Stamp {
                comp: self.comps.thread(op.thread, CPA),
                epoch: op.seq,
            },
            Mech::BulkGroup => Stamp {
                comp: self.comps.thread(op.thread, BULK),
                epoch: op.seq,
            },
            Mech::Mbarrier => match bar {
                Some((slot, _)) => Stamp {
                    comp: self.comps.mbar(slot),
                    epoch: self.mbars[slot as usize].phase + 1,
                },
                None => Stamp {
                    comp: NEVER,
                    epoch: 1,
                },
            },
            Mech::EndOfCta => Stamp {
                comp: NEVER,
                epoch: 1,
            },
            Mech::Abstract => Stamp {
                comp: self.comps.thread(op.thread, PROG),
                epoch: self.epoch(op.thread),
            },
        }
    }

    fn read_source(&mut self, id: u32) {
        let i = id as usize;
        if self.ops[i].read_done {
            return;
        }
        self.ops[i].read_done = true;
        let Some((a, n)) = self.ops[i].src else {
            return;
        };
        if n == 0 {
            return;
        }
        let obj = self.obj_index(a.mem);
        let s = a.off as usize;
        let n = n as usize;
        let mut stamp = self.op_stamp(id, self.ops[i].dsts.first().and_then(|d| d.bar));
        if self.ops[i].mech == Mech::BulkGroup {
            stamp.comp = self.comps.thread(self.ops[i].thread, BULKR);
        }
        let (op_inst, thread) = (self.ops[i].inst, self.ops[i].thread);
        let mask = self.ops[i].byte_mask;
        self.unwritten_shared(thread, op_inst, obj, (s, s + n), mask, "async read of");
        let inst = op_inst.index() as u32;
        let o = &mut self.objects[obj];
        self.ops[i].data = o.data[s..s + n].to_vec();
        for j in s..s + n {
            o.busy_r[j] = o.busy_r[j].saturating_sub(1);
            o.shadow[j].r = stamp;
            o.shadow[j].r_inst = inst;
        }
    }

    fn write_dsts(&mut self, id: u32) {
        let i = id as usize;
        let dsts = self.ops[i].dsts.clone();
        let len = self.ops[i].len as usize;
        let mut data = std::mem::take(&mut self.ops[i].data);
        data.resize(len, 0);
        let reduce = self.ops[i].reduce;
        let mask = self.ops[i].byte_mask;
        let (inst, thread) = (self.ops[i].inst, self.ops[i].thread);
        let by_op = self.ops[i].mech != Mech::Abstract;
        let async_proxy = self.ops[i].proxy == Proxy::Async;
        let seq = self.threads[thread as usize].seq;
        for d in dsts {
            let stamp = self.op_stamp(id, d.bar);
            let obj = self.obj_index(d.addr.mem);
            let s = d.addr.off as usize;
            let dead = self.cta_exited(d.addr);
            if reduce.is_some() {
                self.unwritten_shared(thread, inst, obj, (s, s + len), None, "reduction into");
            }
            let o = &mut self.objects[obj];
            if !dead {
                match reduce {
                    Some((op, ty)) => {
                        let w = cpflow_ir::spec::type_bytes(ty) as usize;
                        for e in (0..len).step_by(w.max(1)) {
                            let end = (e + w).min(len);
                            let r = arith::reduce(op, ty, &o.data[s + e..s + end], &data[e..end]);
                            o.data[s + e..s + end].copy_from_slice(&r[..end - e]);
                        }
                    }
                    None => {
                        for (j, b) in data.iter().enumerate() {
                            if mask.is_none_or(|m| m & (1 << (j % 16)) != 0) {
                                o.data[s + j] = *b;
                            }
                        }
                    }
                }
            }
            for j in s..s + len {
                o.busy_w[j] = o.busy_w[j].saturating_sub(1);
                if mask.is_some_and(|m| m & (1 << ((j - s) % 16)) == 0) {
                    continue;
                }
                let sh = &mut o.shadow[j];
                sh.w = stamp;
                sh.w_inst = inst.index() as u32;
                sh.w_seq = seq;
                sh.w_async = async_proxy;
                sh.w_by_op = by_op;
                sh.w_reduce = reduce.is_some();
            }
            if let Some((slot, ph)) = d.bar {
                self.complete_tx(thread, inst, slot, ph, len as i64, id);
            }
        }
        self.ops[i].data = data;
    }

    // ------------------------------------------------------------------
    // mbarriers.

    /// Checks that an mbarrier is live and its init is visible to `g`
    /// (U0204). For a peer CTA's mbarrier that means ordered before at
    /// cluster scope: a thread's clock learns about another CTA's events
    /// only through cluster-scope synchronisation (`barrier.cluster`, and
    /// `.cluster` mbarrier release/acquire, see [`Mbar`]), so seeing the
    /// init's stamp is exactly that (PTX ISA 9.7.13.15,
    /// "unpublished init"; docs/readings.md #21).
    fn mbar_use(&mut self, g: u32, inst: Inst, slot: u32) -> bool {
        let owner = self.slot_cta(slot);
        let peer = owner != self.threads[g as usize].cta;
        let peer_note = || {
            format!("{}: this is CTA {owner}'s mbarrier; peers need a cluster-scope release->acquire path from its init (`fence.mbarrier_init.release.cluster` or a release `barrier.cluster.arrive`, then `barrier.cluster.wait`); `barrier.cta` orders only one CTA", cite::MBARRIER)
        };
        if peer && self.ctas[owner as usize].done {
            self.report(
                "U0401",
                format!("mbarrier operation on CTA {owner}'s mbarrier after that CTA exited"),
                inst,
                Some(g),
                "this CTA's shared memory no longer exists".into(),
                None,
                vec![format!(
                    "{}: a peer must not exit while others still access its shared memory (end with a cluster barrier)",
                    cite::CLUSTER
                )],
            );
            return false;
        }
        let m = &self.mbars[slot as usize];
        match m.life {
            Life::Live => {}
            life => {
                let (msg, other) = if life == Life::Uninit {
                    ("use of an uninitialised mbarrier", None)
                } else {
                    (
                        "use of an invalidated mbarrier",
                        m.init_inst
                            .map(|i| (i, "it was initialised here, then invalidated".to_string())),
                    )
                };
                let mut notes = vec![format!(
                    "{}: a non-init mbarrier op on memory with no valid mbarrier is UB",
                    cite::MBARRIER
                )];
                if peer {
                    notes.push(peer_note());
                }
                self.report(
                    "U0204",
                    msg.into(),
                    inst,
                    Some(g),
                    "no valid mbarrier object here".into(),
                    other,
                    notes,
                );
                return false;
            }
        }
        let cluster = self.comps.cluster_of_thread(g);
        if !self
            .comps
            .sees(cluster, &self.threads[g as usize].vc, m.init_stamp)
        {
            let other = m.init_inst.map(|i| (i, "initialised here".to_string()));
            let (msg, label, note) = if peer {
                (
                    "use of a peer CTA's mbarrier whose `init` is not ordered before this use at cluster scope",
                    "no cluster-scope release/acquire orders the peer's init before this use",
                    peer_note(),
                )
            } else {
                (
                    "use of an mbarrier whose `init` is not visible to this thread",
                    "no barrier or release/acquire orders the init before this use",
                    format!("{}: publish the init (barrier.cta, or fence.mbarrier_init + cluster barrier) first", cite::MBARRIER),
                )
            };
            self.report(
                "U0204",
                msg.into(),
                inst,
                Some(g),
                label.into(),
                other,
                vec![note],
            );
        }
        true
    }

    /// Issuing an op that completes on mbarriers (complete-tx) is a use of
    /// each of them by the issuing thread: the init must be ordered before
    /// the issue, at cluster scope for a peer CTA's mbarrier (multicast,
    /// `.shared::cluster` destinations, `red.async`). The issue is the last
    /// point the issuer can order; its completion is not a thread's
    /// (PTX ISA 9.7.13.15; docs/readings.md #23).
    fn mbar_issue_use(&mut self, g: u32, inst: Inst, dsts: &[Dst]) {
        for slot in dsts.iter().filter_map(|d| d.bar.map(|(s, _)| s)) {
            self.mbar_use(g, inst, slot);
        }
    }

    fn count_range(&mut self, g: u32, inst: Inst, slot: u32, what: &str) {
        let m = &self.mbars[slot as usize];
        let v = if what == "tx-count" { m.tx } else { m.pending };
        self.report(
            "U0201",
            format!("mbarrier {what} {v} leaves its range"),
            inst,
            Some(g),
            format!("must stay within [-{COUNT_MAX}, {COUNT_MAX}]"),
            m.init_inst
                .map(|i| (i, "mbarrier initialised here".to_string())),
            vec![format!(
                "{}: a negative tx-count within range is legal; leaving the range is UB",
                cite::reading(11)
            )],
        );
    }

    fn phase_mismatch(&mut self, g: u32, inst: Inst, slot: u32, named: i32, what: &str) {
        let cur = self.mbars[slot as usize].phase;
        if i64::from(named) == i64::from(cur) {
            return;
        }
        self.report(
            "U0210",
            format!("{what} lands in phase {cur}, but the IR names phase {named}"),
            inst,
            Some(g),
            format!("the mbarrier is in phase {cur}"),
            self.mbars[slot as usize].init_inst.map(|i| (i, "mbarrier initialised here".to_string())),
            vec![format!("{}: expected and completed bytes differ, so a phase completed early or late and this lands in another phase", cite::reading(11))],
        );
    }

    fn expect_tx(&mut self, g: u32, inst: Inst, slot: u32, n: i64) {
        let m = &mut self.mbars[slot as usize];
        m.tx += n;
        m.note_tx(inst, n);
        if m.tx.abs() > COUNT_MAX {
            self.count_range(g, inst, slot, "tx-count");
        }
    }

    /// An arrive-on of `count` by thread `g`, releasing at the given scope
    /// unless `.relaxed` (`None`).
    fn arrive_on(
        &mut self,
        g: u32,
        inst: Inst,
        slot: u32,
        named: i32,
        count: i64,
        release: Option<Scope>,
    ) {
        self.phase_mismatch(g, inst, slot, named, "this arrival");
        if count > self.mbars[slot as usize].pending {
            let m = &self.mbars[slot as usize];
            self.report(
                "U0207",
                format!(
                    "{count} arrival{} on an mbarrier with {} pending",
                    if count == 1 { "" } else { "s" },
                    m.pending
                ),
                inst,
                Some(g),
                "more arrivals than the phase expects".into(),
                m.init_inst
                    .map(|i| (i, "mbarrier initialised here".to_string())),
                vec![format!(
                    "{}: the pending count cannot go below 0",
                    cite::MBARRIER
                )],
            );
        }
        if let Some(scope) = release {
            let local = self.threads[g as usize].cta == self.slot_cta(slot);
            let vc = std::mem::take(&mut self.threads[g as usize].vc);
            let m = &mut self.mbars[slot as usize];
            if local {
                clock::join(&mut m.cur_vc, &vc);
            } else if sem::scope_includes(local, scope) {
                clock::join(&mut m.cur_peer_vc, &vc);
            }
            self.threads[g as usize].vc = vc;
            self.bump(g);
        }
        let m = &mut self.mbars[slot as usize];
        m.pending = (m.pending - count).max(0);
        self.maybe_complete_phase(slot, inst);
    }

    fn complete_tx(&mut self, g: u32, inst: Inst, slot: u32, named: i32, bytes: i64, id: u32) {
        if self.mbars[slot as usize].life != Life::Live {
            let life = self.mbars[slot as usize].life;
            self.report(
                "U0204",
                format!(
                    "async op completes on an {} mbarrier",
                    if life == Life::Uninit {
                        "uninitialised"
                    } else {
                        "invalidated"
                    }
                ),
                inst,
                Some(g),
                "its complete-tx finds no valid mbarrier".into(),
                None,
                vec![format!(
                    "{}: use before init / after inval includes in-flight completions",
                    cite::MBARRIER
                )],
            );
            return;
        }
        self.phase_mismatch(g, inst, slot, named, "this op's complete-tx");
        let m = &mut self.mbars[slot as usize];
        m.tx -= bytes;
        m.note_tx(inst, -bytes);
        m.cur_ops.push(id);
        if m.tx.abs() > COUNT_MAX {
            self.count_range(g, inst, slot, "tx-count");
        }
        self.maybe_complete_phase(slot, inst);
    }

    fn fire_arrive(&mut self, id: u32) {
        let i = id as usize;
        let (g, inst) = (self.ops[i].thread, self.ops[i].inst);
        let Some((slot, ph)) = self.ops[i].dsts.first().and_then(|d| d.bar) else {
            return;
        };
        if self.mbars[slot as usize].life != Life::Live {
            self.report(
                "U0204",
                "`cp.async.mbarrier.arrive` fires on an mbarrier that is no longer valid".into(),
                inst,
                Some(g),
                "its arrive-on finds no valid mbarrier".into(),
                None,
                vec![],
            );
            return;
        }
        self.phase_mismatch(g, inst, slot, ph, "this async arrival");
        let comp = self.comps.thread(g, CPA);
        let seq = self.ops[i].seq;
        let tracked = self.ops[i].tracked.clone();
        let comps = self.comps;
        let m = &mut self.mbars[slot as usize];
        comps.raise(&mut m.cur_vc, comp, seq);
        m.cur_ops.extend(tracked);
        if m.pending < 1 {
            let init = m.init_inst;
            self.report(
                "U0207",
                "async arrival on an mbarrier with no pending arrivals".into(),
                inst,
                Some(g),
                "more arrivals than the phase expects".into(),
                init.map(|i| (i, "mbarrier initialised here".to_string())),
                vec![format!(
                    "{}: with `.noinc`, init must count the async arrival",
                    cite::MBARRIER_CP_ASYNC_ARRIVE
                )],
            );
        }
        let m = &mut self.mbars[slot as usize];
        m.pending = (m.pending - 1).max(0);
        self.maybe_complete_phase(slot, inst);
    }

    /// Completes the current phase when its pending count and tx-count
    /// are both zero; `inst` is the arrival or complete-tx that got here.
    fn maybe_complete_phase(&mut self, slot: u32, inst: Inst) {
        let comps = self.comps;
        let m = &mut self.mbars[slot as usize];
        if m.life != Life::Live || !sem::phase_completes(m.pending, m.tx) {
            return;
        }
        comps.raise(&mut m.cur_vc, comps.mbar(slot), m.phase + 1);
        std::mem::swap(&mut m.prev_vc, &mut m.cur_vc);
        m.cur_vc.iter_mut().for_each(|x| *x = 0);
        std::mem::swap(&mut m.prev_peer_vc, &mut m.cur_peer_vc);
        m.cur_peer_vc.iter_mut().for_each(|x| *x = 0);
        m.prev_ops = std::mem::take(&mut m.cur_ops);
        m.completed_by = Some(inst);
        m.phase += 1;
        m.pending = m.expected;
        m.tx = 0;
        m.tx_sites.clear();
        let done = m.phase - 1;
        if let Some(r) = &mut self.trace {
            r.phase(slot, done);
        }
        let waiters = std::mem::take(&mut m.waiters);
        for w in waiters {
            self.try_wake(w);
        }
    }

    /// `test_wait.parity`/`try_wait.parity` on phase `k`: by parity, True iff
    /// it names the immediately preceding phase (PTX ISA 9.7.13.15).
    fn observe_phase(
        &mut self,
        g: u32,
        inst: Inst,
        slot: u32,
        k: i32,
        acquire: Option<Scope>,
    ) -> bool {
        if !self.mbar_use(g, inst, slot) {
            return true;
        }
        let c = i64::from(self.mbars[slot as usize].phase);
        let k64 = i64::from(k);
        let window = sem::phase_window(c, k64);
        if let PhaseWindow::Lagging(d) = window {
            self.report(
                "U0203",
                format!("wait on phase {k}, but the mbarrier is already in phase {c}"),
                inst,
                Some(g),
                format!("lags {d} phases behind"),
                self.mbars[slot as usize].completed_by.map(|i| (i, format!("completed phase {}, past the one this wait names, before the wait", c - 1))),
                vec![format!("{}: waits are valid only for the current or the immediately preceding phase; by parity this observes another phase", cite::MBARRIER_WAIT)],
            );
        } else if let PhaseWindow::Future(_) = window {
            self.report(
                "U0203",
                format!("wait on phase {k}, but the mbarrier is only in phase {c}"),
                inst,
                Some(g),
                "waits on a future phase".into(),
                self.mbars[slot as usize].init_inst.map(|i| (i, "mbarrier initialised here".to_string())),
                vec![format!("{}: waits are valid only for the current or the immediately preceding phase; by parity this observes another phase", cite::MBARRIER_WAIT)],
            );
        }
        let done = sem::parity_wait_returns(c, k64);
        if done {
            self.acquire_phase(g, slot, acquire);
        }
        done
    }

    /// A wait that returned True observes the completed phase; unless
    /// `.relaxed` it acquires what the phase released at a scope that
    /// includes the waiter (peers' releases only at `.cluster`).
    fn acquire_phase(&mut self, g: u32, slot: u32, acquire: Option<Scope>) {
        let m = &self.mbars[slot as usize];
        if let Some(scope) = acquire {
            let vc = &mut self.threads[g as usize].vc;
            clock::join(vc, &m.prev_vc);
            if sem::scope_includes(false, scope) {
                clock::join(vc, &m.prev_peer_vc);
            }
        }
        let ops = m.prev_ops.clone();
        for id in ops {
            self.ops[id as usize].observed = true;
        }
    }

    // ------------------------------------------------------------------
    // Async-groups.

    fn commit(&mut self, g: u32, bulk: bool) -> u32 {
        let t = &mut self.threads[g as usize];
        let (ops, last_seq, groups) = if bulk {
            (
                std::mem::take(&mut t.bulk_uncommitted),
                t.bulk_seq,
                &mut t.bulk_groups,
            )
        } else {
            (std::mem::take(&mut t.uncommitted), t.cp_seq, &mut t.groups)
        };
        groups.push(Group { ops, last_seq });
        groups.len() as u32
    }

    fn groups_complete(&self, g: u32, bulk: bool, read: bool, upto: u32) -> bool {
        let t = &self.threads[g as usize];
        let groups = if bulk { &t.bulk_groups } else { &t.groups };
        let from = if bulk {
            if read {
                t.bulk_read_done
            } else {
                t.bulk_done
            }
        } else {
            t.groups_done
        };
        groups.iter().take(upto as usize).skip(from).all(|gr| {
            gr.ops.iter().all(|&id| {
                let op = &self.ops[id as usize];
                if read {
                    op.read_done
                } else {
                    op.done
                }
            })
        })
    }

    fn wait_groups(&mut self, g: u32, inst: Inst, bulk: bool, read: bool, upto: u32) -> Flow {
        if self.groups_complete(g, bulk, read, upto) {
            self.finish_group_wait(g, bulk, read, upto);
        } else {
            self.threads[g as usize].state =
                State::Blocked(Block::Groups { bulk, read, upto }, inst);
        }
        Flow::Next
    }

    /// A group wait returns: its ops are observed and (except `.read`)
    /// their writes become visible to the thread.
    fn finish_group_wait(&mut self, g: u32, bulk: bool, read: bool, upto: u32) {
        let t = &mut self.threads[g as usize];
        let groups = if bulk { &t.bulk_groups } else { &t.groups };
        let upto = (upto as usize).min(groups.len());
        let from = if bulk {
            if read {
                t.bulk_read_done
            } else {
                t.bulk_done
            }
        } else {
            t.groups_done
        };
        let last = if upto > 0 {
            groups[upto - 1].last_seq
        } else {
            0
        };
        let ids: Vec<u32> = groups[from.min(upto)..upto]
            .iter()
            .flat_map(|gr| gr.ops.iter().copied())
            .collect();
        if bulk {
            if read {
                t.bulk_read_done = t.bulk_read_done.max(upto);
            } else {
                t.bulk_done = t.bulk_done.max(upto);
                t.bulk_read_done = t.bulk_read_done.max(upto);
            }
        } else {
            t.groups_done = t.groups_done.max(upto);
        }
        for id in ids {
            self.ops[id as usize].observed = true;
        }
        let kind = match (bulk, read) {
            (false, _) => CPA,
            (true, false) => BULK,
            (true, true) => BULKR,
        };
        let comp = self.comps.thread(g, kind);
        self.acquire_comp(g, comp, last);
        if bulk && !read {
            let comp = self.comps.thread(g, BULKR);
            self.acquire_comp(g, comp, last);
        }
    }

    fn observe_op(&mut self, g: u32, id: u32) {
        self.ops[id as usize].observed = true;
        let stamp = self.op_stamp(id, None);
        if self.ops[id as usize].mech != Mech::Mbarrier {
            self.acquire_comp(g, stamp.comp, stamp.epoch);
        }
    }

    /// Re-checks a blocked thread's condition; makes it ready when it holds.
    pub(super) fn try_wake(&mut self, g: u32) {
        let State::Blocked(b, _) = self.threads[g as usize].state else {
            return;
        };
        let ok = match b {
            Block::Groups { bulk, read, upto } => {
                let ok = self.groups_complete(g, bulk, read, upto);
                if ok {
                    self.finish_group_wait(g, bulk, read, upto);
                }
                ok
            }
            Block::Phase { slot, parity } => {
                // The wait instruction runs again and acquires then.
                let ok = sem::parity_wait_returns(
                    i64::from(self.mbars[slot as usize].phase),
                    i64::from(parity),
                );
                if !ok && !self.mbars[slot as usize].waiters.contains(&g) {
                    self.mbars[slot as usize].waiters.push(g);
                }
                ok
            }
            Block::Op(id) => {
                let ok = self.ops[id as usize].done;
                if ok {
                    self.observe_op(g, id);
                }
                ok
            }
            // Woken by progress (`Machine::wake_spinners`).
            Block::CtaBarrier { .. } | Block::ClusterWait(_) | Block::Spin { .. } => false,
        };
        if ok {
            self.threads[g as usize].state = State::Ready;
            self.ready.push(g);
        }
    }

    // ------------------------------------------------------------------
    // Barriers.

    /// Thread `g` arrives at barrier `id` of its CTA with a thread count
    /// (`None`: every thread of the CTA), releasing its accesses, and with
    /// `wait` blocks until the generation completes (docs/readings.md #25).
    fn cta_barrier(&mut self, g: u32, inst: Inst, id: u32, count: Option<u32>, wait: bool) {
        let cta = self.threads[g as usize].cta;
        let bad_count = count.is_some_and(|n| n == 0 || n % 32 != 0 || n > self.geo.threads);
        if id >= CTA_BARRIERS || bad_count {
            let what = if id >= CTA_BARRIERS {
                format!("barrier id {id} is outside 0..{}", CTA_BARRIERS - 1)
            } else {
                format!(
                    "thread count {} is not a positive multiple of 32 up to the CTA's {} threads",
                    count.unwrap_or(0),
                    self.geo.threads
                )
            };
            self.report(
                "U0404",
                what,
                inst,
                Some(g),
                "this barrier".into(),
                None,
                vec![],
            );
            return;
        }
        let bar = &self.ctas[cta as usize].bars[id as usize];
        if let (Some(had), Some(n)) = (bar.count, count) {
            if had != n {
                self.report(
                    "U0404",
                    format!("barrier {id} arrived at with thread count {n}, but this generation counts {had}"),
                    inst,
                    Some(g),
                    "a different count".into(),
                    None,
                    vec![],
                );
            }
        }
        let vc = std::mem::take(&mut self.threads[g as usize].vc);
        let bar = &mut self.ctas[cta as usize].bars[id as usize];
        clock::join(&mut bar.vc, &vc);
        bar.count = bar.count.or(count);
        bar.arrived += 1;
        let gen = bar.gen;
        self.threads[g as usize].vc = vc;
        self.bump(g);
        if wait {
            self.threads[g as usize].state = State::Blocked(Block::CtaBarrier { id, gen }, inst);
        }
        self.check_cta_barrier(cta, id);
    }

    /// Completes the generation of barrier `id` of `cta` once its count is
    /// reached: every waiter acquires the arrivers' releases.
    pub(super) fn check_cta_barrier(&mut self, cta: u32, id: u32) {
        let c = &self.ctas[cta as usize];
        let bar = &c.bars[id as usize];
        if bar.arrived == 0 || bar.arrived < bar.count.unwrap_or(c.live) {
            return;
        }
        let gen = bar.gen;
        let vc = std::mem::take(&mut self.ctas[cta as usize].bars[id as usize].vc);
        let first = cta * self.geo.threads;
        for g in first..first + self.geo.threads {
            let t = &mut self.threads[g as usize];
            if matches!(t.state, State::Blocked(b, _) if b == (Block::CtaBarrier { id, gen })) {
                clock::join(&mut t.vc, &vc);
                t.state = State::Ready;
                self.ready.push(g);
            }
        }
        let bar = &mut self.ctas[cta as usize].bars[id as usize];
        bar.vc = vec![0; vc.len()];
        bar.gen += 1;
        bar.arrived = 0;
        bar.count = None;
    }

    pub(super) fn check_cluster_barrier(&mut self, cl: u32) {
        let c = &self.clusters[cl as usize];
        if c.arrived == 0 || c.arrived < c.live {
            return;
        }
        let c = &mut self.clusters[cl as usize];
        c.done_vc = std::mem::replace(&mut c.vc, vec![0; c.done_vc.len()]);
        c.phase += 1;
        c.arrived = 0;
        let waiters = std::mem::take(&mut c.waiters);
        for g in waiters {
            let t = &mut self.threads[g as usize];
            if let State::Blocked(Block::ClusterWait(p), _) = t.state {
                if self.clusters[cl as usize].phase > p {
                    clock::join(&mut t.vc, &self.clusters[cl as usize].done_vc);
                    t.state = State::Ready;
                    self.ready.push(g);
                } else {
                    self.clusters[cl as usize].waiters.push(g);
                }
            }
        }
    }
}

/// Little-endian bytes as a value of type `s`.
fn decode(s: Scalar, bytes: &[u8]) -> Val {
    let mut a = [0u8; 8];
    a[..bytes.len()].copy_from_slice(bytes);
    let x = u64::from_le_bytes(a);
    match s {
        Scalar::I1 => Val::Int(x & 1),
        Scalar::F32 => Val::F32(f32::from_bits(x as u32)),
        Scalar::F64 => Val::F64(f64::from_bits(x)),
        _ => Val::Int(x),
    }
}
