//! Plain netlink messages, for what netlink-packet-route cannot say (netem
//! options, nexthop objects): attributes written, messages and their
//! answers walked.

/// `NLMSG_ERROR`: the kernel's answer to a request with `NLM_F_ACK` (an
/// error number, 0 for success).
pub(super) const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
pub(super) const NLMSG_DONE: u16 = 3;

/// The `RTM_*` message kinds this crate reads or writes by hand.
pub(super) const RTM_NEWLINK: u16 = 16;
pub(super) const RTM_DELLINK: u16 = 17;
pub(super) const RTM_NEWROUTE: u16 = 24;
pub(super) const RTM_DELROUTE: u16 = 25;
pub(super) const RTM_NEWNEXTHOP: u16 = 104;
pub(super) const RTM_DELNEXTHOP: u16 = 105;
pub(super) const RTM_GETNEXTHOP: u16 = 106;

/// Appends one netlink attribute (struct nlattr, host order), padded to 4.
pub(super) fn put(out: &mut Vec<u8>, kind: u16, value: &[u8]) {
    let len = u16::try_from(4 + value.len()).expect("netlink attributes are small");
    out.extend_from_slice(&len.to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(out.len().next_multiple_of(4), 0);
}

/// One netlink message of a buffer: its type, sequence number and
/// payload.
pub(super) struct Message<'a> {
    pub(super) kind: u16,
    pub(super) seq: u32,
    pub(super) payload: &'a [u8],
}

/// The messages of one read, in order; a truncated tail is left out.
pub(super) fn messages(mut buf: &[u8]) -> impl Iterator<Item = Message<'_>> {
    std::iter::from_fn(move || {
        if buf.len() < 16 {
            return None;
        }
        let len = u32::from_ne_bytes(buf[0..4].try_into().expect("4 bytes")) as usize;
        if len < 16 || len > buf.len() {
            return None;
        }
        let m = Message {
            kind: u16::from_ne_bytes(buf[4..6].try_into().expect("2 bytes")),
            seq: u32::from_ne_bytes(buf[8..12].try_into().expect("4 bytes")),
            payload: &buf[16..len],
        };
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
        Some(m)
    })
}

/// The error number of an `NLMSG_ERROR` payload (0: an acknowledgement),
/// or of an `NLMSG_DONE`'s (0: the dump is complete).
pub(super) fn error_code(payload: &[u8]) -> i32 {
    payload
        .get(..4)
        .map_or(0, |b| -i32::from_ne_bytes(b.try_into().expect("4 bytes")))
}
