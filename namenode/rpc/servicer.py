"""The NameNode's gRPC face: a thin servicer over ``namesystem.Namesystem``.

Each method unpacks its request, calls the NameNode and packs the answer; ``calls._rpc`` serves
it (status codes for refusals, the retry cache, HA's revisions and redirects).

Who may call what is ``AUTHORIZATION``, the one table for this service (security/rpc.py enforces
it for every call, before the method runs; a method missing from it is refused): namespace calls
need a user's credential (file permissions, in the namesystem, decide the rest), the DataNode
protocol a DataNode's own, and health and administration calls an admin's.
"""

from __future__ import annotations

import dataclasses
import logging

from hedgefs.namenode import faults, model
from hedgefs.namenode.blocks.blockmap import GroupCommit
from hedgefs.namenode.errors import FailedPrecondition, InvalidArgument, NameNodeError
from hedgefs.namenode.ha.roles import NotActive, Single
from hedgefs.namenode.namespace.inodes import Entry
from hedgefs.namenode.namesystem import Namesystem
from hedgefs.namenode.rpc.calls import OBSERVER_READS, Call, _rpc, _status
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc
from hedgefs.security import material
from hedgefs.security import rpc as authz
from hedgefs.security.material import Credential, Identity
from hedgefs.security.rpc import caller

log = logging.getLogger("hedgefs.namenode")

_SCRUB_FIELDS = [f.name for f in dataclasses.fields(model.ScrubStatus)]

AUTHORIZATION: dict[str, authz.Rule] = {
    # namespace and the write path: any user (file permissions, and a write's owner, decide)
    **{name: authz.user() for name in (
        "Mkdir", "GetFileInfo", "List", "Delete", "Rename", "SetPolicy", "GetPolicy", "SetPermission",
        "SetOwner", "Create", "AddBlockGroup", "Complete", "Abandon", "RenewLease", "Concat",
        "SetTimes", "CreateSymlink", "SetXAttr", "RemoveXAttr", "GetXAttrs", "Append", "Truncate", "RecoverLease",
        "StatMany", "Mkdirs", "DeleteMany", "CreateMany", "Sync", "SyncLength")},
    # the DataNode protocol: a DataNode, for itself only
    "RegisterDataNode": authz.datanode(lambda r: [r.datanode_id]),
    "Heartbeat": authz.datanode(lambda r: [r.datanode_id]),
    "BlockReport": authz.datanode(lambda r: [r.datanode_id]),
    "UnitStored": authz.datanode(lambda r: [r.datanode_id]),
    "ReportBadUnits": authz.datanode(lambda r: [u.datanode_id for u in r.units]),
    # health and administration
    "Fsck": authz.admin(),
    "Report": authz.admin(),
    "Failover": authz.admin(),
    "IssueCredential": authz.admin(),
    "Decommission": authz.admin(),
    "SafeMode": authz.admin(),
    "Balance": authz.admin(),
}


def _entry(e: Entry) -> pb.FileInfo:
    out = pb.FileInfo(path=e.path, is_dir=e.is_dir, length=e.length, policy=e.policy,
                      block_size=e.block_size, mtime_ms=e.mtime_ms, owner=e.owner, group=e.group,
                      permission=e.mode, atime_ms=e.atime_ms, symlink=e.symlink, file_id=e.file_id,
                      last_group_code=e.last_group_code)
    if e.xattrs:
        out.xattrs.update(e.xattrs)
    return out


def _reopened(r: model.Reopened) -> pb.AppendResponse:
    out = pb.AppendResponse(write=_created(r.created), kept_length=r.kept_length, length=r.length,
                            mtime_ms=r.mtime_ms)
    if r.tail is not None:
        out.tail.CopyFrom(_group(r.tail))
    return out


def _unit(u: model.UnitLocation) -> pb.UnitLocation:
    return pb.UnitLocation(index=u.index, datanode_id=u.datanode_id, address=u.address, data_address=u.data_address,
                           token=u.token)


