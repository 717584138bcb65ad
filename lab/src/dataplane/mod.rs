//! Data planes: what carries a lab's frames. The `netns` target builds the
//! fabric out of namespaces and veth links in this machine's kernel
//! ([`netns`]); the P4 targets run it in the turbonet pipeline on P4
//! switches, turbonet's soft switch, BMv2 or remote P4Runtime servers
//! ([`p4`]).

pub mod carrier;
pub mod netns;
pub mod p4;

pub use carrier::Carrier;
