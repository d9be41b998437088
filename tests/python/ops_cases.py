"""Every torch.distributed operation the "cdt" backend implements, on inputs every rank can
recompute for every other: worker.py's "ops" mode runs them on one backend and prints what each
gave; tests/python/test_ops.py compares "cdt" with Gloo and with the fold computed here.

A case's value is {"out": result as nested lists} or {"error": message}; "oracle" is what the
operation must give, computed on one rank by folding every rank's input in rank order in the
tensor's own dtype (floats may differ from it by rounding: a ring adds in another order)."""
import torch
import torch.distributed as dist

DTYPES = {
    "f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
    "i32": torch.int32, "i64": torch.int64, "i16": torch.int16, "i8": torch.int8, "u8": torch.uint8,
    "bool": torch.bool,
}
FLOATS = {"f32", "f64", "f16", "bf16"}
R = dist.ReduceOp
OPS = {"sum": R.SUM, "avg": R.AVG, "prod": R.PRODUCT, "min": R.MIN, "max": R.MAX,
       "band": R.BAND, "bor": R.BOR, "bxor": R.BXOR}


def applies(op, dt):
    if op in ("band", "bor", "bxor"):
        return dt not in FLOATS
    return not (op == "avg" and dt == "bool")


def value(rank, dt, n=7):
    """Rank `rank`'s input: small values whose products over five ranks fit f16; integer sums and
    products wrap in int8/uint8 (torch wraps too)."""
    k = torch.arange(n)
    if dt in FLOATS:
        return (k * 0.37 + rank * 1.5 - 2.0).to(DTYPES[dt])
    if dt == "bool":
        return (k + rank) % 3 == 0
    if dt == "u8":
        return ((k * 5 + rank * 3) % 11).to(torch.uint8)
    return ((k + rank * 3) % 7 - 3).to(DTYPES[dt])


def fold(op, dt, world):
    """The reduction of every rank's value(), folded in rank order in the dtype."""
    acc = value(0, dt).clone()
    for r in range(1, world):
        x = value(r, dt)
        if dt == "bool":
            if op in ("sum", "max", "bor"):
                acc = acc | x
            elif op in ("prod", "min", "band"):
                acc = acc & x
            else:
                acc = acc ^ x
            continue
        acc = {"sum": lambda a: a + x, "avg": lambda a: a + x, "prod": lambda a: a * x,
               "min": lambda a: torch.minimum(a, x), "max": lambda a: torch.maximum(a, x),
               "band": lambda a: a & x, "bor": lambda a: a | x, "bxor": lambda a: a ^ x}[op](acc)
    if op == "avg":
        acc = acc / world if dt in FLOATS else torch.div(acc, world, rounding_mode="trunc")
        acc = acc.to(DTYPES[dt])
    return acc


def code(src, dst, rows):
    """`rows` x 2 floats naming who sent them to whom (the all-to-all cases' payload)."""
    return torch.tensor([[src * 100 + dst + 0.25 * i, -float(i)] for i in range(rows)]).view(rows, 2)


def run(out, name, f):
    try:
        out[name] = {"out": f()}
    except Exception as e:  # noqa: BLE001  (Gloo refuses some cases with ValueError)
        out[name] = {"error": f"{type(e).__name__}: {e}"}


def tolist(t):
    return t.float().tolist() if t.dtype == torch.bfloat16 else t.tolist()


def reductions(rank, world, out):
    root = world - 1
    for dt in DTYPES:
        for op in OPS:
            if not applies(op, dt):
                continue

            def all_reduce():
                t = value(rank, dt).clone()
                dist.all_reduce(t, op=OPS[op])
                return tolist(t)

            def reduce():
                t = value(rank, dt).clone()
                dist.reduce(t, dst=root, op=OPS[op])
                return tolist(t)  # off the root: the input, unchanged

            run(out, f"all_reduce/{dt}/{op}", all_reduce)
            run(out, f"reduce/{dt}/{op}", reduce)
            out[f"all_reduce/{dt}/{op}"]["oracle"] = tolist(fold(op, dt, world))
            out[f"reduce/{dt}/{op}"]["oracle"] = tolist(
                fold(op, dt, world) if rank == root else value(rank, dt))

    def cplx(r):
        return torch.complex(value(r, "f32"), -2 * value(r, "f32"))

    def complex_sum():  # torch hands the backend the real view
        t = cplx(rank)
        dist.all_reduce(t)
        return torch.view_as_real(t).tolist()

    run(out, "all_reduce/f32/complex_sum", complex_sum)
    acc = torch.view_as_real(cplx(0)).clone()
    for r in range(1, world):
        acc += torch.view_as_real(cplx(r))
    out["all_reduce/f32/complex_sum"]["oracle"] = acc.tolist()