def _version(request, field: str) -> tuple[int, int] | None:
    """(length, mtime_ms) of a FileVersion field, None when unset."""
    if not request.HasField(field):
        return None
    v = getattr(request, field)
    return v.length, v.mtime_ms


def _commit_attrs(request: pb.CompleteRequest) -> model.CommitAttrs | None:
    """What a Complete's ``attributes`` set (None: nothing)."""
    if not request.HasField("attributes") or faults.as_before("commit_attributes"):
        return None
    a = request.attributes
    return model.CommitAttrs(a.permission if a.HasField("permission") else None, a.owner, a.group,
                             a.mtime_ms if a.HasField("mtime_ms") else None,
                             a.atime_ms if a.HasField("atime_ms") else None)


def _group(g: model.GroupInfo) -> pb.BlockGroup:
    return pb.BlockGroup(id=g.id, length=g.length, units=[_unit(u) for u in g.units], generation=g.generation,
                         policy=g.policy)


def _command(c: model.DeleteUnit | model.RepairUnit) -> pb.Command:
    if isinstance(c, model.DeleteUnit):
        return pb.Command(delete_unit=pb.DeleteUnitCommand(group_id=c.group_id, index=c.index,
                                                           generation=c.generation))
    return pb.Command(repair_unit=pb.RepairUnitCommand(
        group_id=c.group_id, index=c.index, policy=c.policy, group_length=c.group_length,
        sources=[_unit(u) for u in c.sources], generation=c.generation))


def _file_info(nn: Namesystem, info, request: pb.PathRequest) -> pb.FileInfo:
    """GetFileInfo's answer: the entry, a file's groups with their locations, and what the
    cluster knows of the DataNodes holding them. A group in its own code (an open tail) only to
    a client that reads groups so (``group_codes``): an older one would read its replicas as the
    file's cells."""
    if not request.group_codes and any(g.policy for g in info.groups):
        raise FailedPrecondition(f"{info.entry.path}: its last block group is in its own code (an open tail: "
                                 f"hsynced bytes not yet sealed) and this client library reads every group "
                                 f"in the file's code: upgrade the client (hedgefs >= the open tail, issue 45)")
    out = _entry(info.entry)
    out.groups.extend(_group(g) for g in info.groups)
    out.locations_pending = info.locations_pending
    if info.groups:
        out.token_lifetime_ms = nn.token_lifetime_ms
    if info.first_group is not None:   # ranged: where its groups sit, and no DataNode figures
        out.first_group, out.group_count = info.first_group, info.group_count
        return out
    if info.groups:
        held = [u.datanode_id for g in info.groups for u in g.units]
        for datanode_id, r in nn.datanode_reads(held).items():
            out.datanode_reads[datanode_id].CopyFrom(pb.ReadLatency(reads=r.reads, p50_ms=r.p50_ms, p99_ms=r.p99_ms))
        for datanode_id, age_s in nn.datanode_heartbeat_ages(held).items():
            out.datanode_heartbeat_age_ms[datanode_id] = int(age_s * 1000)
    return out


def _item(err: NameNodeError | None) -> pb.ItemResult:
    """One item's answer in a batched call: OK, or the status and message its single call gets."""
    return pb.ItemResult() if err is None else pb.ItemResult(code=_status(err).value[0], message=str(err))


def _created(c: model.Created) -> pb.CreateResponse:
    out = pb.CreateResponse(file_id=c.file_id, policy=c.policy, block_size=c.block_size,
                            lease_timeout_ms=c.lease_timeout_ms, min_units=c.min_units,
                            commit_attributes=not faults.as_before("commit_attributes"))
    if c.first_group is not None:
        out.first_group.CopyFrom(_group(c.first_group))
    return out


