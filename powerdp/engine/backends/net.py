"""The network backend: every zone on a server of its own, reached over gRPC with mutual TLS (``pip install "powerdp[net]"``).

Zones in different organizations run ``powerdp zone serve --deployment DEP --zone P --certs DIR`` on their own hosts
(:mod:`powerdp.engine.backends.net_server`); the coordinator runs ``powerdp run --deployment DEP --backend net --certs
DIR``. This module is the coordinator's side: one gRPC stream per zone server, the messages in the explicit schema of
:mod:`powerdp.engine.backends.net_wire` (never pickle), each answer checked field by field before the coordinator
takes it. Both sides authenticate each other (:mod:`powerdp.engine.backends.net_tls`): the coordinator checks the name
on each zone server's certificate (``zones.toml``), each server the coordinator's.

Faults (docs/deployment.md):

* a zone that does not answer a request within ``round_timeout`` seconds stops the run (resumable: the runner keeps
  the history and the last checkpoint) with a line naming the zone;
* a zone server that drops (its connection fails) is waited for up to ``zone_timeout`` seconds; when it is back it
  restores its zones from their own checkpoint of the last checkpointed round (their noise stream and release
  journal with it) and replays the rounds since from the coordinator's broadcasts, answering each with an
  acknowledgement only (nothing crosses twice; the zone checks that it repeats what it released, or that its journal
  charged the difference: docs/privacy.md, "Resume"), and the run goes on. Not back in time: the run stops,
  resumable;
* an answer the schema does not describe, or larger than the answers of that server's zones can be, stops the run
  with "zone P sent an invalid message";
* a refused certificate (either way), or a peer that does not speak TLS, is one line naming the peer (exit status 2).

What crosses is counted per message kind (count, bytes each way) and logged on the coordinator's side; the counts
are in the run's ``coordinator_view/summary.json`` (``network``). Nothing a zone sends on failure but a code
(:data:`~powerdp.engine.backends.net_wire.FAILURE_CODES`) reaches the coordinator, so its log holds none of a zone's data.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, PowerDPError
from ...grid.network import Network
from ..consensus.messages import ConsensusMessage, ZoneUpdate, check_message
from ..consensus.settings import ConsensusSettings
from . import net_wire as wire
from .base import AgentSpec, Backend, WorkerError
from .net_tls import net_settings, parse_address, probe_tls

log = logging.getLogger(__name__)

__all__ = ["NetBackend", "grpc_module", "public_digest", "SERVICE", "METHOD"]

SERVICE = "powerdp.ZoneServer"
METHOD = f"/{SERVICE}/Session"
REPLY_KINDS = frozenset(n for n in wire.SCHEMA if n >= 20)
#: seconds between keepalive pings on an idle connection (both sides; a zone server admits them this often)
KEEPALIVE_S = 30
#: bytes of an answer beyond its arrays: the header, counts, and one ledger report per zone
_ANSWER_SLACK = 4096


def grpc_module(quiet: bool = True):
    """``grpc``, or a ConfigError naming the extra that installs it. ``quiet``: gRPC's own log holds errors only (the
    coordinator reports every failure in its own words; a zone server keeps gRPC's line of a refused handshake)."""
    import os

    if quiet:
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    try:
        import grpc
        import grpc.aio  # noqa: F401
    except ImportError:
        raise ConfigError('the net backend needs grpcio: pip install "powerdp[net]"') from None
    return grpc


