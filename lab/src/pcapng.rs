//! Captures as pcapng files, which Wireshark, tshark and tcpdump read: one
//! interface per link direction (named `a->b`, with nanosecond
//! timestamps), each frame in an Enhanced Packet Block with its direction
//! flag and, for what the link did to it, a comment (`dropped: loss`,
//! `dropped: queue`, `corrupted`, `ecn-marked`, `duplicate`).

use std::borrow::Cow;
use std::io::Write;
use std::time::Duration;

use pcap_file::DataLink;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};

use crate::error::{Error, Result};

/// One frame to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// When, Unix nanoseconds.
    pub unix_ns: i128,
    /// Which of the file's directions (its interface).
    pub direction: u32,
    /// The bytes captured.
    pub data: &'a [u8],
    /// Its length on the wire.
    pub original_len: u32,
    /// What to say of it (`None`: nothing).
    pub comment: Option<String>,
}

/// The `epb_flags` inbound bits (pcapng §4.3.1): the frame was received.
const INBOUND: u32 = 0b01;

/// A pcapng file being written.
pub struct Writer<W: Write> {
    inner: PcapNgWriter<W>,
}

impl<W: Write> std::fmt::Debug for Writer<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("pcapng::Writer").finish_non_exhaustive()
    }
}

fn failed(e: pcap_file::PcapError) -> Error {
    Error::Failed(format!("writing pcapng: {e}"))
}

impl<W: Write> Writer<W> {
    /// Starts a file whose interfaces are `directions` (e.g. `h1->s1`,
    /// `s1->h1`), each a link direction, described with `description`.
    pub fn new(
        out: W,
        directions: &[String],
        description: &str,
        snaplen: u32,
    ) -> Result<Writer<W>> {
        let mut inner = PcapNgWriter::new(out).map_err(failed)?;
        for name in directions {
            let idb = InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen,
                options: vec![
                    InterfaceDescriptionOption::IfName(Cow::Owned(name.clone())),
                    InterfaceDescriptionOption::IfDescription(Cow::Owned(description.to_owned())),
                    // The writer stores nanoseconds; say so.
                    InterfaceDescriptionOption::IfTsResol(9),
                ],
            };
            inner.write_pcapng_block(idb).map_err(failed)?;
        }
        Ok(Writer { inner })
    }

    /// Writes one frame.
    pub fn write(&mut self, r: &Record<'_>) -> Result<()> {
        let mut options = vec![EnhancedPacketOption::Flags(INBOUND)];
        if let Some(c) = &r.comment {
            options.push(EnhancedPacketOption::Comment(Cow::Owned(c.clone())));
        }
        let block = EnhancedPacketBlock {
            interface_id: r.direction,
            timestamp: Duration::from_nanos(u64::try_from(r.unix_ns).unwrap_or(0)),
            original_len: r.original_len,
            data: Cow::Borrowed(r.data),
            options,
        };
        self.inner.write_pcapng_block(block).map_err(failed)?;
        Ok(())
    }

    /// Flushes what was written.
    pub fn flush(&mut self) -> Result<()> {
        self.inner.get_mut().flush()?;
        Ok(())
    }
}

/// The comment of a captured frame: why it was dropped, or what the link
/// did to it.
pub fn comment(
    dropped: Option<&str>,
    corrupted: bool,
    ecn_marked: bool,
    duplicate: bool,
) -> Option<String> {
    if let Some(cause) = dropped {
        return Some(format!("dropped: {cause}"));
    }
    let marks: Vec<&str> = [
        (corrupted, "corrupted"),
        (ecn_marked, "ecn-marked"),
        (duplicate, "duplicate"),
    ]
    .into_iter()
    .filter_map(|(on, what)| on.then_some(what))
    .collect();
    (!marks.is_empty()).then(|| marks.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcapng::{Block, PcapNgReader};

    #[test]
    fn frames_read_back_with_their_direction_time_and_comment() {
        let mut out = Vec::new();
        {
            let mut w = Writer::new(
                &mut out,
                &["h1->s1".to_owned(), "s1->h1".to_owned()],
                "link h1--s1",
                65_535,
            )
            .unwrap();
            w.write(&Record {
                unix_ns: 1_796_218_191_123_456_789,
                direction: 1,
                data: &[1, 2, 3],
                original_len: 60,
                comment: comment(Some("loss"), false, false, false),
            })
            .unwrap();
            w.flush().unwrap();
        }
        let mut reader = PcapNgReader::new(&out[..]).unwrap();
        let mut names = Vec::new();
        let mut frames = Vec::new();
        while let Some(block) = reader.next_block() {
            match block.unwrap() {
                Block::InterfaceDescription(idb) => names.push(
                    idb.options
                        .iter()
                        .find_map(|o| match o {
                            InterfaceDescriptionOption::IfName(n) => Some(n.to_string()),
                            _ => None,
                        })
                        .unwrap(),
                ),
                Block::EnhancedPacket(epb) => frames.push(epb.into_owned()),
                _ => {}
            }
        }
        assert_eq!(names, ["h1->s1", "s1->h1"]);
        let f = &frames[0];
        assert_eq!(
            (f.interface_id, f.original_len, &f.data[..]),
            (1, 60, &[1u8, 2, 3][..])
        );
        assert_eq!(f.timestamp.as_nanos(), 1_796_218_191_123_456_789);
        assert!(
            f.options
                .contains(&EnhancedPacketOption::Comment("dropped: loss".into()))
        );
        assert_eq!(
            comment(None, true, false, true).as_deref(),
            Some("corrupted, duplicate")
        );
        assert_eq!(comment(None, false, false, false), None);
    }
}