class NameNodeServicer(hedgefs_pb2_grpc.NameNodeServicer):
    """``role``: which NameNode serves what (ha/roles.py): ``Single(namenode)`` on SQLite; on etcd
    an ``HA``, whose standby answers observer reads (stat, list, policy) from its tree, keeps the
    DataNodes' reports (locations, liveness), and refuses the rest with NotActive."""

    def __init__(self, namenode: Namesystem | None, credential: Credential | None = None, role=None):
        self.role = role or Single(namenode)
        self.credential = credential      # a secure NameNode's: it holds the CA key

    @property
    def nn(self) -> Namesystem:
        """The active's namesystem (NotActive on a standby, or an active past its lease)."""
        return self.role.writer()

    def reader(self, call: Call) -> Namesystem:
        """The active's namesystem or a standby's; for an observer read, a standby's only once it
        has applied the client's last revision (read your writes; else NotActive)."""
        nn = self.role.reader()
        if call.method in OBSERVER_READS:
            self.role.caught_up(call.seen)
        return nn

    # namespace
    @_rpc
    def Mkdir(self, request, call):
        made = self.nn.mkdir(request.path, request.parents, caller(), call.retry,
                             request.permission if request.HasField("permission") else None)
        # Always an info: an empty one (present on the wire) for a retried call whose directory is
        # gone since; an older NameNode's answer (Empty) has none, and its client asks on (N3).
        return pb.MkdirResponse(info=_entry(made) if made is not None else pb.FileInfo())

    @_rpc
    def GetFileInfo(self, request, call):
        nn = self.reader(call)
        span = (request.range_offset, request.range_length) if request.HasField("range_offset") else None
        return _file_info(nn, nn.file_info(request.path, caller(), span, request.xattrs), request)

    # batched (issue 44): each item answered in its own slot (ItemResult), each change with its
    # own retry ids (call_ids[i])
    @_rpc
    def StatMany(self, request, call):
        nn = self.reader(call)
        out = pb.StatManyResponse()
        for info, p in zip(nn.file_infos([p.path for p in request.paths], caller(), [p.xattrs for p in request.paths]),
                           request.paths):
            if not isinstance(info, NameNodeError):
                try:
                    out.infos.append(_file_info(nn, info, p))
                    out.results.append(pb.ItemResult())
                    continue
                except FailedPrecondition as e:
                    info = e
            out.infos.append(pb.FileInfo())
            out.results.append(_item(info))
        return out

    @_rpc
    def Mkdirs(self, request, call):
        out = pb.MkdirsResponse()
        for made in self.nn.mkdir_many([(d.path, d.parents, d.permission if d.HasField("permission") else None)
                                        for d in request.dirs], caller(), call.retries(request.call_ids)):
            if isinstance(made, NameNodeError):
                out.results.append(_item(made))
                out.infos.append(pb.FileInfo())
            else:
                out.results.append(pb.ItemResult())
                out.infos.append(_entry(made) if made is not None else pb.FileInfo())
        return out

    @_rpc
    def DeleteMany(self, request, call):
        return pb.ItemsResponse(results=[_item(e) for e in self.nn.delete_many(
            [(d.path, d.recursive) for d in request.deletes], caller(), call.retries(request.call_ids))])

    @_rpc
    def CreateMany(self, request, call):
        items = [dict(path=c.path, overwrite=c.overwrite, policy=c.policy, block_size=c.block_size,
                      client_name=c.client_name, with_group=c.with_group, empty=c.empty) for c in request.creates]
        out = pb.CreateManyResponse()
        for created in self.nn.create_many(items, caller(), call.retries(request.call_ids)):
            if isinstance(created, NameNodeError):
                out.created.append(pb.CreateResponse())
                out.results.append(_item(created))
            else:
                out.created.append(_created(created))
                out.results.append(pb.ItemResult())
        return out

    @_rpc
    def List(self, request, call):
        entries, more = self.reader(call).list_page(request.path, request.recursive, request.start_after, request.limit,
                                                    caller(), request.xattrs)
        return pb.ListResponse(entries=[_entry(e) for e in entries], more=more)

    @_rpc
    def Delete(self, request, call):
        self.nn.delete(request.path, request.recursive, caller(), call.retry)
        return pb.Empty()

    @_rpc
    def Rename(self, request, call):
        self.nn.rename(request.src, request.dst, caller(), call.retry)
        return pb.Empty()

    @_rpc
    def SetPolicy(self, request, call):
        self.nn.set_policy(request.path, request.policy, caller(), call.retry)
        return pb.Empty()

    @_rpc
    def GetPolicy(self, request, call):
        nn = self.reader(call)
        policy, source = nn.get_policy(request.path, caller())
        return pb.PolicyResponse(policy=policy, source_path=source, default_block_size=nn.default_block_size)

    @_rpc
    def SetPermission(self, request, call):
        self.nn.set_permission(request.path, request.permission, caller(), call.retry)
        return pb.Empty()

    @_rpc
    def SetOwner(self, request, call):
        self.nn.set_owner(request.path, request.owner, request.group, caller(), call.retry)
        return pb.Empty()

    # write path
    @_rpc
    def Create(self, request, call):
        return _created(self.nn.create(request.path, request.overwrite, request.policy, request.block_size,
                                       request.client_name, _version(request, "convert_from"), caller(), call.retry,
                                       with_group=request.with_group, empty=request.empty))

    @_rpc
    def AddBlockGroup(self, request, call):
        return _group(self.nn.add_block_group(request.file_id, list(request.exclude_datanodes), caller(), call.retry))

    @_rpc
    def Complete(self, request, call):
        self.nn.complete(request.file_id, request.length,
                         [GroupCommit(g.group_id, g.length, tuple(g.stored_units)) for g in request.groups],
                         _version(request, "convert_from"), caller(), call.retry, _commit_attrs(request))
        return pb.Empty()

    @_rpc
    def Concat(self, request, call):
        self.nn.concat(request.target, list(request.sources), request.overwrite, caller(), call.retry)
        return pb.Empty()

    @_rpc
    def Abandon(self, request, call):
        self.nn.abandon(request.file_id, caller(), call.retry)
        return pb.Empty()

    @_rpc
    def RenewLease(self, request, call):
        self.nn.renew_lease(request.file_id, caller())
        return pb.Empty()

    # files that change
    @_rpc
    def SetTimes(self, request, call):
        self.nn.set_times(request.path, request.mtime_ms, request.atime_ms, caller(), call.retry)
        return pb.Empty()

    @_rpc
    def CreateSymlink(self, request, call):
        self.nn.symlink(request.target, request.path, caller(), call.retry)
        return pb.Empty()

    @_rpc
    def SetXAttr(self, request, call):
        self.nn.set_xattr(request.path, request.name, request.value, request.flags, caller(), call.retry)
        return pb.Empty()

    @_rpc
    def RemoveXAttr(self, request, call):
        self.nn.remove_xattr(request.path, request.name, caller(), call.retry)
        return pb.Empty()

    @_rpc
    def GetXAttrs(self, request, call):
        return pb.XAttrsResponse(xattrs=self.reader(call).get_xattrs(request.path, caller()))

    @_rpc
    def Append(self, request, call):
        rewrite_from = request.rewrite_from if request.HasField("rewrite_from") else None
        return _reopened(self.nn.append(request.path, request.client_name, caller(), call.retry, rewrite_from))

    @_rpc
    def Sync(self, request, call):
        return _reopened(self.nn.sync(request.file_id, request.path, request.length,
                                      [GroupCommit(g.group_id, g.length, tuple(g.stored_units)) for g in request.groups],
                                      caller(), call.retry, tuple(request.exclude_datanodes)))

    @_rpc
    def SyncLength(self, request, call):
        self.nn.sync_length(request.file_id, request.length, request.tail_group_id, caller(),
                            tuple(request.replicas))
        return pb.Empty()

    @_rpc
    def Truncate(self, request, call):
        rewrite = self.nn.truncate(request.path, request.length, request.client_name, caller(), call.retry)
        if rewrite is None:
            return pb.TruncateResponse(done=True)
        return pb.TruncateResponse(done=False, rewrite=_reopened(rewrite))

    @_rpc
    def RecoverLease(self, request, call):
        return pb.RecoverLeaseResponse(recovered=self.nn.recover_lease(request.path, caller(), call.retry))

    # health
    @_rpc
    def ReportBadUnits(self, request, call):
        self.datanodes.report_bad_units((u.group_id, u.index, u.generation, u.datanode_id, u.reason)
                                        for u in request.units)
        return pb.Empty()

    @_rpc
    def Fsck(self, request, call):
        r = self.nn.fsck(request.path or "/")
        return pb.FsckResponse(
            files=r.files, groups=r.groups, healthy=r.healthy, degraded=r.degraded, missing=r.missing,
            status=r.status, corrupt_files=r.corrupt_files, misplaced=r.misplaced,
            problems=[pb.FsckProblem(path=p.path, group_id=p.group_id, live_units=p.live_units,
                                     needed_units=p.needed_units, status=p.status, corrupt_units=p.corrupt_units,
                                     total_units=p.total_units, policy=p.policy, detail=p.detail)
                      for p in r.problems])

    @_rpc
    def Report(self, request, call):
        reader = self.reader(call)
        r = reader.report()   # a standby's too: its role, and the DataNodes it hears
        return pb.ReportResponse(
            groups_waiting_repair=r.groups_waiting_repair, repairs_done=r.repairs_done, corrupt_units=r.corrupt_units,
            blocks_under_replicated=r.blocks_under_replicated, low_space_pct=r.low_space_pct,
            datanodes=[pb.DataNodeInfo(id=d.id, address=d.address, data_address=d.data_address, state=d.state,
                                       last_heartbeat_age_ms=d.last_heartbeat_age_ms, used_bytes=d.used_bytes,
                                       units=d.units, pending_repairs=d.pending_repairs,
                                       pending_deletes=d.pending_deletes, foreign_units=d.foreign_units,
                                       capacity_bytes=d.capacity_bytes, remaining_bytes=d.remaining_bytes,
                                       shares_filesystem_with=list(d.shares_filesystem_with), low_space=d.low_space,
                                       admin_state=d.admin_state, units_mapped=d.units_mapped,
                                       host_id=d.host_id, rack=d.rack,
                                       scrub=pb.ScrubStatus(**dataclasses.asdict(d.scrub)) if d.scrub else None)
                       for d in r.datanodes],
            namenode=pb.NameNodeRole(**self.role.describe(),
                                     safe_mode_detail=_safe_mode(reader.safe_mode_state())))

    @_rpc
    def Decommission(self, request, call):
        do = self.nn.recommission if request.recommission else self.nn.decommission
        state, units = do(request.datanode_id)
        log.warning("%s of %s at the request of %s", "recommission" if request.recommission else "decommission",
                    request.datanode_id, caller())
        return pb.DecommissionResponse(admin_state=state, units_mapped=units)

    @_rpc
    def SafeMode(self, request, call):
        state = self.nn.safe_mode(request.action or "get")
        if request.action in ("enter", "leave"):
            log.warning("safe mode %s at the request of %s", request.action, caller())
        return _safe_mode(state)

    @_rpc
    def Balance(self, request, call):
        state = self.nn.balance(request.max_bytes, request.threshold_pct, request.restart)
        if request.restart:
            log.warning("balance started at the request of %s", caller())
        return pb.BalanceResponse(**dataclasses.asdict(state))

    @_rpc
    def Failover(self, request, call):
        if not self.role.handover():
            raise NotActive(self.role.active_address())
        log.warning("handed over at the request of %s: this NameNode is a standby now", caller())
        return pb.Empty()

    # security
    @_rpc
    def IssueCredential(self, request, call):
        cred = self.credential
        if cred is None or cred.ca_key_pem is None:
            raise FailedPrecondition("this cluster is not secure (or its NameNode holds no CA key): no credentials "
                                     "to issue")
        if request.role not in (material.USER, material.ADMIN, material.DATANODE):
            raise InvalidArgument(f"a credential is for a user, an admin or a DataNode, not {request.role!r}")
        identity = Identity(request.name, request.role, tuple(request.groups))
        try:
            cert = material.issue(cred.ca_key_pem, cred.ca_pem, identity, request.public_key_pem,
                                  request.days or material.DAYS)
        except ValueError as err:
            raise InvalidArgument(f"cannot issue a credential: {err}") from None
        log.info("issued a credential for %s (%s) at the request of %s", identity, ",".join(identity.groups) or
                 "no groups", caller())
        return pb.IssueCredentialResponse(
            certificate_pem=cert, ca_pem=cred.ca_pem, cluster_id=cred.cluster_id,
            cluster_key=cred.cluster_key if request.role == material.DATANODE else b"")

    # DataNode protocol: to every NameNode of an HA pair (a standby keeps the locations they
    # report, and replies without commands: active=false)
    @property
    def datanodes(self) -> Namesystem:
        return self.role.namesystem_for_datanodes()

    @_rpc
    def RegisterDataNode(self, request, call):
        nn = self.datanodes
        cluster_id = nn.register(request.datanode_id, request.address, request.data_address, request.cluster_id,
                                 request.storage_id, request.host_id, request.rack)
        return pb.RegisterResponse(cluster_id=cluster_id, epoch=self.role.epoch, active=self.role.is_active())

    @_rpc
    def Heartbeat(self, request, call):
        nn = self.datanodes
        reply = nn.heartbeat(request.datanode_id, request.address, request.used_bytes, request.units,
                             request.active_repairs, _stats(request) if request.HasField("stats") else None,
                             request.data_address, [(u.group_id, u.index, u.generation) for u in request.deleted])
        active = self.role.is_active()
        return pb.HeartbeatResponse(commands=[_command(c) for c in reply.commands] if active else [],
                                    reregister=reply.reregister, epoch=self.role.epoch, active=active)

    @_rpc
    def BlockReport(self, request, call):
        self.datanodes.block_report(request.datanode_id, [(u.group_id, u.index, u.generation) for u in request.units],
                                    request.part, request.more)
        return pb.Empty()

    @_rpc
    def UnitStored(self, request, call):
        self.datanodes.units_stored(request.datanode_id, [(u.group_id, u.index, u.generation) for u in request.units])
        return pb.Empty()