def movement(rank, world, out):
    """Data movement: bitwise on every backend (results carry sender and receiver)."""
    def gather():
        mine = value(rank, "bf16").view(7, 1)
        lst = [torch.zeros(7, 1, dtype=torch.bfloat16) for _ in range(world)] if rank == 0 else None
        dist.gather(mine, lst, dst=0)
        return [tolist(t) for t in lst] if lst else None

    def scatter():
        root = world // 2
        lst = [value(r, "i64") for r in range(world)] if rank == root else None
        o = torch.zeros(7, dtype=torch.int64)
        dist.scatter(o, lst, src=root)
        return o.tolist()

    def all_to_all_single_uneven():  # rank r sends (r + p) % 3 rows to rank p
        send = [(rank + p) % 3 for p in range(world)]
        recv = [(p + rank) % 3 for p in range(world)]
        inp = torch.cat([code(rank, p, send[p]) for p in range(world)])
        o = torch.full((sum(recv), 2), -1.0)
        dist.all_to_all_single(o, inp, recv, send)
        return o.tolist()

    def all_to_all_single_even():
        inp = torch.arange(world * 3, dtype=torch.int32) + 1000 * rank
        o = torch.zeros(world * 3, dtype=torch.int32)
        dist.all_to_all_single(o, inp)
        return o.tolist()

    def all_to_all_single_large():  # 32-48 KiB blocks: the node's single-copy path, issue 42
        def rows(src, dst):
            return 4096 + 1024 * ((src + dst) % 3)
        inp = torch.cat([code(rank, p, rows(rank, p)) for p in range(world)])
        want = torch.cat([code(p, rank, rows(p, rank)) for p in range(world)])
        o = torch.full_like(want, -1.0)
        dist.all_to_all_single(o, inp, [rows(p, rank) for p in range(world)],
                               [rows(rank, p) for p in range(world)])
        return bool(torch.equal(o, want))

    def all_to_all_list():  # tensors of different sizes per peer
        inp = [code(rank, p, p + 1) for p in range(world)]
        o = [torch.zeros(rank + 1, 2) for _ in range(world)]
        dist.all_to_all(o, inp)
        return [t.tolist() for t in o]

    def all_gather_into_tensor():
        o = torch.zeros(world * 4, dtype=torch.int8)
        dist.all_gather_into_tensor(o, torch.arange(4, dtype=torch.int8) + rank)
        return o.tolist()

    def reduce_scatter_tensor():
        o = torch.zeros(3)
        dist.reduce_scatter_tensor(o, torch.arange(world * 3, dtype=torch.float32) * (rank + 1))
        return o.tolist()

    def all_gather_coalesced():
        inp = [torch.full((2,), rank, dtype=torch.int16), torch.arange(3, dtype=torch.int16) + rank]
        o = [[torch.zeros(2, dtype=torch.int16), torch.zeros(3, dtype=torch.int16)]
             for _ in range(world)]
        dist.all_gather_coalesced(o, inp)
        return [[t.tolist() for t in lst] for lst in o]

    def all_reduce_coalesced():
        ts = [torch.full((2, 2), float(rank)), torch.arange(3.0) * rank]
        dist.all_reduce_coalesced(ts)
        return [t.tolist() for t in ts]

    def objects():
        got = [None] * world if rank == 0 else None
        dist.gather_object({"r": rank}, got, dst=0)
        lst = [{"to": r} for r in range(world)] if rank == 0 else None
        mine = [None]
        dist.scatter_object_list(mine, lst, src=0)
        b = [f"from {rank}"]
        dist.broadcast_object_list(b, src=world - 1)
        return [got, mine, b]

    def p2p_tags_any_source():  # tags, a recv from any source, isend/irecv and batched rings
        if world == 1:
            return None
        got = None
        if rank == 0:  # each peer's tag 2 first, from whoever comes; then tag 1 by name
            anys = []
            for _ in range(world - 1):
                t = torch.zeros(2, dtype=torch.int64)
                src = dist.recv(t, tag=2)
                anys.append([src, t.tolist()])
            tagged = []
            for p in reversed(range(1, world)):
                t = torch.zeros(2, dtype=torch.int64)
                dist.recv(t, src=p, tag=1)
                tagged.append(t.tolist())
            got = [sorted(anys), tagged]
        else:
            for w in [dist.isend(torch.tensor([rank, tag]), 0, tag=tag) for tag in (1, 2)]:
                w.wait()
        o = torch.zeros(3, dtype=torch.uint8)
        works = [dist.isend(torch.full((3,), rank, dtype=torch.uint8), (rank + 1) % world, tag=5),
                 dist.irecv(o, src=(rank - 1) % world, tag=5)]
        for w in works:
            w.wait()
        # The same ring the other way round, as torch's batch_isend_irecv posts it.
        b = torch.zeros(2, dtype=torch.float64)
        ops = [dist.P2POp(dist.isend, torch.full((2,), float(rank), dtype=torch.float64),
                          (rank - 1) % world, tag=6),
               dist.P2POp(dist.irecv, b, (rank + 1) % world, tag=6)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return [got, o.tolist(), b.tolist()]

    def subgroup():  # the even ranks in a group of their own, created on every rank
        members = list(range(0, world, 2))
        g = dist.new_group(members)
        # torch 1.13's new_group ends in a store-based barrier that a rank may leave, finish
        # and exit (taking the TCPStore it hosts) while another still polls: meet first.
        dist.barrier()
        if rank not in members:
            return None
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t, group=g)
        lst = [torch.zeros(1) for _ in members]
        dist.all_gather(lst, torch.tensor([float(rank)]), group=g)
        return [t.tolist(), [x.tolist() for x in lst]]

    for name, f in list(locals().items()):
        if callable(f):
            run(out, name, f)


