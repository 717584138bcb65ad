#!/usr/bin/env python3
"""Drives the turbonet soft switch with an independent P4Runtime client: the
`p4runtime` package's generated Python code over `grpcio`.

Usage: interop.py ADDR P4INFO_PATH   (ADDR is host:port)

Covers: Capabilities; arbitration (a primary, then a backup that gets
ALREADY_EXISTS); SetForwardingPipelineConfig and GetForwardingPipelineConfig;
writes (table entries, action profile members and groups, the default
action); wildcard reads; a rejected batch whose per-update p4.v1.Error
details carry the right codes; a backup's write refused; counters read.
Exits 0 when every check passes, 1 (with the failed check) otherwise.
"""

import os

# The p4runtime wheel's generated code predates the upb protobuf runtime;
# the pure-Python runtime accepts it (and is fast enough for a test).
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

import queue  # noqa: E402
import sys  # noqa: E402

import grpc  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from google.rpc import code_pb2, status_pb2  # noqa: E402
from p4.config.v1 import p4info_pb2  # noqa: E402
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc  # noqa: E402

DEVICE_ID = 1
TIMEOUT = 5


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


class Stream:
    """One StreamChannel: requests go through a queue."""

    def __init__(self, stub):
        self.requests = queue.Queue()
        self.responses = stub.StreamChannel(iter(self.requests.get, None))

    def arbitrate(self, election_id):
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = DEVICE_ID
        req.arbitration.election_id.high = 0
        req.arbitration.election_id.low = election_id
        self.requests.put(req)
        return next(self.responses).arbitration

    def close(self):
        self.requests.put(None)
        self.responses.cancel()


def ids(p4info):
    """Resolves names to ids from the P4Info, as a controller does."""
    out = {}
    for kind in ("tables", "actions", "action_profiles", "counters"):
        for obj in getattr(p4info, kind):
            out[obj.preamble.alias] = obj.preamble.id
    return out


def exact(field_id, value):
    m = p4runtime_pb2.FieldMatch(field_id=field_id)
    m.exact.value = value
    return m


def lpm(field_id, value, prefix_len):
    m = p4runtime_pb2.FieldMatch(field_id=field_id)
    m.lpm.value = value
    m.lpm.prefix_len = prefix_len
    return m


def action(action_id, *params):
    a = p4runtime_pb2.Action(action_id=action_id)
    for pid, value in params:
        a.params.add(param_id=pid, value=value)
    return a


def write(stub, election_id, updates):
    req = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID)
    req.election_id.low = election_id
    req.updates.extend(updates)
    return stub.Write(req, timeout=TIMEOUT)


def update(kind, **entity):
    u = p4runtime_pb2.Update(type=kind)
    u.entity.CopyFrom(p4runtime_pb2.Entity(**entity))
    return u


def read(stub, *entities):
    req = p4runtime_pb2.ReadRequest(device_id=DEVICE_ID)
    req.entities.extend(entities)
    out = []
    for resp in stub.Read(req, timeout=TIMEOUT):
        out.extend(resp.entities)
    return out


def write_errors(err):
    """The per-update p4.v1.Error list of a failed Write (spec 12.3)."""
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            status.ParseFromString(value)
            errors = []
            for detail in status.details:
                e = p4runtime_pb2.Error()
                check(detail.Unpack(e), "detail is a p4.v1.Error")
                errors.append(e)
            return errors
    raise AssertionError("no grpc-status-details-bin in the Write error")


