"""`fumarole study timeline|inflation`: trace-driven experiments written as event logs (docs/studies.md)."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path
from typing import Any

from fumarole.daemon.cli.exits import EXIT_OK, bad_input

DEFAULT_TRACE = "../shared/traces/alibaba-gpu-v2023"
_clock = time.monotonic  # the wall clock of the times printed (a module attribute: tests replace it)


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "study",
        help="trace-driven experiments (Alibaba GPU trace): timeline, inflation; each run an event log",
        description="Run a study on a pod list of the Alibaba GPU trace v2023 and write its event log(s).",
    )
    modes = s.add_subparsers(dest="mode", required=True, metavar="MODE", help="timeline or inflation")
    for name, text in (
        ("timeline", "the trace's own arrivals and lifetimes on its nodes"),
        (
            "inflation",
            "pods sampled with a seed arrive until GPU requests reach --ratio of capacity (Weng et al.)",
        ),
    ):
        m = modes.add_parser(name, help=text, description=text)
        m.add_argument("--trace", default=DEFAULT_TRACE, metavar="DIR|CSV", help="trace folder or pod list")
        m.add_argument(
            "--nodes", metavar="CSV", help="node list (default: openb_node_list_all_node.csv beside it)"
        )
        m.add_argument(
            "--policy",
            default="binpack",
            help="binpack (Volcano's binpack-style configuration, examples/study/vgpu-binpack.yaml), "
            "spread (Volcano's default configuration, vgpu-default.yaml), fgd (vgpu-fgd.yaml), or one of "
            "the paper's baselines (beyond Volcano): random, dotprod, gpuclustering, "
            "gpupacking, bestfit (vgpu-<name>.yaml); with --conf, only the run's name (default binpack)",
        )
        m.add_argument(
            "--engine",
            default="core",
            choices=("core", "fast"),
            help="core (default): Fumarole's scheduler sessions under the Volcano configuration; "
            "fast: the numpy study placer, seconds instead of tens of seconds. It decides exactly as the "
            "core preset for fgd and the paper's five baselines (every node scored, seeded ties); for "
            "binpack and spread it is an APPROXIMATION (it scores every feasible node where Volcano "
            "scores a rotating window on clusters over 100 nodes, adds no deviceshare device score, its "
            "spread has no balancedresource), exact only for examples/study/vgpu-binpack-plugin.yaml on "
            "clusters of up to 100 nodes",
        )
        m.add_argument(
            "--percentage-nodes-to-find",
            type=int,
            default=None,
            metavar="PCT",
            help="core engine: Volcano's scheduler flag of that name, the share of feasible nodes "
            "scored per pod (0: Volcano's adaptive window, 38%% of 1,523 nodes from a rotating "
            "start; 100: every node). Default: the preset's (fgd 100, the others 0); with --conf 0",
        )
        m.add_argument(
            "--tie-break",
            choices=("first", "seeded"),
            default=None,
            help="equal scores: the first candidate node (Fumarole's rule for Volcano's configurations) "
            "or a draw seeded by the experiment's seed, the same whatever the node order (docs/studies.md). "
            "Default: seeded for the paper's policies (fgd and the baselines), first otherwise",
        )
        m.add_argument(
            "--conf",
            metavar="SCHED.yaml",
            help="core engine: a Volcano scheduler configuration instead of the --policy preset",
        )
        m.add_argument(
            "--out", required=True, metavar="RUN.db|DIR", help="the event log to write (must not exist)"
        )
        if name == "inflation":
            m.add_argument("--seeds", default="42", help="seeds, e.g. 42 or 42-51 (one log per seed in DIR)")
            m.add_argument(
                "--ratio", type=float, default=1.3, help="GPU requests / capacity (default 1.3, the paper's)"
            )
            m.add_argument(
                "--tune",
                choices=("both", "up"),
                default="both",
                help="both (default, the paper's TunePodsByNodeTotalResource): draws added up to the "
                "target, or a list asking more trimmed to it; up: a list asking more is kept whole",
            )
        else:
            m.add_argument("--period", type=int, default=60, help="seconds between cycles (default 60)")
        m.set_defaults(func=cmd_study)
    _add_sweep(modes)


def _add_sweep(modes: Any) -> None:
    text = "inflation experiments over workloads x policies x seeds on a Dask cluster, one CSV table"
    m = modes.add_parser("sweep", help=text, description=text)
    m.add_argument("--trace", default=DEFAULT_TRACE, metavar="DIR", help="folder of the pod lists")
    m.add_argument(
        "--workloads",
        default="default",
        help="pod lists: names (openb_pod_list_<name>.csv in --trace) or CSV paths, comma-separated",
    )
    m.add_argument(
        "--nodes", metavar="CSV", help="node list (default: openb_node_list_all_node.csv in --trace)"
    )
    m.add_argument(
        "--policies",
        default="fgd,random,dotprod,gpuclustering,gpupacking,bestfit",
        help="comma-separated presets (default: the paper's six)",
    )
    m.add_argument("--seeds", default="42", help="seeds, e.g. 42, 42,43 or 42-51")
    m.add_argument("--engine", default="core", choices=("core", "fast"))
    m.add_argument("--ratio", type=float, default=1.3, help="GPU requests / capacity (default 1.3)")
    m.add_argument("--tune", choices=("both", "up"), default="both")
    m.add_argument("--tie-break", choices=("first", "seeded"), default=None, help="default: the preset's")
    m.add_argument("--percentage-nodes-to-find", type=int, default=None, metavar="PCT")
    m.add_argument(
        "--out", required=True, metavar="DIR", help="results folder (an interrupted sweep resumes)"
    )
    m.add_argument(
        "--scheduler", metavar="ADDRESS", help="a Dask scheduler (tcp://HOST:PORT); default: a local cluster"
    )
    m.add_argument("--workers", type=int, default=2, help="local cluster: worker processes (default 2)")
    m.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    """The sweep's grid from the flags, a Dask client, and daemon.study.sweep."""
    from fumarole.daemon.study.confs import PAPER_POLICIES, PERCENTAGE_NODES_TO_FIND, PRESETS, SEEDED_TIES
    from fumarole.daemon.study.placement import POLICIES
    from fumarole.daemon.study.sweep import SweepError, grid, sweep
    from fumarole.daemon.study.trace import TraceError, read_nodes, read_pods

    try:
        seeds = _seeds(args.seeds)
    except ValueError as e:
        return bad_input(f"--seeds: expected N, N,M or N-M (M >= N), got {args.seeds!r}: {e}")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    known = POLICIES if args.engine == "fast" else tuple(PRESETS)
    bad = [p for p in policies if p not in known]
    if bad or not policies:
        return bad_input(
            f"--policies: unknown for --engine {args.engine}: {bad or args.policies!r} "
            f"(known: {', '.join(known)})"
        )
    if not args.ratio > 0:
        return bad_input("--ratio: must be positive")
    if args.percentage_nodes_to_find is not None and not 0 <= args.percentage_nodes_to_find <= 100:
        return bad_input("--percentage-nodes-to-find: must be 0 to 100")
    if args.workers < 1:
        return bad_input("--workers: must be at least 1")
    trace = Path(args.trace)
    workloads = []
    for w in (x.strip() for x in args.workloads.split(",")):
        if not w:
            continue
        path = Path(w) if w.endswith(".csv") else trace / f"openb_pod_list_{w}.csv"
        workloads.append(str(path.absolute()))
    if not workloads:
        return bad_input("--workloads: none given")
    nodes = Path(args.nodes) if args.nodes else trace / "openb_node_list_all_node.csv"
    try:  # every file read once here, so a bad one is refused before anything runs
        read_nodes(nodes)
        for w in workloads:
            read_pods(Path(w))
    except TraceError as e:
        return bad_input(str(e))
    rows = []
    for p in policies:
        seeded = (
            args.tie_break == "seeded"
            if args.tie_break is not None
            else SEEDED_TIES.get(p, False)
            if args.engine == "core"
            else p in PAPER_POLICIES
        )
        pct = args.percentage_nodes_to_find
        if pct is None:
            pct = PERCENTAGE_NODES_TO_FIND[p] if args.engine == "core" else 100
        rows.append((p, "seeded" if seeded else "first", pct))
    experiments = grid(
        workloads, str(nodes.absolute()), rows, seeds, engine=args.engine, ratio=args.ratio, tune=args.tune
    )
    try:  # untyped: reached through Any
        dask: Any = importlib.import_module("distributed")
    except ImportError:
        return bad_input("study sweep needs Dask's distributed: pip install 'fumarole[sweep]'")
    out = Path(args.out)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        from fumarole.daemon.study.sweep import prepare

        prepare(out, experiments, create=False)  # nothing is written before the cluster answers
    except SweepError as e:
        return bad_input(str(e))
    cluster = None
    try:
        if args.scheduler:
            client = dask.Client(args.scheduler, timeout="10s")
        else:
            cluster = dask.LocalCluster(
                n_workers=args.workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            )
            client = dask.Client(cluster)
    except OSError as e:
        return bad_input(f"--scheduler: cannot reach {args.scheduler}: {e}")
    try:
        results = sweep(client, experiments, out, progress)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    print(f"sweep: {len(experiments)} experiments in {results}")
    return EXIT_OK


