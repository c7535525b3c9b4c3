"""``powerdp audit``: an empirical privacy audit of a run (docs/privacy.md, "Auditing"); the attack itself is
:mod:`powerdp.studies.audit`."""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
from pathlib import Path

from ..apps.power_flow.config import ADJACENCIES, ALGORITHMS, RunConfig
from ..errors import ConfigError
from .args import integer, real
from .common import EXIT_AUDIT_FAILED, EXIT_OK, _check_output_file, _status_printer, add_verbosity
from .output import write_json
from .run import _refuse_unused_noise_flags
from .streams import is_terminal

AUDIT_DESCRIPTION = textwrap.dedent(
    """\
    Check from the outside that a run is as private as its ledger says: a
    distinguishing attack on exactly what the coordinator receives
    (docs/privacy.md, "Auditing").

    Two neighbouring load datasets D and D' differ in one load value of one zone
    by beta (--adjacency bus: both loads of the bus). The run is repeated N
    times on each, with secret noise as deployed (--seed S: seeds S, S+1, ...,
    S+N-1, and the replay adversary who knows the seed is reported on its own),
    and every message the audited zone releases
    (its shared values of every round, round 0 included) is recorded, and every
    other field of every message the coordinator receives, and the coordinator's
    view (its history file and its round times). A linear
    score (difference of the class means over the pooled variance) and its
    threshold are trained on the first half of the runs of each dataset and
    tested on the second half. Its true and false positive rates, with 95 %
    Clopper-Pearson intervals, give a lower bound on epsilon: no (eps, delta)-DP
    run can let a test reach these rates with a smaller eps (delta: the run's
    claimed total). The claimed total epsilon of the audited zone (the ledger's
    figure for the same run) is reported next to it.

    The bus is the most influential load by default: one noise-free run of the
    same update rule per loaded bus (of --zone, or of every zone) with its
    active load moved by beta, and the bus whose move changes its zone's
    released values the most. --bus names it instead.

    Every other channel is attacked the same way, and the round-1 release of
    output perturbation also by an exact floating-point reachability test
    (could the sampler have produced these doubles from either dataset's
    noise-free value?); the release and the other channels form one
    Bonferroni-corrected family (5 % family-wise error), and
    a message field outside the protocol's allow-list fails the audit by itself.
    A run whose claim rests on an unsound sensitivity rule (--sensitivity paper
    with output perturbation) is never called passed ("no guarantee").

    The resume channel (--interrupts N, default 2) runs the configuration once
    more with an output directory, stopped N times (Ctrl-C through the command
    line's own handler, then a crash between checkpoints, alternately) and
    resumed each time: the releases that crossed, composed with the ledger's
    mechanism, must not exceed the ledger's total, nor that the claim.

    --model dc audits the zonal DC market (run --model dc --algorithm outg,
    with --target-epsilon and --target-delta): every load of every zone moved
    by +beta and -beta, each zone's noise-free step from every round's public
    message must move its release by at most the sensitivity its noise is
    calibrated to (else the audit fails at once), then the attack on --zone's
    releases.

    A lower bound above the claim is a privacy bug: the audit fails (exit
    status 3). A bound at or below the claim passes, which does not prove the
    claim: the attack is one simple test. A non-private algorithm claims
    nothing; its bound shows how much a run reveals.

    --deployment also audits the files of a deployment: the case is split into
    a temporary folder (powerdp partition --split), the run is made once as a
    deployment with every zone in its own process, and every file operation of
    every process is traced: a zone process that writes under the
    coordinator's --out or outside its own zone_P.private folder, or a
    zone-private folder not 0700 or file not 0600, fails the audit
    (docs/privacy.md, "Files and permissions").

    The repeats run in parallel (--jobs) on the serial backend with evaluation
    off and no output directory; the result does not depend on --jobs. A
    progress bar goes to stderr (-q: none).

    exit status: 0 the audit passed (or the algorithm is not private); 1 a run
    failed; 2 bad input; 3 the audit failed: a lower bound exceeds the
    claimed epsilon, a message field outside the allow-list crossed, a zone
    file is misplaced or readable by others (--deployment), what crossed over
    the resumes exceeds the ledger (the resume channel), a market zone's
    release moved more than its sensitivity (--model dc), or the claim rests
    on an unsound sensitivity rule; 130 interrupted.
    """
)


