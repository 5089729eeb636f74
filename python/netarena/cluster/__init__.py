"""Runs across hosts: the server on one host, the load spread over several, through Dask distributed.

- spec.py: the cluster file (`netarena run --cluster FILE`, `netarena cluster check FILE`).
- certs.py: the TLS certificates of the control plane (`netarena cluster certs DIR`).
- lab.py: a cluster of network namespaces on one machine (`netarena lab up|down`).
- netns.py: entering a network namespace; the one a host's installs run in (the lab's: the machine's own).

The backend that runs a suite on a cluster is netarena.backends.cluster (the orchestrator's side: one start
time for every generator, the documents merged exactly, hosts lost mid-measurement noticed) with
netarena.backends.cluster_tasks (what runs on the hosts, as Dask tasks pinned to one worker each: the
contestant started, verified and monitored on the server host with the real backend's own code,
netarena-load with its `--prepare` start barrier on each generator host).

docs/many-machines.md describes all of it for users.
"""


class ClusterError(Exception):
    """A cluster that cannot be used as described: the message says what is wrong and how to fix it."""