def authorizer(secure: bool) -> authz.Authorizer:
    """The interceptor that enforces ``AUTHORIZATION`` on this service."""
    return authz.Authorizer("NameNode", AUTHORIZATION, secure=secure)


def _safe_mode(s: model.SafeModeState) -> pb.SafeModeResponse:
    # (the wire's units_reported/units_total carry the groups: readable ones, all)
    return pb.SafeModeResponse(on=s.on, reason=s.reason, units_reported=s.groups_readable, units_total=s.groups_total,
                               share=s.share, deadline_left_s=s.deadline_left_s)


def _latency(r: pb.ReadLatency) -> model.ReadLatency:
    return model.ReadLatency(r.minute, r.reads, r.p50_ms, r.p99_ms)


def _stats(request: pb.HeartbeatRequest) -> model.DataNodeStats:
    s = request.stats
    return model.DataNodeStats(s.capacity_bytes, s.http_port,
                               _latency(s.recent_reads) if s.HasField("recent_reads") else None,
                               tuple(_latency(m) for m in s.read_minutes), tuple(sorted(s.faults.items())),
                               model.ScrubStatus(**{f: getattr(s.scrub, f) for f in _SCRUB_FIELDS})
                               if s.HasField("scrub") else None, s.remaining_bytes, s.filesystem)