def torch2(rank, world, out):
    """PyTorch 2.x's additions: PREMUL_SUM (its factor a number or a one-element tensor) in
    all_reduce, reduce and reduce_scatter_tensor, and all_gather_into_tensor and
    reduce_scatter_tensor coalesced by torch's _coalescing_manager (what FSDP2 calls)."""
    root = world - 1
    for dt in sorted(FLOATS):
        for kind in ("number", "tensor"):
            factor = 0.5 if kind == "number" else torch.tensor([0.25], dtype=DTYPES[dt])
            scale = 0.5 if kind == "number" else 0.25
            op = dist._make_nccl_premul_sum(factor)
            total = fold("sum", dt, world).double() * scale

            def all_reduce():
                t = value(rank, dt).clone()
                dist.all_reduce(t, op=op)
                return tolist(t)

            def reduce():
                t = value(rank, dt).clone()
                dist.reduce(t, dst=root, op=op)
                return tolist(t)

            def reduce_scatter_tensor():
                o = torch.zeros(7, dtype=DTYPES[dt])
                dist.reduce_scatter_tensor(o, value(rank, dt).repeat(world), op=op)
                return tolist(o)

            for name, f in (("all_reduce", all_reduce), ("reduce", reduce),
                            ("reduce_scatter_tensor", reduce_scatter_tensor)):
                key = f"{name}/{dt}/premul_{kind}"
                run(out, key, f)
                off_root = name == "reduce" and rank != root
                out[key]["oracle"] = tolist(value(rank, dt)) if off_root else total.tolist()

    def all_gather_into_tensor_coalesced(second=torch.float32):
        a = torch.zeros(world * 4)
        b = torch.zeros(world * 3, dtype=second)
        with dist._coalescing_manager():
            dist.all_gather_into_tensor(a, torch.arange(4.0) + rank)
            dist.all_gather_into_tensor(b, torch.full((3,), rank, dtype=second))
        return [a.tolist(), b.tolist()]

    def reduce_scatter_tensor_coalesced():
        a, b = torch.zeros(2, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
        with dist._coalescing_manager():
            dist.reduce_scatter_tensor(a, torch.arange(world * 2, dtype=torch.float64) * (rank + 1))
            dist.reduce_scatter_tensor(b, torch.arange(world * 3, dtype=torch.float64) + rank)
        return [a.tolist(), b.tolist()]

    gathered = [torch.cat([torch.arange(4.0) + q for q in range(world)]).tolist(),
                [float(q) for q in range(world) for _ in range(3)]]
    run(out, "all_gather_into_tensor_coalesced", all_gather_into_tensor_coalesced)
    out["all_gather_into_tensor_coalesced"]["oracle"] = gathered
    # Tensors of two dtypes in one coalesced gather (Gloo 2.11 returns wrong values here).
    run(out, "all_gather_into_tensor_coalesced_two_dtypes",
        lambda: all_gather_into_tensor_coalesced(torch.int8))
    out["all_gather_into_tensor_coalesced_two_dtypes"]["oracle"] = [
        gathered[0], [q for q in range(world) for _ in range(3)]]
    run(out, "reduce_scatter_tensor_coalesced", reduce_scatter_tensor_coalesced)
    out["reduce_scatter_tensor_coalesced"]["oracle"] = [
        (torch.arange(rank * 2, rank * 2 + 2, dtype=torch.float64) * sum(q + 1 for q in range(world))).tolist(),
        (torch.arange(rank * 3, rank * 3 + 3, dtype=torch.float64) * world + sum(range(world))).tolist()]


def ops(rank, world):
    out = {}
    reductions(rank, world, out)
    movement(rank, world, out)
    if int(torch.__version__.split(".")[0]) >= 2:
        torch2(rank, world, out)
    return {"cases": out}
