"""Where new units may go: usable DataNodes (live and registered with this process), those with
room for a unit, and the refusals when too few are (FAILED_PRECONDITION, or INVALID_ARGUMENT for
a policy nothing could be placed with). A mixin of ``Namesystem`` (its liveness, registrations
and decommission state)."""

from __future__ import annotations

from typing import Iterable

from hedgefs.ec.policy import Policy
from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument
from hedgefs.namenode.namespace import load_policy  # noqa: F401 (the mixin's callers)


class Targets:
    def _usable(self, datanode_id: str) -> bool:
        """Live and registered with this process: may take units, serve repairs, hold a unit."""
        return datanode_id in self._registered and self.liveness.is_live(datanode_id)

    def _usable_ids(self) -> list[str]:
        return [d for d in self.liveness.live_ids() if d in self._registered]

    def _live_targets(self, policy: Policy, exclude: Iterable[str] = ()) -> list[str]:
        """Usable DataNodes a group may use; FAILED_PRECONDITION if fewer than k+m."""
        excluded = set(exclude)
        live = self._placeable_ids()
        usable = [d for d in live if d not in excluded]
        if len(usable) < policy.units:
            if len(live) < policy.units:
                self._refuse_while_datanodes_register(policy, len(live))
            message = f"policy {policy.name} needs {policy.units} live DataNodes, only {len(live)} are live{self._leaving_note()}"
            if len(live) >= policy.units:
                message = (f"policy {policy.name} needs {policy.units} live DataNodes, only {len(usable)} "
                           f"are live and not excluded ({', '.join(sorted(excluded & set(live)))})")
            raise FailedPrecondition(message)
        return usable

    def _targets_with_room(self, policy: Policy, exclude: Iterable[str], unit_bytes: int) -> list[str]:
        """_live_targets with room for a unit of ``unit_bytes`` (HDFS's remaining-space check):
        a full disk is never chosen; FAILED_PRECONDITION if fewer than k+m have room."""
        usable = self._live_targets(policy, exclude)
        roomy = [d for d in usable if self.liveness.has_room(d, unit_bytes)]
        if len(roomy) < policy.units:
            full = sorted(set(usable) - set(roomy))
            raise FailedPrecondition(f"policy {policy.name} needs {policy.units} DataNodes with room for a unit "
                                     f"of {unit_bytes} bytes, only {len(roomy)} have it (full: {', '.join(full)})")
        return roomy

    def _check_placeable(self, policy: Policy) -> None:
        """A policy needing more DataNodes than are live is bad input: nothing could be placed.
        (Every Create asks: it counts only up to what the policy needs, not every DataNode.)"""
        live = 0
        for d in self._registered:
            if d not in self.leaving and self.liveness.is_live(d):
                live += 1
                if live >= policy.units:
                    return
        live = len(self._placeable_ids())
        if live < policy.units:
            self._refuse_while_datanodes_register(policy, live)
            raise InvalidArgument(f"policy {policy.name} needs {policy.units} live DataNodes, only {live} are live"
                                  f"{self._leaving_note()}")