def main(addr, p4info_path):
    p4info = p4info_pb2.P4Info()
    with open(p4info_path) as f:
        text_format.Parse(f.read(), p4info)
    n = ids(p4info)

    channel = grpc.insecure_channel(addr)
    grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)

    caps = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=TIMEOUT)
    check(caps.p4runtime_api_version.startswith("1."), "Capabilities: " + caps.p4runtime_api_version)

    primary = Stream(stub)
    arb = primary.arbitrate(10)
    check(arb.status.code == code_pb2.OK, "election id 10 is primary")
    backup = Stream(stub)
    arb = backup.arbitrate(5)
    check(arb.status.code == code_pb2.ALREADY_EXISTS and arb.election_id.low == 10,
          "election id 5 is a backup (ALREADY_EXISTS, primary 10)")

    req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
        device_id=DEVICE_ID,
        action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    req.election_id.low = 10
    req.config.p4info.CopyFrom(p4info)
    req.config.cookie.cookie = 42
    stub.SetForwardingPipelineConfig(req, timeout=TIMEOUT)
    got = stub.GetForwardingPipelineConfig(
        p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE),
        timeout=TIMEOUT)
    check(got.config.p4info == p4info and got.config.cookie.cookie == 42,
          "GetForwardingPipelineConfig returns the P4Info and cookie")

    insert = p4runtime_pb2.Update.INSERT
    port_entry = p4runtime_pb2.TableEntry(table_id=n["port_mapper"])
    port_entry.match.extend([exact(1, b"\x01"), exact(2, b"\x01"), exact(3, b"\x0a")])
    port_entry.action.action.CopyFrom(action(n["set_vport"], (1, b"\x01"), (2, b"\x05"),
                                            (3, b"\x00"), (4, b"\x00")))
    member = p4runtime_pb2.ActionProfileMember(
        action_profile_id=n["ecmp_selector"], member_id=1,
        action=action(n["set_next_hop"], (1, b"\x02"), (2, b"\x02\x00\x00\x00\x00\x02"),
                      (3, b"\x02\x00\x00\x00\x00\x01")))
    group = p4runtime_pb2.ActionProfileGroup(action_profile_id=n["ecmp_selector"], group_id=7)
    group.members.add(member_id=1, weight=1)
    route = p4runtime_pb2.TableEntry(table_id=n["ipv4_lpm"])
    route.match.extend([exact(1, b"\x01"), lpm(2, b"\x0a\x01\x00\x00", 16)])
    route.action.action_profile_group_id = 7
    default = p4runtime_pb2.TableEntry(table_id=n["local"], is_default_action=True)
    default.action.action.CopyFrom(action(n["to_cpu"]))
    write(stub, 10, [
        update(insert, table_entry=port_entry),
        update(insert, action_profile_member=member),
        update(insert, action_profile_group=group),
        update(insert, table_entry=route),
        update(p4runtime_pb2.Update.MODIFY, table_entry=default),
    ])
    print("ok: wrote 2 table entries, a member, a group and a default action")

    entries = read(stub, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))
    check(len(entries) == 2, "wildcard read of every table returns 2 entries")
    got = read(stub, p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=n["port_mapper"])))
    check(len(got) == 1 and got[0].table_entry == port_entry, "port_mapper entry reads back as written")
    got = read(stub, p4runtime_pb2.Entity(action_profile_group=p4runtime_pb2.ActionProfileGroup()))
    check(len(got) == 1 and got[0].action_profile_group == group, "group reads back")
    got = read(stub, p4runtime_pb2.Entity(
        table_entry=p4runtime_pb2.TableEntry(table_id=n["local"], is_default_action=True)))
    check(got[0].table_entry == default, "default action reads back")

    host_bits = p4runtime_pb2.TableEntry(table_id=n["ipv4_lpm"])
    host_bits.match.extend([exact(1, b"\x01"), lpm(2, b"\x0a\x02\x00\x01", 24)])
    host_bits.action.action_profile_member_id = 1
    wide = p4runtime_pb2.TableEntry(table_id=n["port_mapper"])
    wide.match.extend([exact(1, b"\x02"), exact(2, b"\x01"), exact(3, b"\x0a")])
    wide.action.action.CopyFrom(action(n["set_vport"], (1, b"\x01"), (2, b"\x01\x00\x00"),
                                     (3, b"\x00"), (4, b"\x00")))
    good = p4runtime_pb2.TableEntry(table_id=n["port_mapper"])
    good.match.extend([exact(1, b"\x03"), exact(2, b"\x01"), exact(3, b"\x0a")])
    good.action.action.CopyFrom(action(n["drop"]))
    try:
        write(stub, 10, [update(insert, table_entry=host_bits), update(insert, table_entry=wide),
                         update(insert, table_entry=good), update(insert, table_entry=port_entry)])
        raise AssertionError("the malformed batch was accepted")
    except grpc.RpcError as err:
        check(err.code() == grpc.StatusCode.UNKNOWN, "malformed batch fails with UNKNOWN")
        codes = [e.canonical_code for e in write_errors(err)]
        check(codes == [code_pb2.INVALID_ARGUMENT, code_pb2.OUT_OF_RANGE, code_pb2.OK,
                        code_pb2.ALREADY_EXISTS],
              "per-update errors: LPM host bits INVALID_ARGUMENT, wide param OUT_OF_RANGE, "
              "good OK, duplicate ALREADY_EXISTS (got %s)" % codes)

    try:
        write(stub, 5, [update(p4runtime_pb2.Update.DELETE, table_entry=good)])
        raise AssertionError("the backup's write was accepted")
    except grpc.RpcError as err:
        check(err.code() == grpc.StatusCode.PERMISSION_DENIED, "a backup's Write is PERMISSION_DENIED")

    counter = p4runtime_pb2.CounterEntry(counter_id=n["vport_rx"])
    counter.index.index = 3
    got = read(stub, p4runtime_pb2.Entity(counter_entry=counter))
    check(len(got) == 1 and got[0].counter_entry.data.packet_count == 0, "counter cell reads")

    backup.close()
    primary.close()
    channel.close()
    print("interop: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: interop.py ADDR P4INFO_PATH")
    try:
        main(sys.argv[1], sys.argv[2])
    except (AssertionError, grpc.RpcError) as e:
        print("FAILED:", e, file=sys.stderr)
        sys.exit(1)
