"""The cluster file: where the scheduler is, the TLS files, which Dask worker is the server host and which
are the generator hosts. Paths inside it are relative to the file. Format: docs/many-machines.md."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tls(_Strict):
    ca: str  # the CA every node's certificate is signed by (netarena cluster certs DIR: ca.pem)
    cert: str  # this client's certificate and key (client.pem, client.key)
    key: str


class ServerHost(_Strict):
    worker: Annotated[str, Field(min_length=1)]  # the Dask worker name (dask worker --name)
    address: Annotated[str, Field(min_length=1)]  # the address generators connect to: the only target allowed


class GeneratorHosts(_Strict):
    workers: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    # Optional, per worker name: netarena-load --source-ips on that host (addresses assigned to it).
    source_ips: dict[str, str] = {}
    # Below this many generator hosts left (after some died) the run stops instead of going on.
    min_hosts: Annotated[int, Field(ge=1)] = 1


class ClusterSpec(_Strict):
    scheduler: Annotated[str, Field(pattern=r"^tls://")]
    tls: Tls
    server: ServerHost
    generators: GeneratorHosts
    # A host that stops answering is given up after this long (the scheduler's worker-ttl should match).
    heartbeat_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 10.0
    # Lab only: the network namespace the orchestrator enters to reach the scheduler (netarena lab up).
    netns: str | None = None

    @model_validator(mode="after")
    def _roles(self):
        if self.server.worker in self.generators.workers:
            raise ValueError(f"worker {self.server.worker!r} is both the server host and a generator host; the "
                             "server and the load must not share a host")
        if len(set(self.generators.workers)) != len(self.generators.workers):
            raise ValueError("generators.workers names a worker twice")
        unknown = set(self.generators.source_ips) - set(self.generators.workers)
        if unknown:
            raise ValueError(f"generators.source_ips names {sorted(unknown)}, which are not generator workers")
        return self


def load_cluster(path: Path) -> tuple[ClusterSpec, Path]:
    """The parsed cluster file and its folder (TLS paths are relative to it); ConfigError naming what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("cluster file not found (make one with `netarena lab up`, or see docs/many-machines.md)",
                          path=path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", path=path) from None
    try:
        spec = ClusterSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise ConfigError(f"{where}: {err['msg']}", path=path) from None
    base = path.parent.absolute()
    for name in ("ca", "cert", "key"):
        file = base / getattr(spec.tls, name)
        if not file.is_file():
            raise ConfigError(f"tls.{name}: {file} does not exist (`netarena cluster certs DIR` makes the files)",
                              path=path)
    return spec, base


def security(spec: ClusterSpec, base: Path):
    """The client's Dask TLS settings: encryption required, our certificate, peers checked against the CA."""
    from distributed.security import Security

    return Security(tls_ca_file=str(base / spec.tls.ca), tls_client_cert=str(base / spec.tls.cert),
                    tls_client_key=str(base / spec.tls.key), require_encryption=True)
