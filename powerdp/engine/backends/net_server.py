"""A zone server: one or several zones of a deployment on their own host, answering the coordinator over mutual TLS.

``powerdp zone serve --deployment DEP --zone P --certs DIR`` runs :class:`ZoneServer`. It listens at its address of
``zones.toml``, accepts only a peer whose certificate is signed by the deployment's CA *and* carries the coordinator's
name, and serves one run at a time: the coordinator opens a stream, sets the run up (its settings, its id), and then
sends the rounds. The zones' agents are built on this host from the public files and each zone's own load file (the
application's ``build``), and hosted by the same command code as every other backend
(:class:`~powerdp.engine.backends.base.HostCommands`); their state (iterates, duals, noise, checkpoints, solution,
statistics, log) stays on this host, in each zone's own ``DEP/zone_P.private`` folder.

Every request is decoded by the explicit schema (:mod:`powerdp.engine.backends.net_wire`) and checked field by field
(the zones of this server, each once; the next round; the number of consensus values of each zone; finite numbers;
a run id that is a run id) before an agent sees it; every answer holds only what the schema lets cross, and each
update passes the message allow-list (:func:`~powerdp.engine.consensus.messages.check_message`) first. A failure
crosses as a code; the detail goes to the zone's own log and to this server's standard error (its operator's).

Each release leaves through the hosts' journal hook (:func:`~powerdp.engine.backends.base.released`): in a private
run with checkpoints, the zone's release journal is written and fsynced in its private checkpoint folder before the
answer is sent (docs/privacy.md, "Resume"). A restarted server holds no run: the coordinator sets it up again, it
restores its zones from their own checkpoint (their noise stream with it, and their journal), and replays the rounds
since from the coordinator's broadcasts; only an acknowledgement crosses (:mod:`powerdp.engine.backends.net`). A replay
is bit for bit what the zone sent then, or, when its journal covers the round, charged again by the journal
(:meth:`_Session._replayed`).
"""

from __future__ import annotations

import re
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import PowerDPError
from ...files.zone_folders import deployment_folders
from ...privacy.journal import JOURNAL_FILE, read_journal
from ..consensus.messages import check_message
from . import net_wire as wire
from .base import HostCommands, append_zone_log, single_threaded_pools
from .net import KEEPALIVE_S, SERVICE, grpc_module, public_digest

__all__ = ["ZoneServer", "ZoneRefusal", "MAX_REQUEST_BYTES"]

MAX_REQUEST_BYTES = 256 << 20  # a request larger than this is refused unread (a round of 16 zones of case13659: < 1 MB)
BUSY_WAIT_S = 2.0  # a new run waits this long for the one before to end, then is told "busy" (it tries again)
_RUN_ID = re.compile(r"^[0-9a-f]{6,64}$")


class ZoneRefusal(Exception):
    """The zone refuses a run's settings: ``code`` (net_wire.FAILURE_CODES) crosses, ``detail`` stays on this host."""

    def __init__(self, code: str, detail: str, status: int = 2):
        super().__init__(detail)
        self.code = code
        self.status = status  # 2: the run's settings are refused (bad input); 1: the run failed


class _BadRequest(Exception):
    """A request the protocol does not allow (the text names the field, never a value)."""


