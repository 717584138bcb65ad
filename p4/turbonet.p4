/*
 * turbonet.p4 — the turbonet pipeline (P4_16, v1model, so BMv2's
 * simple_switch_grpc runs it).
 *
 * One physical switch carries many virtual switches of an emulated fabric.
 * TurboNet's vocabulary:
 *
 *   port mapper   (physical ingress port, 802.1Q tag) -> (virtual switch,
 *                 virtual port). Loopback cables, inter-switch cables and
 *                 host ports are shared by many virtual links, told apart
 *                 by their tag.
 *   L3            per virtual switch: LPM on the IPv4 destination, ECMP
 *                 through an action selector (5-tuple hash), ARP answered
 *                 in the data plane for the switch's gateway addresses,
 *                 traffic for the switch itself (BGP) punted to the CPU
 *                 port as PacketIn.
 *   queue mapper  virtual egress port -> (physical port, tag, queue); the
 *                 queue is shaped to the virtual link's rate by the
 *                 target's traffic manager (BMv2: priority queues with
 *                 set_queue_rate; Tofino: per-queue shaping).
 *   delayed queue the virtual link's delay: after its queue, the packet
 *                 recirculates, its departure time in a header of its
 *                 own, until it is due. Delays are in ticks of the
 *                 target's global timestamps: BMv2's are microseconds,
 *                 Tofino's nanoseconds; the controller converts
 *                 (turbonet_p4::pipeline::Target). Only a recirculated
 *                 packet may carry that header: a frame of EtherType
 *                 0x88b5 from a port is not parsed as one.
 *   loss          a 32-bit random draw against the link's threshold
 *                 (probability x 2^32): 1e-8 is 43, so it is representable.
 *   host links    a link with one end outside the pipeline (a host) has
 *                 its host-to-switch direction impaired where its frames
 *                 enter: the port mapper gives that direction's delay and
 *                 loss, drawn at once and added to the egress delay.
 *   counters      packets and bytes per virtual port, both directions.
 *
 * The control plane (turbonet, over P4Runtime) fills every table from the
 * mapper's plan and the routing FIB. p4c's outputs of this file, BMv2 JSON
 * and P4Info, are p4/build/ (scripts/compile-p4 writes them and their
 * provenance).
 *
 * For TNA (Tofino) the structure stays; what changes:
 *   - ingress/egress intrinsic metadata: ig_intr_md.ingress_port,
 *     ig_intr_md_for_tm.ucast_egress_port and .qid for the queue mapper
 *     (v1model's standard_metadata.egress_spec and .priority here);
 *   - the action selector is an ActionProfile + ActionSelector extern with
 *     a Hash<bit<16>> over the 5-tuple;
 *   - random: Random<bit<32>>() extern;
 *   - the delayed queue: recirculation through a port in loopback mode
 *     (or the Tofino 2 "ghost thread"/queue pause for long delays), with
 *     the due time in a bridged header; timestamps from
 *     ig_intr_md.ingress_mac_tstamp (48-bit ns);
 *   - counters: Counter<bit<64>, bit<16>>(N, CounterType_t.PACKETS_AND_BYTES);
 *   - PacketIn/PacketOut through the CPU PCIe port (192 on Tofino 1) with
 *     the same controller_header.
 */

#include <core.p4>
#include <v1model.p4>

/* Sizes. */
#define MAX_VPORTS      16384   /* virtual ports over all virtual switches */
#define LPM_SIZE        262144  /* routes over all virtual switches */
#define MAP_SIZE        16384
#define SELECTOR_SIZE   65536
#define CPU_PORT        255
/* BMv2's standard_metadata.instance_type of a recirculated packet
 * (simple_switch's PKT_INSTANCE_TYPE_RECIRC). */
#define INSTANCE_TYPE_RECIRC 4

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<16> ETHERTYPE_VLAN = 0x8100;
const bit<16> ETHERTYPE_DELAY = 0x88b5;   /* IEEE local experimental */


typedef bit<9>  port_t;
typedef bit<16> vswitch_t;
typedef bit<16> vport_t;

/* ---- headers ---- */

@controller_header("packet_in")
header packet_in_t {
    bit<16> vswitch;      /* the virtual switch the packet is for */
    bit<16> vport;        /* its virtual ingress port */
}

@controller_header("packet_out")
header packet_out_t {
    bit<16> vswitch;      /* send as this virtual switch ... */
    bit<16> vport;        /* ... out of this virtual port */
}

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header vlan_t {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;          /* the port mapper's tag */
    bit<16> ether_type;
}

/* Carried between passes while a packet waits in the delayed queue. */
header delay_t {
    bit<48> due;          /* departure time, global timestamp ticks */
    bit<9>  port;         /* physical egress port ... */
    bit<3>  queue;        /* ... and queue it was mapped to */
    bit<4>  pad;
    bit<16> vport;        /* virtual egress port (counters) */
    bit<16> ether_type;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    bit<48> sha;
    bit<32> spa;
    bit<48> tha;
    bit<32> tpa;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> checksum;
    bit<32> src;
    bit<32> dst;
}

