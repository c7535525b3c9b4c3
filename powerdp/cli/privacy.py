"""``powerdp privacy ...``: privacy accounting that needs no network (docs/amplification.md, docs/privacy.md).

``powerdp privacy verify`` re-accounts a run's privacy receipt with dp-accounting (:mod:`powerdp.privacy.verify`).

``powerdp privacy amplification`` evaluates the accountant of powerdp.privacy.amplification (001:
privacy amplification by iteration for noisy-gradient ADMM) for given constants: the step interval
of eq. (23), its midpoint η, the contraction 𝔏 and the constants C′ and C, and, with --sigma, the
zCDP of the first user after K iterations and its (ε, δ).
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .args import integer, real

__all__ = ["add_privacy_parser", "cmd_privacy_amplification", "amplification_report", "cmd_privacy_verify", "VERIFY_DESCRIPTION"]

AMPLIFICATION_DESCRIPTION = textwrap.dedent(
    """\
    Privacy amplification by iteration for noisy-gradient ADMM (Chan, Xie and Zhao, "Privacy Amplification
    by Iteration for ADMM with (Strongly) Convex Objective Functions", arXiv:2312.08685):
    iteration t uses one gradient of user t's function f_t, adds N(0, sigma^2 I) to x, and only the
    final (x, lambda) is released. For min f(x) + g(y) s.t. Ax + By = c with every f_t NU-smooth and
    MU-strongly convex and g MU_G-strongly convex, prints

      * the step interval of equation (23) and its midpoint eta (the paper's choice, its section 10),
      * R, S, Q, P and the contraction L = max{R/P, S/Q} (Lemma 7.6), C' (Theorem 7.2) and the
        convex-case C (Theorem 6.1),
      * with --sigma: the zCDP of the first user after --iterations K, one step (no amplification),
        Corollary 6.2 (convex, needs eta <= 1/NU) and Corollary 7.3 (strongly convex), the best that
        holds, and its (epsilon, delta) from dp-accounting;
      * with --users N and --alpha A: the RDP of every user under a random permutation (Corollary 8.3).

    Every assumption a bound needs is checked; a violated one is a one-line error naming it (exit 2).
    What numbers cannot show (f_t convex and smooth, A = [I | D], only the first function differs by
    ||grad f - grad f'|| <= D everywhere, only the final iterate released) is the caller's to vouch for.

    The paper's elastic net (its section 10): NU = MU = 2 mu (f_i(x) = (<a_i, x> - b_i)^2 with
    ||a_i||^2 = mu), MU_G = 2 c2, ||A^T B|| = 1; mu = 0.09, beta = 0.5, c2 = 0.1 is
      powerdp privacy amplification --smooth 0.18 --strong 0.18 --strong-g 0.2 --penalty 0.5
    (eta = 4.811, L = 0.9149). Caveat: a rank-one f_i is not strongly convex; see docs/amplification.md.

    Exit status: 0 ok; 2 bad input or a violated assumption.
    """
)


def add_privacy_parser(sub) -> None:
    """Register ``powerdp privacy`` and its subcommands on the top-level subparsers."""
    from .common import add_verbosity

    p = sub.add_parser("privacy", help="privacy accounting without a network (amplification by iteration, receipts)",
                       description="Privacy accounting that needs no network: amplification by iteration, and the "
                                   "re-accounting of a run's privacy receipt.")
    add_verbosity(p)  # -q/-v on either side of the subcommand, as every command
    psub = p.add_subparsers(dest="privacy_command", metavar="SUBCOMMAND")
    psub.required = True
    a = psub.add_parser(
        "amplification",
        help="privacy amplification by iteration for noisy-gradient ADMM (Chan, Xie and Zhao): eta, L, C', zCDP bounds",
        description=AMPLIFICATION_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_verbosity(a)
    a.add_argument("--smooth", type=real(0, lo_open=True), required=True, metavar="NU", help="smoothness nu of every f_t (gradient Lipschitz constant)")
    a.add_argument("--strong", type=real(0, lo_open=True), metavar="MU", help="strong convexity mu of every f_t (Assumption 7.1)")
    a.add_argument("--strong-g", type=real(0, lo_open=True), metavar="MU_G", help="strong convexity mu_g of g (Assumption 7.1)")
    a.add_argument("--penalty", type=real(0, lo_open=True), required=True, metavar="BETA", help="ADMM penalty beta")
    a.add_argument("--norm-A", type=real(0, lo_open=True), default=1.0, metavar="X", help="operator norm ||A|| (default: 1)")
    a.add_argument("--norm-AtB", type=real(0, lo_open=True), default=1.0, metavar="X", help="operator norm ||A^T B|| (default: 1)")
    a.add_argument("--eta", type=real(0, lo_open=True), metavar="ETA",
                   help="the step (default: the midpoint of equation (23); with --convex: 1/NU); refused outside the interval")
    a.add_argument("--convex", action="store_true",
                   help="general convex case only (Corollary 6.2): no strong convexity constants, no equation (23)")
    a.add_argument("--sigma", type=real(0, lo_open=True), metavar="S", help="standard deviation of the noise added to x every iteration")
    a.add_argument("--delta-grad", type=real(0, lo_open=True), metavar="D", help="gradient sensitivity: ||grad f_1 - grad f_1'|| <= D everywhere")
    a.add_argument("--iterations", type=integer(1), default=101, metavar="K", help="iterations before the release (default: 101 = 2T+1, T = 50)")
    a.add_argument("--delta", type=real(0, 1, lo_open=True, hi_open=True), default=1e-5, metavar="DELTA", help="delta of the (epsilon, delta) conversion (default: 1e-5)")
    a.add_argument("--users", type=integer(1), metavar="N", help="with --alpha: RDP of every user of N under a random permutation (Corollary 8.3)")
    a.add_argument("--alpha", type=real(1, lo_open=True), metavar="A", help="Renyi order of the --users bound")
    a.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers as JSON (- : to standard output, alone; the report then goes to standard error)")
    a.add_argument("--force", "--overwrite", action="store_true", help="replace an existing --json file (refused without)")
    a.set_defaults(func=cmd_privacy_amplification)
    v = psub.add_parser("verify", help="re-account a run's privacy receipt with dp-accounting (exit 3: a claim it does not support)",
                        description=VERIFY_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_verbosity(v)
    v.add_argument("receipt", type=Path, metavar="DIR_OR_RECEIPT",
                   help="a run directory (its coordinator_view/privacy_receipt.json) or a receipt file")
    v.add_argument("--json", type=Path, metavar="PATH", help="also write the rows as JSON (- : to standard output, alone)")
    v.add_argument("--force", "--overwrite", action="store_true", help="replace an existing --json file (refused without)")
    v.set_defaults(func=cmd_privacy_verify)


def _eps(x: Any) -> str:
    import math

    return "—" if x is None else ("inf" if not math.isfinite(x) else f"{x:.6g}")


def cmd_privacy_verify(args: argparse.Namespace) -> int:
    """``powerdp privacy verify``: the receipt's units re-accounted; exit 3 when a claim is not supported."""
    from ..privacy.verify import TOLERANCE, load_receipt, verify_receipt
    from .common import EXIT_AUDIT_FAILED, EXIT_OK
    from .output import refuse_existing_output

    refuse_existing_output(args.json, "--json", args.force)
    receipt = load_receipt(args.receipt)
    rows = verify_receipt(receipt)
    relation = receipt.get("relation") or {}
    lines = [f"{receipt.get('application')}: {receipt.get('run', {}).get('algorithm', '')}, noise "
             f"{receipt.get('run', {}).get('noise_source', '?')}; neighbours: {relation.get('text', relation.get('name', '?'))}",
             f"{'unit':<10} {'ledger eps (delta)':<24} {'re-accounted eps':<26} {'PLD':>10} {'RDP':>10}  agrees  supported"]
    for r in rows:
        led = f"{_eps(r['ledger_epsilon'])} ({r['ledger_delta']:.3g})"
        again = f"{_eps(r['reaccounted'])} ({r['accountant']})"
        lines.append(f"{r['unit'] + ' ' + str(r['id']):<10} {led:<24} {again:<26} {_eps(r['pld']):>10} {_eps(r['rdp']):>10}  "
                     f"{'yes' if r['agrees'] else 'NO':<7} {'yes' if r['supported'] else 'NO'}")
        if r.get("error"):
            lines.append(f"  {r['error']}")
        if r.get("recharged_steps"):
            lines.append(f"  {r['recharged_steps']} step(s) charged twice after a resume whose replay diverged")
    bad = [r for r in rows if not r["supported"]]
    lines.append(f"FAILED: {len(bad)} unit(s) claim less than the receipt supports (beyond {TOLERANCE:.0%})" if bad
                 else f"every claim supported; {sum(r['agrees'] for r in rows)} of {len(rows)} within {TOLERANCE:.0%} of the ledger")
    if not getattr(args, "quiet", False) or bad:
        print("\n".join(lines))
    if args.json is not None:
        from .output import write_json

        write_json(args.json, {"receipt": str(args.receipt), "rows": rows, "supported": not bad})
    return EXIT_AUDIT_FAILED if bad else EXIT_OK


VERIFY_DESCRIPTION = textwrap.dedent(
    """\
    Re-account a run's privacy receipt with dp-accounting's own accountants, independently of powerdp's ledger.

    Every private run writes coordinator_view/privacy_receipt.json: per zone (client, agent, party) the ledger's
    claim and every release it made, as the mechanism that released describes itself (the noise distribution, its
    scale on the grid, the norm and sensitivity, the values per release, the count, the tail's delta); the schema is
    in docs/privacy.md. This command derives each release's privacy loss on the grid from those numbers alone and
    composes them with dp-accounting (the exact pure sum, a PLD, and for Gaussian releases RDP and the analytic
    Gaussian accountant) at the ledger's delta. It prints per unit the ledger's epsilon, the re-accounted epsilon
    (by the accountant the ledger names), whether they agree within 1 %, and whether the receipt supports the claim.

    Exit status: 0 every claim is supported; 2 bad input (no receipt, a damaged one); 3 a ledger claims less than
    its receipt supports (a smaller epsilon than any accountant proves).
    """
)


def _refusal(fn, *args, **kw) -> tuple[Any, str | None]:
    from ..privacy.amplification import AssumptionError

    try:
        return fn(*args, **kw), None
    except AssumptionError as exc:
        return None, str(exc)


def amplification_report(args: argparse.Namespace) -> dict[str, Any]:
    """The numbers ``powerdp privacy amplification`` prints, as a dict (raises on a violated assumption)."""
    from ..privacy import amplification as amp

    nu, beta = args.smooth, args.penalty
    if args.convex:
        unused = [flag for flag, value in (("--strong", args.strong), ("--strong-g", args.strong_g)) if value is not None]
        if unused:
            raise ConfigError(f"{' and '.join(unused)}: not used with --convex (the general convex case, Corollary 6.2); "
                              "drop them, or drop --convex for the strongly convex bound")
    out: dict[str, Any] = {"inputs": {
        "smooth": nu, "strong": args.strong, "strong_g": args.strong_g, "penalty": beta, "norm_A": args.norm_A,
        "norm_AtB": args.norm_AtB, "convex_only": bool(args.convex),
    }}
    if args.convex:
        eta = args.eta if args.eta is not None else 1.0 / amp._positive("ν (--smooth)", nu)
        out.update(eta=eta, eta_interval=None, contraction=None, terms=None, C_prime=None, eta_source="--eta" if args.eta else "1/nu")
    else:
        lower, upper = amp.step_interval(nu, args.strong, args.strong_g, beta, args.norm_AtB)
        eta = 0.5 * (lower + upper) if args.eta is None else args.eta
        out.update(
            eta=eta, eta_interval=[lower, upper], eta_source="--eta" if args.eta is not None else "midpoint of eq. (23)",
            contraction=amp.contraction(eta, nu, args.strong, args.strong_g, beta, args.norm_AtB),
            terms=amp.contraction_terms(eta, nu, args.strong, beta),
            C_prime=amp.strongly_convex_constant(eta, nu, args.strong, args.strong_g, beta, args.norm_A, args.norm_AtB),
        )
    out["C_convex"] = amp.convex_constant(eta, beta, args.norm_A)
    if args.sigma is not None or args.delta_grad is not None:
        if args.sigma is None or args.delta_grad is None:
            raise ConfigError("--sigma and --delta-grad go together (the zCDP bounds need both)")
        k = args.iterations
        one = amp.one_step_zcdp(eta, args.delta_grad, args.sigma)
        cor62, why62 = _refusal(amp.zcdp_convex, k, eta, beta, args.delta_grad, args.sigma, nu, args.norm_A)
        cor73, why73 = (None, "--convex: not asked") if args.convex else _refusal(
            amp.zcdp_strongly_convex, k, eta, nu, args.strong, args.strong_g, beta, args.delta_grad, args.sigma, args.norm_A, args.norm_AtB)
        best = min(((v, s) for v, s in ((one, "one step"), (cor62, "Cor. 6.2"), (cor73, "Cor. 7.3")) if v is not None),
                   key=lambda c: c[0])  # on a tie, the first: the result with fewer assumptions
        out["zcdp"] = {
            "iterations": k, "pairs_T": amp.amplification_pairs(k), "sigma": args.sigma, "delta_grad": args.delta_grad,
            "one_step": one, "cor_6_2": cor62, "cor_6_2_refused": why62, "cor_7_3": cor73, "cor_7_3_refused": why73,
            "best": best[0], "source": best[1], "delta": args.delta, "epsilon": amp.zcdp_to_dp(best[0], args.delta),
        }
        if args.users is not None or args.alpha is not None:
            if args.users is None or args.alpha is None:
                raise ConfigError("--users and --alpha go together (Corollary 8.3 is stated at one Renyi order)")
            curve = []
            for kk in range(1, args.users + 1):
                cands = [amp.one_step_zcdp(eta, args.delta_grad, args.sigma)]
                for fn, a_ in ((amp.zcdp_convex, (kk, eta, beta, args.delta_grad, args.sigma, nu, args.norm_A)),
                               (amp.zcdp_strongly_convex, (kk, eta, nu, args.strong, args.strong_g, beta, args.delta_grad,
                                                           args.sigma, args.norm_A, args.norm_AtB))):
                    if fn is amp.zcdp_strongly_convex and args.convex:
                        continue
                    v, _ = _refusal(fn, *a_)
                    if v is not None:
                        cands.append(v)
                curve.append(min(cands))
            c = amp.assumption_8_1_constant(curve)
            rdp, why = _refusal(amp.rdp_all_users, args.alpha, c, args.users)
            if why is not None:  # the only bound --users asks for does not hold: no number to print
                raise ConfigError(f"--users {args.users} --alpha {args.alpha:g}: {why}")
            out["all_users"] = {"users": args.users, "alpha": args.alpha, "C": c, "rdp": rdp, "refused": why,
                                "epsilon": None if rdp is None else amp.rdp_to_dp(args.alpha, rdp, args.delta),
                                "delta": args.delta, "source": "Cor. 8.3 (random permutation, Lemma 8.2)"}
    elif args.users is not None or args.alpha is not None:
        raise ConfigError("--users/--alpha need --sigma and --delta-grad")
    return out


def _fmt(x: Any) -> str:
    return "—" if x is None else f"{x:.6g}"


def _finite_report(rep: Any, where: str = "") -> None:
    """Every number of the report is finite: constants at the ends of double precision (1e308, 1e-300)
    overflow in the bounds' formulas, which is the user's input to change, not a result."""
    import math

    if isinstance(rep, dict):
        for key, value in rep.items():
            _finite_report(value, f"{where}.{key}" if where else str(key))
    elif isinstance(rep, (list, tuple)):
        for i, value in enumerate(rep):
            _finite_report(value, f"{where}[{i}]")
    elif isinstance(rep, float) and not math.isfinite(rep):
        raise ConfigError(f"{where} = {rep}: the constants are too large or too small for double precision; "
                          "scale them (e.g. the loss) to moderate values")


def cmd_privacy_amplification(args: argparse.Namespace) -> int:
    from .output import refuse_existing_output

    refuse_existing_output(args.json, "--json", args.force)
    try:
        rep = amplification_report(args)
    except (OverflowError, ZeroDivisionError, FloatingPointError) as exc:
        raise ConfigError(f"the constants are too large or too small for double precision ({type(exc).__name__}); "
                          "scale them (e.g. the loss) to moderate values") from None
    _finite_report(rep)
    lines = []
    if rep["eta_interval"] is not None:
        lo, hi = rep["eta_interval"]
        lines.append(f"step interval, eq. (23)        ({lo:.4f}, {hi:.4f})")
    lines.append(f"eta ({rep['eta_source']})".ljust(31) + f" {rep['eta']:.3f}")
    if rep["terms"] is not None:
        t = rep["terms"]
        lines.append(f"R, S, Q, P (Lemma 7.6)         {t['R']:.4f}, {t['S']:.4f}, {t['Q']:.4f}, {t['P']:.4f}")
        lines.append(f"contraction L = max(R/P, S/Q)  {rep['contraction']:.4f}")
        lines.append(f"C' (Theorem 7.2)               {rep['C_prime']:.4f}")
    lines.append(f"C (Theorem 6.1, convex)        {rep['C_convex']:.4f}")
    z = rep.get("zcdp")
    if z is not None:
        lines.append(f"zCDP of the first user after K = {z['iterations']} iterations (T = {z['pairs_T']}):")
        lines.append(f"  one step (no amplification)  {_fmt(z['one_step'])}")
        lines.append(f"  Cor. 6.2 (convex)            {_fmt(z['cor_6_2'])}" + (f"   refused: {z['cor_6_2_refused']}" if z["cor_6_2_refused"] else ""))
        lines.append(f"  Cor. 7.3 (strongly convex)   {_fmt(z['cor_7_3'])}" + (f"   refused: {z['cor_7_3_refused']}" if z["cor_7_3_refused"] else ""))
        lines.append(f"  best: {z['source']}, rho = {z['best']:.6g} -> epsilon = {z['epsilon']:.4g} at delta = {z['delta']:g}")
    u = rep.get("all_users")
    if u is not None:  # a refused Cor. 8.3 is an error (amplification_report)
        lines.append(f"every user of {u['users']} (random permutation, Cor. 8.3): C = {u['C']:.6g}, "
                     f"RDP_{u['alpha']:g} = {u['rdp']:.6g} -> epsilon = {u['epsilon']:.4g} at delta = {u['delta']:g}")
    if not getattr(args, "quiet", False):
        print("\n".join(lines))
    if args.json is not None:
        from .output import write_json

        write_json(args.json, rep)
    return 0
