"""Runs across hosts: the server on one host, the load spread over several, through Dask distributed.

- spec.py: the cluster file (`netarena run --cluster FILE`, `netarena cluster check FILE`).
- certs.py: the TLS certificates of the control plane (`netarena cluster certs DIR`).
- tasks.py: what runs on the hosts, as Dask tasks pinned to one worker each: the contestant started,
  verified and monitored on the server host with the single-host backend's own code (backend.RealBackend),
  netarena-load with its `--prepare` start barrier on each generator host.
- backend.py: the orchestrator's side, a backend like backend.RealBackend for runner.Runner: one start
  time for every generator, the documents merged exactly, hosts lost mid-measurement noticed.
- lab.py: a cluster of network namespaces on one machine (`netarena lab up|down`).

docs/many-machines.md describes all of it for users.
"""


class ClusterError(Exception):
    """A cluster that cannot be used as described: the message says what is wrong and how to fix it."""