def _seeds(text: str) -> list[int]:
    """`N`, `N,M,...` or `N-M` (M >= N); ValueError with the reason otherwise."""
    text = text.strip()
    if "-" in text:
        a, b = text.split("-", 1)
        lo, hi = int(a), int(b)
        if hi < lo:
            raise ValueError(f"range {text!r} is empty ({hi} < {lo}); write {hi}-{lo}")
        return list(range(lo, hi + 1))
    seeds = [int(x) for x in text.split(",") if x.strip()]
    if not seeds:
        raise ValueError("no seed given")
    return seeds


def _engine(args: argparse.Namespace) -> Any:
    """The core engine's configuration (an Engine), None for the fast placer, or an error text."""
    from fumarole.daemon.scheduler.framework.conf import ConfError, parse_conf
    from fumarole.daemon.study.confs import PERCENTAGE_NODES_TO_FIND, PRESETS, SEEDED_TIES, preset_text
    from fumarole.daemon.study.placement import POLICIES
    from fumarole.daemon.study.runs import Engine

    if args.engine == "fast":
        if args.conf:
            return "--conf: the fast engine has no scheduler configuration (use --engine core)"
        if args.policy not in POLICIES:
            known = ", ".join(POLICIES)
            return f"--policy: unknown policy {args.policy!r} for --engine fast (known: {known})"
        return None
    if args.conf:
        path = Path(args.conf)
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            return f"--conf: cannot read {path}: {e}"
        name = str(path)
        pct = 0
        seeded = False
    else:
        if args.policy not in PRESETS:
            return f"--policy: unknown policy {args.policy!r} (known: {', '.join(PRESETS)})"
        text = preset_text(args.policy)
        name = f"examples/study/{PRESETS[args.policy][0]}"
        pct = PERCENTAGE_NODES_TO_FIND[args.policy]
        seeded = SEEDED_TIES[args.policy]
    try:
        conf = parse_conf(text)
    except (ConfError, ValueError) as e:
        return f"--conf: {name}: {e}"
    if args.percentage_nodes_to_find is not None:
        pct = args.percentage_nodes_to_find
    if not 0 <= pct <= 100:
        return "--percentage-nodes-to-find: must be 0 to 100"
    if args.tie_break is not None:
        seeded = args.tie_break == "seeded"
    return Engine(conf, name, text, pct, seeded)