def public_digest(deployment: str | Path) -> str:
    """SHA-256 over every file of the deployment's public folder (names and contents): both sides must hold the same."""
    pub = Path(deployment) / "public"
    h = hashlib.sha256()
    files = sorted(p for p in pub.iterdir() if p.is_file()) if pub.is_dir() else []
    if not files:
        raise ConfigError(f"{deployment} is not a split case (no files in {pub}; write one with powerdp partition --split)")
    for p in files:
        h.update(p.name.encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


class _Lost(Exception):
    """A zone server's connection failed (it may come back)."""


@dataclass
class _Server:
    """One zone server as the coordinator sees it."""

    index: int
    zones: list[int]
    address: str
    name: str
    sizes: dict[int, int]  # zone → number of shared values
    channel: Any = None
    call: Any = None
    failed: bool = False  # it reported a failure (or could not be brought back): not asked again in this run

    @property
    def label(self) -> str:
        zones = ", ".join(str(z) for z in self.zones)
        return f"zone {zones} at {self.address} ({self.name})"

    @property
    def zone_words(self) -> str:
        return f"zone {', '.join(str(z) for z in self.zones)}"

    def answer_bound(self) -> int:
        """The most bytes an answer of this server's zones can take (anything larger is refused unread)."""
        return _ANSWER_SLACK + sum(64 + 8 * n + wire.MAX_JSON for n in self.sizes.values())


@dataclass
class Traffic:
    """Messages and bytes each way, per kind (the coordinator's side)."""

    sent: dict[str, list[int]] = field(default_factory=dict)  # kind → [count, bytes]
    received: dict[str, list[int]] = field(default_factory=dict)
    largest: int = 0

    def add(self, direction: dict, kind: str, size: int) -> None:
        entry = direction.setdefault(kind, [0, 0])
        entry[0] += 1
        entry[1] += size
        self.largest = max(self.largest, size)

    def summary(self) -> dict[str, Any]:
        def table(d):
            return {k: {"messages": v[0], "bytes": v[1]} for k, v in sorted(d.items())}

        return {"sent": table(self.sent), "received": table(self.received), "largest_bytes": self.largest,
                "messages": sum(v[0] for v in self.sent.values()) + sum(v[0] for v in self.received.values()),
                "bytes": sum(v[1] for v in self.sent.values()) + sum(v[1] for v in self.received.values())}


class NetBackend(Backend):
    """The coordinator's side of a deployment whose zones are servers on other hosts (module docstring)."""

    def __init__(self, net: Network, specs: Sequence[AgentSpec], config: ConsensusSettings):
        self.grpc = grpc_module()
        if config.deployment is None:
            raise ConfigError("the net backend runs a split case: give --deployment DIR (powerdp partition --split)")
        self.config = config
        self.settings = net_settings(config)
        zone_map = self.settings.zone_map
        zone_map.check_zones(len(specs))
        size = {s.zone: len(s.shared_keys) for s in specs}
        self.servers = [_Server(h, zones, a.address, a.name, {z: size[z] for z in zones})
                        for h, (a, zones) in enumerate(zone_map.servers())]
        self.n_hosts = len(self.servers)
        self.groups = [s.zones for s in self.servers]
        self.session = secrets.token_hex(8)
        self.setup = {"session": self.session, "config": _config_json(config), "public": public_digest(config.deployment)}
        self.traffic = Traffic()
        self.round = 0
        self.run_id = ""
        self.checkpoint_round: int | None = None  # the round every zone last saved (None: replay from the start)
        self.journaled = False  # every zone keeps a release journal in this run (a private run with checkpoints)
        self.sent: dict[int, dict[int, ConsensusMessage]] = {}  # round → zone → the broadcast (kept for a replay)
        self.released: dict[int, dict[int, np.ndarray]] = {}  # round → zone → what it released then
        self.spent: dict[int, float] = {}
        self.privacy: dict[int, Any] = {}
        self.loop = asyncio.new_event_loop()
        self.ready = False
        try:
            self._run(self._connect_all())
            self.ready = True
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------------------------------- plumbing
    def _run(self, coro):
        return self.loop.run_until_complete(coro)

    def _credentials(self):
        s = self.settings
        return self.grpc.ssl_channel_credentials(root_certificates=s.ca, private_key=s.key, certificate_chain=s.cert)

    async def _open(self, server: _Server) -> None:
        """A new channel and stream to ``server`` (the old ones closed)."""
        await self._close_channel(server)
        options = [
            ("grpc.ssl_target_name_override", server.name),  # the name its certificate must carry (zones.toml)
            ("grpc.max_receive_message_length", server.answer_bound()),
            ("grpc.max_send_message_length", -1),
            ("grpc.enable_retries", 0),
            # a zone host that vanishes without closing its connection (powered off, cut off) is noticed within
            # ~KEEPALIVE_S + 10 s even in the middle of a long round, and then waited for as a dropped server
            ("grpc.keepalive_time_ms", KEEPALIVE_S * 1000),
            ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
        ]
        server.channel = self.grpc.aio.secure_channel(server.address, self._credentials(), options=options)
        server.call = server.channel.stream_stream(METHOD)()

    async def _close_channel(self, server: _Server) -> None:
        if server.call is not None:
            server.call.cancel()
            server.call = None
        if server.channel is not None:
            await server.channel.close(grace=None)
            server.channel = None

    async def _exchange(self, server: _Server, kind: str, fields: dict, timeout: float, what: str) -> tuple[str, dict]:
        """Send one request to ``server`` and return its checked answer (kind, fields); :class:`_Lost` when the
        connection failed, a PowerDPError for everything that ends the run."""
        grpc = self.grpc
        data = wire.encode(kind, **fields)
        self.traffic.add(self.traffic.sent, kind, len(data))
        try:
            await server.call.write(data)
            answer = await asyncio.wait_for(server.call.read(), timeout)
        except asyncio.TimeoutError:
            server.failed = True  # its answer may still come: this stream is not read again in the run
            raise WorkerError(f"{server.zone_words} did not answer {what} within {timeout:g} s (--round-timeout); "
                              f"its server is {server.address}", context=f"round {self.round}") from None
        except grpc.aio.AioRpcError as exc:
            raise self._rpc_error(server, exc.code(), exc.details(), what) from None
        except (grpc.aio.UsageError, asyncio.InvalidStateError, ConnectionError) as exc:
            raise await self._ended(server, what, str(exc)) from None
        if answer is grpc.aio.EOF:
            raise await self._ended(server, what, "the zone server closed the stream")
        self.traffic.add(self.traffic.received, wire.SCHEMA[int.from_bytes(answer[6:8], "little")][0]
                         if len(answer) >= 8 and int.from_bytes(answer[6:8], "little") in wire.SCHEMA else "invalid", len(answer))
        try:
            got, out = wire.decode(answer, REPLY_KINDS)
        except wire.WireError as exc:
            log.error("%s sent an invalid message in answer to %s: %s", server.label, what, exc)
            raise self._invalid(server, str(exc)) from None
        if got == "FAILED":
            error = self._failed(server, out, what)
            server.failed = not isinstance(error, _Lost)  # its session ended: no request goes there again
            raise error
        return got, out

    def _invalid(self, server: _Server, why: str) -> WorkerError:
        return WorkerError(f"{server.zone_words} sent an invalid message ({why}); refused", context=f"round {self.round}")

    def _failed(self, server: _Server, out: dict, what: str) -> PowerDPError:
        code = out["code"]
        text = wire.FAILURE_CODES.get(code)
        zone = int(out["zone"])
        who = f"zone {zone}" if zone in server.zones else server.zone_words
        if text is None:
            return self._invalid(server, f"an unknown failure code in answer to {what}")
        if code == "busy":
            return _Lost("busy")
        if code == "no-session":
            return _Lost("no session")
        message = f"{who} {text} ({what}; its server is {server.address})"
        if int(out["status"]) == 2:
            return ConfigError(message)
        return WorkerError(message, context=f"round {self.round}")

    async def _ended(self, server: _Server, what: str, why: str) -> Exception:
        """The error of a stream that ended (a write refused, no answer): its final status says why, when it has one."""
        try:
            code = await asyncio.wait_for(server.call.code(), 5.0)
            details = await asyncio.wait_for(server.call.details(), 5.0)
        except Exception:  # noqa: BLE001 - no status to read: the connection is gone
            return _Lost(why)
        if code == self.grpc.StatusCode.OK:
            return _Lost(why)
        return self._rpc_error(server, code, details, what)

    def _rpc_error(self, server: _Server, code, details: str | None, what: str) -> Exception:
        grpc = self.grpc
        details = details or ""
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            log.error("%s sent an oversized message in answer to %s: %s", server.label, what, details)
            return self._invalid(server, f"larger than the {server.answer_bound()} bytes an answer of its zones can take")
        if code == grpc.StatusCode.PERMISSION_DENIED or code == grpc.StatusCode.UNAUTHENTICATED:
            return ConfigError(f"{server.label} refused the coordinator: {details}")
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.ABORTED, grpc.StatusCode.UNKNOWN,
                    grpc.StatusCode.INTERNAL):
            return _Lost(details)
        return WorkerError(f"{server.label} failed during {what}: {code.name}", context=f"round {self.round}")

    # ------------------------------------------------------------------------------------------- set-up
    async def _connect(self, server: _Server, deadline: float) -> None:
        """Open ``server``'s stream and set its zones up, waiting for it until ``deadline`` (monotonic)."""
        delay = 0.05
        while True:
            try:
                await self._open(server)
                fields = {**self.setup, "zones": np.asarray(server.zones, dtype=np.int64), "run": self.run_id}
                _, ready = await self._exchange(server, "SETUP", fields, self.settings.round_timeout, "its set-up")
                self._check_ready(server, ready)
                return
            except _Lost as exc:
                if "Connection refused" not in str(exc) and str(exc) not in ("busy", "no session"):
                    host, port = parse_address(server.address, "zone address")
                    why = await asyncio.to_thread(probe_tls, host, port, server.name, self.settings)
                    if why is not None:
                        raise ConfigError(f"the connection to {server.label} is refused: {why}") from None
                if time.monotonic() + delay > deadline:
                    raise WorkerError(f"{server.label} is not reachable (waited {self.settings.zone_timeout:g} s, "
                                      f"--zone-timeout): {exc}", context=f"round {self.round}") from None
                await asyncio.sleep(delay)
                delay = min(2 * delay, 1.0)

    def _check_ready(self, server: _Server, ready: dict) -> None:
        zones = [int(z) for z in ready["zones"]]
        shared = [int(n) for n in ready["shared"]]
        if zones != server.zones or len(shared) != len(zones):
            raise self._invalid(server, f"its set-up answer names zones {zones}, not {server.zones}")
        for z, n in zip(zones, shared):
            if n != server.sizes[z]:
                raise ConfigError(f"zone {z} holds {n} shared values, the coordinator's public files {server.sizes[z]}: the two "
                                  f"sides hold different public files (its server is {server.address})")

    async def _connect_all(self) -> None:
        deadline = time.monotonic() + self.settings.zone_timeout
        results = await asyncio.gather(*[self._connect(s, deadline) for s in self.servers], return_exceptions=True)
        _raise_first(results)

    # ------------------------------------------------------------------------------------------- requests
    async def _request(self, server: _Server, kind: str, fields: dict, what: str) -> tuple[str, dict]:
        """One request, with a dropped server waited for and brought back to where the run is (module docstring)."""
        if server.failed:
            raise WorkerError(f"{server.label} failed earlier in the run", context=f"round {self.round}")
        try:
            return await self._exchange(server, kind, fields, self.settings.round_timeout, what)
        except _Lost as exc:
            if not self.ready:
                raise WorkerError(f"{server.label} was lost during {what}: {exc}", context=f"round {self.round}") from None
            log.warning("%s was lost during %s (%s); waiting up to %g s for it (--zone-timeout)", server.label, what, exc,
                        self.settings.zone_timeout)
        try:
            await self._recover(server, what)
        except BaseException:
            server.failed = True
            raise
        try:
            return await self._exchange(server, kind, fields, self.settings.round_timeout, what)
        except _Lost as exc:
            raise WorkerError(f"{server.label} was lost again during {what}: {exc}", context=f"round {self.round}") from None

    async def _recover(self, server: _Server, what: str) -> None:
        """A server that came back: its zones set up anew, restored from their own checkpoint, the rounds since replayed."""
        deadline = time.monotonic() + self.settings.zone_timeout
        await self._connect(server, deadline)
        try:
            base = self.checkpoint_round
            if base is None:
                kind, out = await self._exchange(server, "INIT", {}, self.settings.round_timeout, "its initial projection (replay)")
                self._check_updates(server, out, 0, server.zones)
                base = 0
                for u in wire.updates_of(out["updates"]):
                    if not np.array_equal(u.released, self.released.get(0, {}).get(u.zone, u.released)):
                        raise WorkerError(f"zone {u.zone}'s initial projection differs from the one it sent: it cannot resume "
                                          "identically", context=f"round {self.round}")
                if self.journaled:  # lost before the first checkpoint: its journal starts again (nothing released since)
                    await self._exchange(server, "JOURNAL", {"run": self.run_id}, self.settings.round_timeout, "its release journal")
            else:
                await self._exchange(server, "RESTORE", {"round": base, "run": self.run_id}, self.settings.round_timeout,
                                     f"its checkpoint of round {base}")
            replayed = 0
            for t in [t for t in sorted(self.sent) if t > base]:
                messages = [self.sent[t][z] for z in server.zones]
                released = [{"zone": z, "values": self.released[t][z]} for z in server.zones if z in self.released.get(t, {})]
                if len(released) != len(messages):  # the round the server dropped in: sent again by the caller
                    break
                await self._exchange(server, "REPLAY", {"messages": messages, "released": released}, self.settings.round_timeout,
                                     f"round {t} (replay)")
                replayed += 1
        except _Lost as exc:
            raise WorkerError(f"{server.label} was lost again while it resumed: {exc}", context=f"round {self.round}") from None
        log.warning("%s is back: restored from %s and replayed %d round(s); the run goes on", server.label,
                    "its initial projection" if self.checkpoint_round is None else f"round {self.checkpoint_round}", replayed)

    def _all(self, kind: str, fields_of, what: str) -> list[tuple[str, dict]]:
        """``kind`` to every server at once (``fields_of(server)``); every answer awaited, then the first error raised."""

        async def go():
            return await asyncio.gather(*[self._request(s, kind, fields_of(s), what) for s in self.servers],
                                        return_exceptions=True)

        results = self._run(go())
        _raise_first(results)
        return results

    def _check_updates(self, server: _Server, out: dict, round: int, zones: list[int]) -> list[ZoneUpdate]:
        """The zones' releases of ``round``: exactly ``zones``, each once, the expected number of finite values."""
        updates = wire.updates_of(out["updates"])
        got = [u.zone for u in updates]
        if sorted(got) != sorted(zones) or len(set(got)) != len(got):
            raise self._invalid(server, f"it answered for zones {got}, not {zones}")
        for u in updates:
            check_message(u)
            if u.round != round:
                raise self._invalid(server, f"zone {u.zone} answered round {u.round}, not {round}")
            if u.released.shape != (server.sizes[u.zone],):
                raise self._invalid(server, f"zone {u.zone} released {u.released.size} values, not {server.sizes[u.zone]}")
            if not np.all(np.isfinite(u.released)):
                raise self._invalid(server, f"zone {u.zone} released a value that is not a finite number")
        spent = out["spent"]
        if sorted(int(s["zone"]) for s in spent) != sorted(zones):
            raise self._invalid(server, "its privacy spend names other zones")
        for s in spent:
            eps = float(s["epsilon"])
            if not (eps >= 0):  # NaN or negative
                raise self._invalid(server, f"zone {int(s['zone'])}'s privacy spend is not a number >= 0")
            self.spent[int(s["zone"])] = eps
        return updates

    def _updates(self, kind: str, fields_of, round: int, what: str) -> list[ZoneUpdate]:
        answers = self._all(kind, fields_of, what)
        updates: list[ZoneUpdate] = []
        for server, (got, out) in zip(self.servers, answers):
            if got != "UPDATES":
                raise self._invalid(server, f"it answered {what} with {got}")
            updates.extend(self._check_updates(server, out, round, server.zones))
        updates.sort(key=lambda u: u.zone)
        self.released[round] = {u.zone: u.released for u in updates}
        return updates

    def _acks(self, kind: str, fields_of, what: str) -> None:
        for server, (got, _) in zip(self.servers, self._all(kind, fields_of, what)):
            if got != "ACK":
                raise self._invalid(server, f"it answered {what} with {got}")

    # ------------------------------------------------------------------------------------------- the Backend
    def initialize(self) -> list[ZoneUpdate]:
        return self._updates("INIT", lambda s: {}, 0, "the initial projection")

    def step(self, messages: Sequence[ConsensusMessage]) -> list[ZoneUpdate]:
        self.round = messages[0].round if messages else self.round
        by_zone = {m.zone: m for m in messages}
        self.sent[self.round] = by_zone
        log.debug("round %d: %s", self.round, self.traffic.summary())
        return self._updates("STEP", lambda s: {"messages": [by_zone[z] for z in s.zones]}, self.round, f"round {self.round}")

    def diagnostics(self, with_solution: bool = False) -> list:
        if with_solution:  # the run's end: each zone's ledger report
            for server, (got, out) in zip(self.servers, self._all("REPORT", lambda s: {}, "the final report")):
                reports = out.get("reports", []) if got == "REPORTS" else None
                if reports is None or sorted(int(r["zone"]) for r in reports) != server.zones:
                    raise self._invalid(server, "its final report names other zones")
                for r in reports:
                    z, ledger = int(r["zone"]), r["ledger"]
                    if not (float(r["epsilon"]) >= 0) or not (ledger is None or (isinstance(ledger, dict) and ledger.get("zone") == z)):
                        raise self._invalid(server, f"zone {z}'s ledger report is not its own")
                    self.spent[z], self.privacy[z] = float(r["epsilon"]), ledger
        zones = sorted(z for s in self.servers for z in s.zones)
        return [wire.RemoteZoneReport(zone=z, epsilon_spent=self.spent.get(z, 0.0), privacy=self.privacy.get(z)) for z in zones]

    def call(self, method: str, by_zone: dict[int, Any]) -> dict[int, Any]:
        # the zone servers answer the rounds' requests only (net_server.py): an application's own agent method (the
        # implemented dispatch's "implement", a day's next period) has no request on the wire yet
        raise ConfigError(f"the net backend does not carry {method!r} to its zone servers (they answer the rounds only): "
                          "use the serial, process or MPI backend for it; the rounds and their releases are unaffected")

    def save_checkpoint(self, folders) -> None:
        self.run_id = folders.run
        self._acks("SAVE", lambda s: {"round": self.round, "run": folders.run}, f"the checkpoint of round {self.round}")
        self._checkpointed(self.round)

    def _checkpointed(self, round: int) -> None:
        self.checkpoint_round = round
        for d in (self.sent, self.released):
            for t in [t for t in d if t <= round]:
                del d[t]

    def load_checkpoint(self, folders, round: int) -> None:
        self.run_id = folders.run
        self.round = int(round)
        self._acks("RESTORE", lambda s: {"round": int(round), "run": folders.run}, f"the checkpoint of round {round}")
        self._checkpointed(int(round))

    def open_journals(self, folders) -> None:
        self.run_id = folders.run
        self._acks("JOURNAL", lambda s: {"run": folders.run}, "the release journals")
        self.journaled = True

    def prune_checkpoints(self, folders, round: int) -> None:
        self._acks("PRUNE", lambda s: {"round": int(round), "run": folders.run}, "the checkpoint pruning")

    def save_solutions(self, folders) -> None:
        self._acks("SOLUTIONS", lambda s: {"run": folders.run}, "the final solution")

    def setup_times(self) -> dict[int, dict[str, float]]:
        return {}  # each zone's set-up times stay with it (they time its private model)

    def host_memory(self) -> list[float]:
        return []  # so does its memory

    def network_traffic(self) -> dict[str, Any]:
        return self.traffic.summary()

    def close(self) -> None:
        if getattr(self, "loop", None) is None or self.loop.is_closed():
            return

        async def shut():
            for s in self.servers:
                if s.call is not None:
                    try:
                        await s.call.write(wire.encode("CLOSE"))
                        await asyncio.wait_for(s.call.read(), 2.0)
                        await s.call.done_writing()
                    except Exception:  # noqa: BLE001 - a server already gone
                        pass
                await self._close_channel(s)

        try:
            self._run(shut())
            self._run(_drain())  # gRPC's own tasks of the closed calls end before the loop does
            self._run(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()
        t = self.traffic.summary()
        log.info("net backend: %d messages, %d bytes with %d zone server(s) (largest %d bytes)", t["messages"], t["bytes"],
                 self.n_hosts, t["largest_bytes"])


async def _drain() -> None:
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


def _raise_first(results: list) -> None:
    errors = [r for r in results if isinstance(r, BaseException)]
    if not errors:
        return
    for e in errors:  # bad input and refusals first: they say what to fix
        if isinstance(e, ConfigError):
            raise e
    for e in errors:
        if isinstance(e, _Lost):
            raise WorkerError(f"a zone server was lost: {e}")
    raise errors[0]


def _config_json(config: ConsensusSettings) -> dict[str, Any]:
    """The run's settings as the zone servers receive them: the coordinator's own paths left out (certificates,
    the deployment folder: each zone has its own)."""
    d = dict(config.to_dict())
    for key in ("certs", "zones_at", "tls_cert", "tls_key", "tls_ca", "deployment"):
        d.pop(key, None)
    return d