MIN_RUNS = 20  # as powerdp.studies.audit.MIN_RUNS (not imported here: the audit loads the solver stack)


def add_audit_parser(sub) -> None:
    p = sub.add_parser(
        "audit",
        help="empirical privacy audit: a distinguishing attack gives a lower bound on epsilon",
        description=AUDIT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("case", metavar="CASE", help="bundled case name, MATPOWER .m file, or pandapower:NAME; or a learning DATASET "
                   "(digits, mnist, a .csv or .npz): the learning audit of powerdp learn --audit, with its flags "
                   "(--clients, --algorithm, ...; --runs N: N runs per data set, --zone P: the audited client)")
    add_verbosity(p)
    p.add_argument(
        "--algorithm",
        default="objl",
        metavar="A",
        help=f"algorithm to audit: {', '.join(ALGORITHMS)}, or UPDATE/PERTURBATION/MECHANISM (default: objl)",
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--epsilon", type=real(0, lo_open=True), default=0.1, metavar="E", help="privacy budget per local step (default: 0.1)")
    budget.add_argument(
        "--target-epsilon", type=real(0, lo_open=True), metavar="E",
        help="total privacy budget per zone for the whole run; the per-step noise is calibrated to it",
    )
    p.add_argument("--delta", type=real(0, 1, lo_open=True, hi_open=True), default=1e-2, metavar="D", help="delta per step of the Gaussian mechanism (default: 0.01)")
    p.add_argument("--target-delta", type=real(0, 1, hi_open=True), metavar="D", help="total delta with --target-epsilon (Gaussian: required)")
    p.add_argument("--rounds", type=integer(1), default=5, metavar="T", help="ADMM rounds of each run (default: 5)")
    p.add_argument("--local-updates", type=integer(1), default=1, metavar="E", help="local steps per round (default: 1)")
    p.add_argument("--zones", type=integer(1), default=2, metavar="K", help="number of zones (default: 2)")
    p.add_argument("--zone", type=integer(0), metavar="Z", help="the audited zone, 0..K-1 (default: that of the most influential load)")
    p.add_argument("--bus", type=integer(0), metavar="BUS", help="the bus (MATPOWER id) whose load moves (default: the most influential load)")
    p.add_argument("--beta", type=real(0, lo_open=True), default=0.01, help="how far the load moves, p.u. (default: 0.01, as the adjacency)")
    p.add_argument("--sensitivity", choices=["sound", "paper"], default="sound",
                   help="the audited run's sensitivity rule (default: sound); 'paper' with output perturbation is no guarantee")
    p.add_argument(
        "--adjacency", choices=list(ADJACENCIES), default="value",
        help="value: the bus's active load moves (default); bus: its active and reactive loads both move",
    )
    p.add_argument("--runs", type=integer(MIN_RUNS), default=200, metavar="N", help=f"runs per dataset, at least {MIN_RUNS} (default: 200; 2N runs in all)")
    p.add_argument("--jobs", type=integer(1), metavar="J", help="parallel runs (default: one per core)")
    p.add_argument("--seed", type=integer(0), default=None, metavar="S",
                   help="seeded runs S, S+1, ... and the replay adversary who knows the seed (default: secret noise, as deployed)")
    p.add_argument("--deployment", action="store_true",
                   help="also audit the files of a deployment: where each zone process writes, and their permissions")
    p.add_argument("--interrupts", type=integer(0), default=2, metavar="N",
                   help="the resume channel: run once more with an output directory, stopped N times (Ctrl-C through the "
                        "command line's handler, then a crash between checkpoints, alternating) and resumed; what the "
                        "coordinator received, composed, must not exceed the ledger (0: skip; default: 2)")
    p.add_argument("--model", choices=["ac", "dc"], default="ac",
                   help="ac: the distributed SOC OPF (default); dc: the zonal DC market of run --model dc (--algorithm "
                        "outg): the release-sensitivity channel (every load of every zone moved by ±beta, each round's "
                        "step against the sensitivity its noise is calibrated to) and the attack on --zone's releases")
    p.add_argument("--json", metavar="PATH", type=Path, help="write the result (bound, claim, rates, intervals, settings) as JSON")
    p.add_argument("--force", "--overwrite", dest="force", action="store_true", help="replace an existing --json file (refused without)")
    p.set_defaults(func=cmd_audit)


def _audit_config(args: argparse.Namespace) -> RunConfig:
    for flag, value, ok, what in (
        ("--runs", args.runs, args.runs >= MIN_RUNS, f"at least {MIN_RUNS} (runs per dataset: half train, half test)"),
        ("--jobs", args.jobs, args.jobs is None or args.jobs >= 1, "at least 1"),
        ("--zones", args.zones, args.zones >= 1, "at least 1"),
        ("--zone", args.zone, args.zone is None or 0 <= args.zone < args.zones, f"a zone index 0..{args.zones - 1}"),
        ("--seed", args.seed, args.seed is None or args.seed >= 0, "a non-negative integer"),
        ("--beta", args.beta, math.isfinite(args.beta) and args.beta > 0, "a positive number (p.u.)"),
    ):
        if not ok:
            raise ConfigError(f"{flag} {value}: must be {what}")
    try:
        cfg = RunConfig(
            case=args.case, zones=args.zones, algorithm=args.algorithm, epsilon=args.epsilon, delta=args.delta,
            target_epsilon=args.target_epsilon, target_delta=args.target_delta, beta=args.beta, adjacency=args.adjacency,
            rounds=args.rounds, local_updates=args.local_updates, seed=args.seed, evaluate=False, checkpoint_every=0,
            sensitivity=args.sensitivity,
        )
    except ConfigError as exc:  # name the flag, not the field
        text = str(exc)
        for field_name in ("target_epsilon", "target_delta", "local_updates", "algorithm", "epsilon", "delta", "beta", "rounds"):
            if text.startswith(f"{field_name} = "):
                text = "--" + field_name.replace("_", "-") + " " + text[len(field_name) + 3:]
                break
        raise ConfigError(text) from None
    return _refuse_unused_noise_flags(cfg, args)


def cmd_audit(args: argparse.Namespace) -> int:
    from ..studies.audit import run_audit

    if args.model == "dc":
        return _market_audit(args)
    cfg = _audit_config(args)
    if getattr(args, "_faults", None) is not None:  # test-only (powerdp.cli.main's faults argument)
        cfg = cfg.replace(faults=args._faults)
    _check_output_file(args.json, "--json", args.force)
    total = 2 * args.runs
    bar = None
    progress = None
    if not args.quiet:
        try:
            from tqdm import tqdm
        except ImportError:  # pragma: no cover
            tqdm = None
        if tqdm is not None and is_terminal(sys.stderr):
            bar = tqdm(total=total, desc=f"audit {cfg.algorithm} {cfg.case}", unit="run", file=sys.stderr)

            def progress(done, _total):
                bar.update(done - bar.n)
        else:
            step = max(1, total // 10)

            def progress(done, _total):
                if done % step == 0 or done == _total:
                    print(f"powerdp: audit: {done}/{_total} runs", file=sys.stderr, flush=True)
    try:
        res = run_audit(cfg, runs=args.runs, bus=args.bus, zone=args.zone, jobs=args.jobs, progress=progress,
                        status=_status_printer(args), deployment=args.deployment)
    finally:
        if bar is not None:
            bar.close()
    resume = None
    if args.interrupts and cfg.private:
        from ..studies.resume_audit import audit_resume

        if not args.quiet:
            print(f"powerdp: audit: resume channel ({args.interrupts} stops)", file=sys.stderr)
        resume = audit_resume(cfg, args.interrupts)
    if not args.quiet:
        _print_audit(res)
        if resume is not None:
            _print_resume(resume)
    if args.json is not None:
        write_json(args.json, {**res.to_dict(), "resume": resume})
    if resume is not None and resume.get("problem"):
        print(f"powerdp: audit FAILED: the resume channel could not run: {resume['problem']}", file=sys.stderr)
        return EXIT_AUDIT_FAILED
    if resume is not None and resume["failed"]:
        worst = max(resume["zones"].values(), key=lambda z: z["epsilon_crossed"] - z["epsilon_ledger"])
        print(f"powerdp: audit FAILED: the resume channel: the coordinator received {worst['releases_crossed']} releases of "
              f"{worst['rounds']} rounds (eps {worst['epsilon_crossed']:.3g} composed) against the ledger's eps "
              f"{worst['epsilon_ledger']:.3g}", file=sys.stderr)
        return EXIT_AUDIT_FAILED
    if res.failed:
        print(
            f"powerdp: audit FAILED: the empirical lower bound eps >= {res.epsilon_lower_bound:.3g} (worst channel "
            f"{max([res.epsilon_lower_bound] + [c['epsilon_lower_bound'] for n, c in res.channels.items() if n != 'replay']):.3g}) "
            f"against the claimed eps = {'none' if res.epsilon_total is None else format(res.epsilon_total, '.3g')} of zone "
            f"{res.settings['zone']}"
            + (f"; fields outside the allow-list: {', '.join(res.settings['fields_outside_allow_list'])}"
               if res.settings.get("fields_outside_allow_list") else "")
            + (f"; deployment files: {res.files['problems'][0]}"
               + (f" (and {len(res.files['problems']) - 1} more)" if len(res.files["problems"]) > 1 else "")
               if res.files and res.files["failed"] else "")
            + (f"; failed checks: {', '.join(res.settings['failed_checks'])} (released doubles the sampler cannot produce)"
               if res.settings.get("failed_checks") else ""),
            file=sys.stderr,
        )
        return EXIT_AUDIT_FAILED
    if res.verdict == "no guarantee":
        print("powerdp: audit NOT PASSED: the claimed epsilon rests on --sensitivity paper with output perturbation, "
              "which is not a proven bound (docs/privacy.md)", file=sys.stderr)
        return EXIT_AUDIT_FAILED
    return EXIT_OK


def _print_resume(resume: dict) -> None:
    for z, c in resume["zones"].items():
        print(f"channel       resume, zone {z}: {c['releases_crossed']} releases of {c['rounds']} rounds crossed "
              f"({c['repeated']} repeated), ε {c['epsilon_crossed']:.4g} composed, ledger ε {c['epsilon_ledger']:.4g}"
              + (f" ({c['recharged_steps']} steps charged again)" if c["recharged_steps"] else "")
              + (" FAILED" if c["failed"] else ""))


def _market_audit(args: argparse.Namespace) -> int:
    """``powerdp audit CASE --model dc``: the private DC market's audit (powerdp.studies.market_audit)."""
    from ..apps.market.dc_market import default_market_rho
    from ..grid.loading import load_case
    from ..grid.partition import partition
    from ..opf.dc import dc_model
    from ..privacy.calibration import gaussian_noise_multiplier
    from ..runs.sharing_run import SharingSettings
    from ..studies.market_audit import run_market_audit

    if args.algorithm != "outg":
        raise ConfigError(f"--model dc --algorithm {args.algorithm}: the DC market's private algorithm is outg")
    if args.target_epsilon is None or not args.target_delta:
        raise ConfigError("--model dc: give the budget as --target-epsilon E --target-delta D (the market's Gaussian total)")
    if args.runs < MIN_RUNS:
        raise ConfigError(f"--runs {args.runs}: must be at least {MIN_RUNS}")
    _check_output_file(args.json, "--json", args.force)
    net = load_case(args.case)
    part = partition(net, zones=args.zones)
    if args.zone is not None and not 0 <= args.zone < part.n_zones:
        raise ConfigError(f"--zone {args.zone}: a zone index 0..{part.n_zones - 1}")
    bus = None if args.bus is None else net.bus_index(args.bus)
    settings = SharingSettings(rounds=args.rounds, rho=0.03 * default_market_rho(dc_model(net)),
                               noise_multiplier=gaussian_noise_multiplier(args.target_epsilon, args.target_delta, args.rounds),
                               delta=args.target_delta)
    res = run_market_audit(net, part.zone_of_bus, settings, args.beta, args.zone or 0, bus, args.runs, args.seed,
                           faults=getattr(args, "_faults", None))
    rel, sens = res["channels"]["release"], res["channels"]["release_sensitivity"]
    if not args.quiet:
        print(f"audit         outg (DC market) on {net.name} ({part.n_zones} zones), zone {res['zone']}, bus "
              f"{int(net.bus_ids[res['bus']])} moved by β {args.beta:g}; {args.runs} runs per dataset, {args.rounds} rounds")
        if rel is not None:  # not run when the sensitivity channel already failed the claim
            print(f"channel       release: TPR {rel['tpr']:.3f}, FPR {rel['fpr']:.3f}, ε ≥ {rel['epsilon_lower_bound']:.3f}")
        print(f"channel       release sensitivity: max ‖Δr‖₂/Δ₂ = {sens['max_ratio']:.6f} over {sens['pairs']} (round, load, "
              f"±β) pairs, {sens['above']} above 1" + (" FAILED" if sens["failed"] else ""))
        if res["claim"] is not None:
            print(f"claimed       ε {res['claim']['epsilon']:.4g}, δ {res['claim']['delta']:g} per zone")
        print(f"verdict       {'passed' if res['verdict'] == 'passed' else 'FAILED'}")
    if args.json is not None:
        write_json(args.json, res)
    if res["verdict"] != "passed":
        print(f"powerdp: audit FAILED: {'the release moved by ' + format(sens['max_ratio'], '.3f') + ' times the sensitivity its noise covers' if sens['failed'] else 'the lower bound ' + format(rel['epsilon_lower_bound'], '.3g') + ' exceeds the claim'}",
              file=sys.stderr)
        return EXIT_AUDIT_FAILED
    return EXIT_OK


def _print_audit(res) -> None:
    s, a = res.settings, res.attack
    moved = "pd and qd" if s["adjacency"] == "bus" else "pd"
    print(f"audit         {s['algorithm']} on {s['case']} ({s['zones']} zones, {s['partition']}): zone {s['zone']}, "
          f"bus {s['bus']}, {moved} {s['load_value']:.4g} → {s['load_value'] + s['beta']:.4g} p.u. (β {s['beta']:g})")
    noise = f"seeds {s['seeds'][0]}..{s['seeds'][1]}" if s.get("seeds") else "secret noise"
    print(f"runs          {s['runs']} per dataset ({noise}), {s['rounds']} rounds × "
          f"{s['local_updates']} local step(s), {s['released_values_per_run']} released values per run")
    (tl, th), (fl, fh) = a["tpr_interval"], a["fpr_interval"]
    conf = f"{100 * a['confidence']:g} %"
    print(f"attack        linear score, trained on {a['train_runs'][0]} + {a['train_runs'][1]} runs, tested on "
          f"{a['test_runs'][0]} + {a['test_runs'][1]}: TPR {a['tpr']:.3f} [{tl:.3f}, {th:.3f}], FPR {a['fpr']:.3f} "
          f"[{fl:.3f}, {fh:.3f}] ({conf} Clopper–Pearson)")
    print(f"lower bound   ε ≥ {res.epsilon_lower_bound:.3f} (at δ {res.delta_total:g}, {conf} confidence)")
    if res.epsilon_total is None:
        print("claimed       nothing: the algorithm is not private")
    else:
        print(f"claimed       ε {res.epsilon_total:.4g}, δ {res.delta_total:g} for the run (ledger: {s['accountant']}); "
              f"ε {res.epsilon_per_step:.4g} per local step, basic composition {res.epsilon_basic:.4g}")
    for name, c in (res.channels or {}).items():
        what = "replay (knows the seed)" if name == "replay" else name
        print(f"channel       {what}: TPR {c['tpr']:.3f}, FPR {c['fpr']:.3f}, ε ≥ {c['epsilon_lower_bound']:.3f}")
    if s.get("fields_outside_allow_list"):
        print(f"LEAK          message field(s) outside the allow-list: {', '.join(s['fields_outside_allow_list'])}")
    if res.files is not None:
        f = res.files
        print(f"files         deployment: {f['zone_processes']} zone processes, {len(f['zone_writes'])} paths written by "
              f"them, {f['checked']} private files and folders checked: "
              + ("none misplaced, all 0700/0600" if not f["failed"] else f"{len(f['problems'])} finding(s)"))
        for line in f["problems"][:10]:
            print(f"LEAK          {line}")
    verdict = {
        "passed": "passed: no channel's lower bound exceeds the claim",
        "failed": "FAILED: a lower bound exceeds the claim, or a field outside the allow-list crossed (a privacy bug)",
        "not private": "no claim to check",
        "no guarantee": "NO GUARANTEE: the claim rests on an unsound sensitivity rule (--sensitivity paper); never passed",
    }[res.verdict]
    print(f"verdict       {verdict}")
    print(f"time          {res.wall_s:.1f} s ({s['jobs']} job(s))")