header l4_ports_t {
    bit<16> src;
    bit<16> dst;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    vlan_t       vlan;
    delay_t      delay;
    arp_t        arp;
    ipv4_t       ipv4;
    l4_ports_t   l4;
}

struct metadata_t {
    bit<12>   vid;              /* the tag, 0 when untagged (parser) */
    vswitch_t vswitch;
    vport_t   vport_in;
    vport_t   vport_out;
    bit<32>   loss_threshold;   /* drop when random < threshold */
    bit<48>   delay;            /* global timestamp ticks */
    bit<48>   in_delay;         /* host links: the inbound direction's */
    bit<32>   in_loss_threshold;
    bit<16>   l4_src;
    bit<16>   l4_dst;
}

/* ---- parser ---- */

parser TurbonetParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    state start {
        meta.vid = 0;
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_vlan;
            ETHERTYPE_DELAY: check_delay;
            ETHERTYPE_ARP: parse_arp;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_vlan {
        packet.extract(hdr.vlan);
        meta.vid = hdr.vlan.vid;
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_ARP: parse_arp;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    /* The delay header is the pipeline's own, written in egress before a
     * packet recirculates: from a port (a host could send anything) it is
     * not parsed, so ingress never trusts its port and queue. */
    state check_delay {
        transition select(standard_metadata.instance_type) {
            INSTANCE_TYPE_RECIRC: parse_delay;
            default: accept;
        }
    }
    state parse_delay {
        packet.extract(hdr.delay);
        transition select(hdr.delay.ether_type) {
            ETHERTYPE_VLAN: parse_vlan;
            ETHERTYPE_ARP: parse_arp;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            6: parse_l4;
            17: parse_l4;
            default: accept;
        }
    }
    state parse_l4 {
        packet.extract(hdr.l4);
        meta.l4_src = hdr.l4.src;
        meta.l4_dst = hdr.l4.dst;
        transition accept;
    }
}

control TurbonetVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/* ---- ingress ---- */

control TurbonetIngress(inout headers_t hdr, inout metadata_t meta,
                        inout standard_metadata_t standard_metadata) {

    counter(MAX_VPORTS, CounterType.packets_and_bytes) vport_rx;
    counter(MAX_VPORTS, CounterType.packets_and_bytes) vport_tx;
    counter(MAX_VPORTS, CounterType.packets) vport_lost;
    counter(MAX_VPORTS, CounterType.packets) vport_rx_lost;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* Port mapper. */
    action set_vport(vswitch_t vswitch, vport_t vport,
                     bit<48> delay, bit<32> loss_threshold) {
        meta.vswitch = vswitch;
        meta.vport_in = vport;
        meta.in_delay = delay;
        meta.in_loss_threshold = loss_threshold;
    }
    table port_mapper {
        key = {
            standard_metadata.ingress_port : exact;
            /* Tagged or not, then the tag (0 when untagged): BMv2 does not
             * zero the fields of a header that was not extracted, so the
             * parser copies the tag. */
            hdr.vlan.isValid()             : exact;
            meta.vid                       : exact;
        }
        actions = { set_vport; drop; }
        default_action = drop();
        size = MAP_SIZE;
    }

    /* ARP for the virtual switch's own addresses (gateways, link ends). */
    action arp_reply(bit<48> mac) {
        hdr.arp.oper = 2;
        hdr.arp.tha = hdr.arp.sha;
        bit<32> asked = hdr.arp.tpa;
        hdr.arp.tpa = hdr.arp.spa;
        hdr.arp.spa = asked;
        hdr.arp.sha = mac;
        hdr.ethernet.dst = hdr.ethernet.src;
        hdr.ethernet.src = mac;
        meta.vport_out = meta.vport_in;     /* back where it came from */
    }
    table arp_responder {
        key = {
            meta.vswitch : exact;
            hdr.arp.tpa  : exact;
        }
        actions = { arp_reply; drop; }
        default_action = drop();
        size = MAP_SIZE;
    }

    /* Traffic for the virtual switch itself (BGP, ping) goes to the CPU. */
    action to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.vswitch = meta.vswitch;
        hdr.packet_in.vport = meta.vport_in;
    }
    table local {
        key = {
            meta.vswitch : exact;
            hdr.ipv4.dst : exact;
        }
        actions = { to_cpu; NoAction; }
        default_action = NoAction();
        size = MAP_SIZE;
    }

    /* L3: LPM per virtual switch, ECMP through the selector. */
    action set_next_hop(vport_t vport, bit<48> dmac, bit<48> smac) {
        meta.vport_out = vport;
        hdr.ethernet.dst = dmac;
        hdr.ethernet.src = smac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    /* 16-bit hash; at most 16 members per group (ECMP width). */
    @max_group_size(16)
    action_selector(HashAlgorithm.crc16, SELECTOR_SIZE, 16) ecmp_selector;
    table ipv4_lpm {
        key = {
            meta.vswitch   : exact;
            hdr.ipv4.dst   : lpm;
            hdr.ipv4.src   : selector;
            hdr.ipv4.dst   : selector;
            hdr.ipv4.protocol : selector;
            meta.l4_src    : selector;
            meta.l4_dst    : selector;
        }
        actions = { set_next_hop; to_cpu; drop; }
        default_action = drop();
        implementation = ecmp_selector;
        size = LPM_SIZE;
    }

    /* Queue mapper: virtual egress port -> physical port, tag, queue;
     * the link's delay and loss come with it. */
    action set_egress(port_t port, bit<12> tag, bit<3> queue,
                      bit<48> delay, bit<32> loss_threshold) {
        standard_metadata.egress_spec = port;
        standard_metadata.priority = queue;
        meta.delay = meta.in_delay + delay;
        meta.loss_threshold = loss_threshold;
        /* Tag 0: the port is untagged (a host port of one host link). */
        if (tag != 0) {
            hdr.vlan.setValid();
            hdr.vlan.vid = tag;
            hdr.vlan.ether_type = hdr.ethernet.ether_type;
            hdr.ethernet.ether_type = ETHERTYPE_VLAN;
        }
    }
    table queue_mapper {
        key = {
            meta.vport_out : exact;
        }
        actions = { set_egress; drop; }
        default_action = drop();
        size = MAX_VPORTS;
    }

    apply {
        /* From the control plane: out of the given virtual port, neither
         * counted nor lost (the one place queue_mapper is applied is
         * shared by both paths: BMv2 allows a table one call site). */
        bool from_cpu = hdr.packet_out.isValid();
        if (from_cpu) {
            meta.vswitch = hdr.packet_out.vswitch;
            meta.vport_out = hdr.packet_out.vport;
            hdr.packet_out.setInvalid();
        } else if (hdr.delay.isValid()) {
            /* Back from the delayed queue (only a recirculated packet has
             * the header, see the parser): to the same port and queue;
             * egress decides whether it is due. */
            standard_metadata.egress_spec = hdr.delay.port;
            standard_metadata.priority = hdr.delay.queue;
            return;
        } else {
            port_mapper.apply();
            vport_rx.count((bit<32>)meta.vport_in);
            if (meta.in_loss_threshold != 0) {
                bit<32> in_draw;
                random(in_draw, 0, 32w0xffffffff);
                if (in_draw < meta.in_loss_threshold) {
                    vport_rx_lost.count((bit<32>)meta.vport_in);
                    drop();
                    return;
                }
            }
        }
        if (hdr.vlan.isValid()) {
            hdr.ethernet.ether_type = hdr.vlan.ether_type;
            hdr.vlan.setInvalid();
        }
        if (!from_cpu) {
            if (hdr.arp.isValid()) {
                arp_responder.apply();
            } else if (hdr.ipv4.isValid()) {
                if (local.apply().hit) {
                    return;
                }
                if (hdr.ipv4.ttl <= 1) {
                    to_cpu();       /* the control plane answers (ICMP) */
                    return;
                }
                ipv4_lpm.apply();
            } else {
                drop();
                return;
            }
            if (standard_metadata.egress_spec == CPU_PORT) {
                return;
            }
        }
        queue_mapper.apply();
        if (from_cpu) {
            return;
        }

        /* Loss: one 32-bit draw against the threshold. */
        bit<32> draw;
        random(draw, 0, 32w0xffffffff);
        if (draw < meta.loss_threshold) {
            vport_lost.count((bit<32>)meta.vport_out);
            drop();
            return;
        }
        vport_tx.count((bit<32>)meta.vport_out);
    }
}

/* ---- egress ---- */

/* The delayed queue. A packet first goes through its mapped queue (so the
 * link's rate applies before its delay, as on a wire), then, while it is
 * not due, recirculates instead of leaving: v1model recirculates at the
 * end of egress. Its due time, port and queue ride in the delay header. */
control TurbonetEgress(inout headers_t hdr, inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.delay.isValid()) {
            if (standard_metadata.egress_global_timestamp < hdr.delay.due) {
                recirculate_preserving_field_list(0);
                return;
            }
            hdr.ethernet.ether_type = hdr.delay.ether_type;
            hdr.delay.setInvalid();
        } else if (meta.delay != 0) {
            hdr.delay.setValid();
            hdr.delay.due = standard_metadata.ingress_global_timestamp + meta.delay;
            hdr.delay.port = standard_metadata.egress_port;
            hdr.delay.queue = standard_metadata.priority;
            hdr.delay.pad = 0;
            hdr.delay.vport = meta.vport_out;
            hdr.delay.ether_type = hdr.ethernet.ether_type;
            hdr.ethernet.ether_type = ETHERTYPE_DELAY;
            recirculate_preserving_field_list(0);
        }
    }
}

control TurbonetComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.checksum,
            HashAlgorithm.csum16);
    }
}

control TurbonetDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.delay);
        packet.emit(hdr.vlan);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.l4);
    }
}

V1Switch(
    TurbonetParser(),
    TurbonetVerifyChecksum(),
    TurbonetIngress(),
    TurbonetEgress(),
    TurbonetComputeChecksum(),
    TurbonetDeparser()
) main;
