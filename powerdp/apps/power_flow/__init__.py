"""Distributed optimal power flow: the run configuration, the zone agent, the deployment's files, the runner and
its result."""
