"""The external backend: measuring a server netarena did not start (`netarena run --url`, netarena.plan.external
describes the server and plans the run). Nothing is installed, started or stopped; the responses are verified
before each measurement and the real backend's load and monitoring run against the server."""

from __future__ import annotations

import psutil

from ..plan.external import ExternalServer
from ..store import now_iso
from .base import conclude, failed, timeouts
from .real import RealBackend


class ExternalBackend(RealBackend):
    """RealBackend's load and monitoring against a server that is already running (nothing started or stopped)."""

    name = "external"
    # The server's certificate is its own (an https:// URL trusted through --cacert or --insecure): the run makes
    # none of its own (Runner).
    makes_run_certificate = False

    def prepare(self, server: ExternalServer, allow_apt: bool, say, parts=()) -> dict:
        return server.describe()

    def measure(self, req, progress=lambda text: None) -> dict:
        server: ExternalServer = req.contestant
        record = req.base_record()
        record["started_at"] = now_iso()
        record["port"] = server.port
        progress("verifying")
        verification = server.verify(req.scenario, req.static_dir, req.timeout_s)
        record["verification"] = verification.to_dict()
        if not verification.ok:
            kind = "not_ready" if verification.retryable else "verify_failed"
            return failed(record, kind, f"{server.url}: {verification.reason}", None)
        generator, gen_error = self.load(record, lambda level: server.load_spec(req.scenario, level, req.static_dir),
                                         server.pid, req, progress)
        crashed = None
        if server.pid is not None and not psutil.pid_exists(server.pid):
            crashed = f"the server process {server.pid} exited while under load"
        hang = None
        if crashed is None and gen_error is None and timeouts(generator):
            progress("checking")
            after = server.verify(req.scenario, req.static_dir, req.timeout_s)
            hang = {"ok": after.ok, "reason": None if after.ok else after.reason}
            record["verification"] = dict(record["verification"], after_load=hang)
        return conclude(record, generator, crashed=crashed, gen_error=gen_error, hang=hang,
                        timeout_s=req.timeout_s, log_path=None)