def cmd_study(args: argparse.Namespace) -> int:
    from fumarole.daemon.study.confs import PAPER_POLICIES
    from fumarole.daemon.study.runs import Engine, inflation_log, timeline_log
    from fumarole.daemon.study.trace import TraceError, pod_file, read_nodes, read_pods

    engine = _engine(args)
    if isinstance(engine, str):
        return bad_input(engine)
    assert engine is None or isinstance(engine, Engine)
    if args.policy != Path(args.policy).name or not args.policy:
        return bad_input(f"--policy: {args.policy!r} cannot name a run (no slashes)")
    try:
        seeds = _seeds(args.seeds) if args.mode == "inflation" else []
    except ValueError as e:
        return bad_input(f"--seeds: expected N, N,M or N-M (M >= N), got {args.seeds!r}: {e}")
    if args.mode == "inflation" and not args.ratio > 0:
        return bad_input("--ratio: must be positive")
    if args.mode == "timeline" and args.period <= 0:
        return bad_input("--period: must be a positive number of seconds")
    out = Path(args.out)
    if out.exists():
        return bad_input(f"--out: {out} exists (a study writes a new log)")
    many = len(seeds) > 1
    existing = next((a for a in out.absolute().parents if a.exists()), None)
    if existing is not None and not existing.is_dir():
        return bad_input(f"--out: {existing} is not a directory")
    try:
        pf = pod_file(Path(args.trace))
        pods = read_pods(pf, need_times=args.mode == "timeline")
        nodes = read_nodes(Path(args.nodes) if args.nodes else pf.parent / "openb_node_list_all_node.csv")
    except TraceError as e:
        return bad_input(str(e))

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    fast_seeded = args.tie_break == "seeded" or (args.tie_break is None and args.policy in PAPER_POLICIES)
    t = _clock()
    if args.mode == "timeline":
        log, summary = timeline_log(
            nodes,
            pods,
            args.policy,
            period_s=args.period,
            trace_name=pf.name,
            progress=progress,
            engine=engine,
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        n = log.write(out)
        print(
            f"timeline {args.policy} ({args.engine}): {summary.pods} pods, {summary.placed} placed, "
            f"{summary.unplaced} never placed; "
            f"{n} events in {out} ({_clock() - t:.1f}s)"
        )
        return EXIT_OK
    if many:
        out.mkdir(parents=True)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        t = _clock()
        path = out / f"{args.policy}-seed{seed}.db" if many else out
        log = inflation_log(
            nodes,
            pods,
            args.policy,
            seed=seed,
            ratio=args.ratio,
            trace_name=pf.name,
            progress=progress,
            engine=engine,
            fast_seeded_ties=fast_seeded,
            tune=args.tune,
        )
        n = log.write(path)
        took = _clock() - t
        print(f"inflation {args.policy} ({args.engine}) seed {seed}: {n} events in {path} ({took:.1f}s)")
    return EXIT_OK