class _Session:
    """One run as this server hosts it: the agents, the round they are at, and what each request does."""

    def __init__(self, server: ZoneServer):
        self.server = server
        self.host: HostCommands | None = None
        self.shared: dict[int, int] = {}
        self.round: int | None = None
        self.closed = False
        self.limits = None

    def close(self) -> None:
        self.host = None
        if self.limits is not None:
            self.limits.restore_original_limits()
            self.limits = None

    # ------------------------------------------------------------------------------------------ requests
    def handle(self, data: bytes) -> tuple[bytes, bool]:
        """The answer to one request, and whether the stream ends after it."""
        srv = self.server
        try:
            kind, f = wire.decode(data, wire.REQUESTS)
        except wire.WireError as exc:
            return self._fail("invalid-request", f"an invalid request: {exc}", status=1), True
        try:
            if kind == "CLOSE":
                self.closed = True
                srv.say(f"run closed by the coordinator{self._at()}")
                return wire.encode("ACK"), True
            if kind == "SETUP":
                return self._setup(f), False
            if self.host is None:
                return self._fail("no-session", f"a {kind} request before the run was set up", status=1, log=False), True
            return self._request(kind, f)
        except _BadRequest as exc:
            return self._fail("invalid-request", f"an invalid {kind} request: {exc}", status=1), True
        except ZoneRefusal as exc:
            return self._fail(exc.code, str(exc), status=exc.status), True
        except Exception as exc:  # noqa: BLE001 - every failure of a zone: its code crosses, its detail stays here
            zone = self.host.zone if self.host is not None else None
            bad_input = isinstance(exc, PowerDPError) and exc.exit_status == 2
            code = ("checkpoint" if kind == "RESTORE" else "bad-input") if bad_input else "failed"
            detail = f"{kind}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
            return self._fail(code, detail, status=2 if bad_input else 1, zone=zone), True

    def _at(self) -> str:
        return f" (round {self.round})" if self.round is not None else ""

    def _fail(self, code: str, detail: str, status: int, zone: int | None = None, log: bool = True) -> bytes:
        srv = self.server
        zones = [zone] if zone is not None else srv.zones
        first_line = detail.splitlines()[0] if detail else code
        srv.say(f"{first_line}; the coordinator is told {code!r}")
        if log:
            append_zone_log(srv.deployment, zones, f"zone {', '.join(str(z) for z in zones)} ({code}){self._at()}: {detail}")
        return wire.encode("FAILED", zone=-1 if zone is None else int(zone), status=int(status), code=code,
                           round=-1 if self.round is None else int(self.round))

    def _setup(self, f: dict) -> bytes:
        srv = self.server
        if self.host is not None:
            raise _BadRequest("a second SETUP in one run")
        zones = [int(z) for z in f["zones"]]
        if zones != srv.zones:
            raise ZoneRefusal("wrong-zone", f"the coordinator asks for zones {zones}; this server hosts {srv.zones}")
        _check_run_id(f["run"], allow_empty=True)
        if f["public"] != public_digest(srv.deployment):
            raise ZoneRefusal("public-mismatch", f"the coordinator's public files (SHA-256 {f['public'][:12]}…) are not "
                                                 f"this host's {Path(srv.deployment) / 'public'}")
        if not isinstance(f["config"], dict):
            raise _BadRequest("SETUP.config is not a table of settings")
        agents, shared, words = srv.build(f["config"], zones)
        self.limits = single_threaded_pools()
        self.host = HostCommands(agents)
        self.shared = shared
        self.round = None
        srv.say(f"run set up by the coordinator: {words}")
        return wire.encode("READY", zones=np.asarray(zones, dtype=np.int64),
                           shared=np.asarray([shared[z] for z in zones], dtype=np.int64))

    def _messages(self, records: list[dict], round: int | None):
        """The coordinator's broadcasts, checked: this server's zones each once, one round, the right sizes."""
        msgs = wire.messages_of(records)
        got = [m.zone for m in msgs]
        if got != self.server.zones:
            raise _BadRequest(f"messages for zones {got}, not {self.server.zones}")
        rounds = {m.round for m in msgs}
        if len(rounds) != 1 or (round is not None and rounds != {round}):
            raise _BadRequest(f"messages of round(s) {sorted(rounds)}, expected round {round}")
        for m in msgs:
            if m.w.shape != (self.shared[m.zone],):
                raise _BadRequest(f"zone {m.zone}'s consensus holds {m.w.size} values, not {self.shared[m.zone]}")
            if not np.all(np.isfinite(m.w)) or not (np.isfinite(m.rho) and m.rho > 0):
                raise _BadRequest(f"zone {m.zone}'s message holds a number that is not finite (or rho <= 0)")
        return msgs

    def _updates(self, updates) -> bytes:
        for u in updates:
            check_message(u)  # exactly (round, zone, released): a field outside the allow-list never crosses
        diags = self.host.run("diag", False)
        spent = [{"zone": int(d.zone), "epsilon": float(d.epsilon_spent)} for d in diags]
        return wire.encode("UPDATES", updates=updates, spent=spent)

    def _replayed(self, updates, before: dict[int, np.ndarray]) -> None:
        """A restarted zone's repeat of a round the coordinator holds (REPLAY): nothing of it crosses. Released bit for
        bit as then, the usual case (its noise stream came back with its checkpoint; its journal charges nothing). Other
        values are allowed only when the zone's release journal covers the round: the journal has then re-keyed the
        stream and charged the repeat (privacy/journal.py), the zone goes on from it and its ledger says so; without a
        journal (a run without checkpoints) the difference is charged nowhere and the zone refuses to go on."""
        for u in updates:
            if u.zone not in before:
                raise _BadRequest(f"REPLAY.released has no values of zone {u.zone}")
            if np.array_equal(np.asarray(u.released), before[u.zone]):
                continue
            journal = getattr(self.host.agents[u.zone], "journal", None)
            if journal is None or not journal.covers(u.round):
                raise ZoneRefusal("replay-differs", f"zone {u.zone} replayed round {u.round} and released other values "
                                                    "than it sent then, and no release journal covers that round", status=1)
            line = (f"zone {u.zone} replayed round {u.round} with other values than it sent then (its journal re-keyed "
                    "the noise and charged the round again; the new values stay here)")
            self.server.say(line)
            append_zone_log(self.server.deployment, [u.zone], line)

    def _folders(self, run: str):
        _check_run_id(run)
        return deployment_folders(self.server.deployment, run)

    def _request(self, kind: str, f: dict) -> tuple[bytes, bool]:
        host = self.host
        if kind == "INIT":
            updates = host.run("init", None)
            self.round = 0
            return self._updates(updates), False
        if kind in ("STEP", "REPLAY"):
            if self.round is None:
                raise _BadRequest(f"{kind} before the initial projection or a restored checkpoint")
            msgs = self._messages(f["messages"], self.round + 1)
            updates = host.run("step", msgs)
            self.round = msgs[0].round
            if kind == "STEP":
                return self._updates(updates), False
            self._replayed(updates, {int(r["zone"]): r["values"] for r in f["released"]})
            return wire.encode("ACK"), False
        if kind == "REPORT":
            reports = [{"zone": int(d.zone), "epsilon": float(d.epsilon_spent), "ledger": d.privacy} for d in host.run("diag", False)]
            return wire.encode("REPORTS", reports=reports), False
        if kind == "SAVE":
            if int(f["round"]) != self.round:
                raise _BadRequest(f"SAVE of round {int(f['round'])}; the zones are at round {self.round}")
            host.run("save", self._folders(f["run"]))
            return wire.encode("ACK"), False
        if kind == "JOURNAL":  # a new run with checkpoints: each zone starts its release journal in its own folder
            folders = self._folders(f["run"])
            for z in self.server.zones:  # a new journal never replaces releases already journaled (and charged)
                if read_journal(folders.checkpoint_dir(z) / JOURNAL_FILE):
                    raise _BadRequest(f"a new journal for run {f['run']}, whose zone {z} journaled releases already")
            host.run("journal", folders)
            return wire.encode("ACK"), False
        if kind == "RESTORE":
            rnd = int(f["round"])
            if rnd < 0:
                raise _BadRequest("RESTORE of a negative round")
            host.run("restore", (self._folders(f["run"]), rnd))
            self.round = rnd
            self.server.say(f"zones restored from their own checkpoint of round {rnd}")
            return wire.encode("ACK"), False
        if kind == "PRUNE":
            host.run("prune", (self._folders(f["run"]), int(f["round"])))
            return wire.encode("ACK"), False
        if kind == "SOLUTIONS":
            host.run("solutions", self._folders(f["run"]))
            return wire.encode("ACK"), False
        raise _BadRequest(f"{kind} is not a request")  # pragma: no cover - decode() admits requests only


def _check_run_id(run: str, allow_empty: bool = False) -> None:
    """A run id names a folder on this host: hexadecimal digits only (never a path)."""
    if allow_empty and run == "":
        return
    if not _RUN_ID.match(run):
        raise _BadRequest("the run id is not a run id (hexadecimal digits)")


def peer_names(context) -> list[str]:
    """The names on the peer's certificate (subject alternative names, else the common name)."""
    auth = context.auth_context() or {}
    names = [n.decode("utf-8", "replace") for n in auth.get("x509_subject_alternative_name", [])]
    return names or [n.decode("utf-8", "replace") for n in auth.get("x509_common_name", [])]


class ZoneServer:
    """The gRPC server of one or several zones (module docstring).

    ``build(config, zones)`` makes the zones' agents from the coordinator's settings on this host and returns
    (agents by zone, number of shared values by zone, a short description for the log), or raises
    :class:`ZoneRefusal`. ``say(line)`` reports to the server's operator (standard error by default).
    """

    def __init__(self, zones: list[int], host: str, port: int, cert: bytes, key: bytes, ca: bytes, coordinator: str,
                 deployment: str | Path, build: Callable[[dict, list[int]], tuple[dict, dict, str]],
                 once: bool = False, say: Callable[[str], None] | None = None):
        self.grpc = grpc_module(quiet=False)
        self.zones = sorted(int(z) for z in zones)
        self.host, self.port = host, int(port)
        self.coordinator = coordinator
        self.deployment = str(deployment)
        self.build = build
        self.once = once
        self._say = say or (lambda line: print(f"powerdp zone {','.join(map(str, self.zones))}: {line}", file=sys.stderr, flush=True))
        self.lock = threading.Lock()
        self.done = threading.Event()
        grpc = self.grpc
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="powerdp-zone"),
            options=[("grpc.so_reuseport", 0),  # a second server on this port fails to start instead of sharing it
                     ("grpc.max_receive_message_length", MAX_REQUEST_BYTES), ("grpc.max_send_message_length", -1),
                     # a coordinator that vanishes without closing its connection frees the server within ~40 s
                     ("grpc.keepalive_time_ms", KEEPALIVE_S * 1000), ("grpc.keepalive_timeout_ms", 10_000),
                     ("grpc.http2.max_pings_without_data", 0), ("grpc.keepalive_permit_without_calls", 1),
                     ("grpc.http2.min_recv_ping_interval_without_data_ms", KEEPALIVE_S * 1000 // 2)],
        )
        handler = grpc.stream_stream_rpc_method_handler(self._session)
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Session": handler})])
        creds = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = self.server.add_secure_port(address, creds)
        except RuntimeError:
            bound = 0
        if not bound:
            from ...errors import ConfigError

            raise ConfigError(f"cannot listen at {address}: the address is in use or not this host's")
        self.address = address

    def say(self, line: str) -> None:
        self._say(line)

    def start(self) -> None:
        self.server.start()
        self.say(f"listening at {self.address} (mutual TLS; only the coordinator {self.coordinator!r} is served)")

    def wait(self, poll_s: float = 0.5) -> None:
        """Serve until stopped (Ctrl-C, SIGTERM) or, with ``once``, until a run has closed."""
        while not self.done.wait(poll_s):
            pass

    def stop(self, grace: float = 1.0) -> None:
        self.done.set()
        self.server.stop(grace).wait(grace + 1)

    def _session(self, requests, context):
        grpc = self.grpc
        names = peer_names(context)
        if self.coordinator not in names:
            self.say(f"refused {context.peer()}: its certificate names {', '.join(names) or 'nobody'}, not the coordinator "
                     f"{self.coordinator!r}")
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          f"a certificate for {', '.join(names) or 'nobody'} is not the coordinator's ({self.coordinator!r})")
        if not self.lock.acquire(timeout=BUSY_WAIT_S):
            self.say(f"a run from {context.peer()} waits: another run is in progress")
            yield wire.encode("FAILED", zone=-1, status=1, code="busy", round=-1)
            return
        session = _Session(self)
        try:
            for data in requests:
                answer, end = session.handle(data)
                yield answer
                if end:
                    break
        finally:
            session.close()
            self.lock.release()
            if self.once and session.closed:
                self.done.set()


def describe(config: dict[str, Any]) -> str:
    """A line about a run's settings for the zone's operator."""
    noise = "seeded noise" if config.get("seed") is not None else "secret noise"
    return f"{config.get('algorithm')}, {config.get('rounds')} rounds, {config.get('local_solver')}, {noise}"
