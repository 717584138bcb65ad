/* turbonet's link model as a tc program: the kernel engine.
 *
 * The same pipeline as turbonet-injectors' `Direction`, decision for
 * decision: loss (Bernoulli or Gilbert-Elliott) -> duplication ->
 * corruption of each copy -> a finite queue drained at the link's rate
 * (tail drop, ECN marking) -> propagation delay and uniform jitter -> a due
 * time. Every random draw comes from the direction's ChaCha8 stream, the
 * one `rand_chacha::ChaCha8Rng` produces for the same key, in the same
 * order, so the kernel and the userspace engine give the same drops, marks,
 * corruptions and due times for the same seed and arrivals (turbonet's
 * tests prove it frame by frame with BPF_PROG_TEST_RUN).
 *
 * Where it runs: at the tc ingress of a link's port in the engine
 * namespace. A frame the model passes is cloned to the far port's egress,
 * whose `fq` qdisc holds it until its due time (the earliest-departure-time
 * model: `tn_stamp` below writes the due time into the clone's tstamp),
 * and the original is consumed, which releases the sender's socket
 * accounting as a real link's transmission would. A frame the model drops
 * is shot, so tc's drop counter is the model's.
 *
 * The layouts of the maps are mirrored in `src/abi.rs`; change both. */

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#define INLINE static __attribute__((always_inline)) inline

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static long (*bpf_skb_load_bytes)(const struct __sk_buff *skb, __u32 off, void *to, __u32 len) =
	(void *)BPF_FUNC_skb_load_bytes;
static long (*bpf_skb_store_bytes)(struct __sk_buff *skb, __u32 off, const void *from, __u32 len,
				   __u64 flags) = (void *)BPF_FUNC_skb_store_bytes;
static long (*bpf_spin_lock)(struct bpf_spin_lock *lock) = (void *)BPF_FUNC_spin_lock;
static long (*bpf_spin_unlock)(struct bpf_spin_lock *lock) = (void *)BPF_FUNC_spin_unlock;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)BPF_FUNC_ktime_get_ns;
static long (*bpf_clone_redirect)(struct __sk_buff *skb, __u32 ifindex, __u64 flags) =
	(void *)BPF_FUNC_clone_redirect;

/* ---- The maps (mirrored in src/abi.rs) ---- */

/* A probability compiled for a 64-bit draw (injectors' `Chance`): the
 * event happens when a uniform u64 is below `below`; NEVER and ALWAYS draw
 * nothing. */
#define CHANCE_NEVER 0
#define CHANCE_ALWAYS 1
#define CHANCE_BELOW 2
struct tn_chance {
	__u64 below;
	__u32 kind;
	__u32 _pad;
};

#define LOSS_NONE 0
#define LOSS_BERNOULLI 1
#define LOSS_GILBERT_ELLIOTT 2

#define LIMIT_NONE 0
#define LIMIT_PACKETS 1
#define LIMIT_BYTES 2

/* The parameters of one direction: what `turbonet link set` changes. */
struct tn_params {
	__u32 loss_model;
	__u32 egress_ifindex;
	/* Bernoulli: `loss_p` only. Gilbert-Elliott: the chain's moves
	 * (good -> bad `p`, bad -> good `r`) and the loss in each state. */
	struct tn_chance loss_p, loss_r, loss_bad, loss_good;
	struct tn_chance corrupt, duplicate;
	__u32 has_rate;
	__u32 queue_kind;    /* LIMIT_PACKETS or LIMIT_BYTES (with a rate) */
	__u64 rate_bps;      /* 0 with has_rate: nothing ever leaves */
	__u64 queue_limit;
	__u32 ecn_kind;      /* LIMIT_NONE: no marking */
	__u32 has_jitter;
	__u64 ecn_threshold;
	__u64 delay_ns;
	__u64 jitter_ns;     /* uniform in [-jitter, +jitter] */
	__u32 reorder;       /* jitter may reorder */
	__u32 _pad;
};

/* Read under its own lock, so a change never rolls the state back. */
struct tn_config {
	struct bpf_spin_lock lock;
	__u32 _pad;
	struct tn_params p;
};

/* The queue holds frames whose transmission has not ended, in admission
 * (and so tx_end) order: a ring of their end times and the running total
 * of bytes admitted. A direction's queue limit is at most RING frames
 * (src/abi.rs refuses larger ones). */
#define RING 1024
struct tn_slot {
	__u64 tx_end;
	__u64 cum_bytes; /* bytes admitted up to and including this frame */
};

/* The most draws one frame makes: loss (Gilbert-Elliott: 2), duplication
 * (1), and for each of two copies corruption (2) and jitter (1). */
#define DRAWS_MAX 9

struct tn_state {
	struct bpf_spin_lock lock;
	__u32 ge_bad;
	/* The ChaCha8 stream: its key, how many 32-bit words were drawn and
	 * how many computed; buf holds words [filled - 64, filled), word w at
	 * w & 63. Only 64-bit draws are made, so `drawn` stays even. */
	__u32 key[8];
	__u64 drawn;
	__u64 filled;
	__u32 buf[64];
	__u64 last_now;
	__u64 last_tx_end;
	__u64 last_due;
	__u32 head, tail; /* ring indices, free running */
	__u64 cum_total;  /* bytes ever admitted to the queue */
	__u64 cum_head;   /* of which before `head` (transmitted) */
	/* What the direction did. */
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 dropped_loss;
	__u64 dropped_queue;
	__u64 corrupted;
	__u64 duplicated;
	__u64 ecn_marked;
	__u64 transmit_errors; /* clones the far port's qdisc refused */
};

/* A direction's queue: kept apart from the state so that reading the
 * counters copies a few hundred bytes, not the ring. Only [head, tail)
 * means anything, so a fresh direction needs no clearing. */
struct tn_ring {
	struct tn_slot slot[RING];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set to the number of directions at load */
	__type(key, __u32);
	__type(value, struct tn_config);
} tn_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tn_state);
} tn_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tn_ring);
} tn_ring SEC(".maps");

/* The direction a port's ingress feeds: port ifindex -> direction. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} tn_ports SEC(".maps");

/* The due time of the clone being sent, handed from the ingress program
 * to `tn_stamp` at the far port's egress, which runs inside the redirect
 * on the same CPU. */
struct tn_scratch {
	__u64 due;
	__u64 armed;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tn_scratch);
} tn_scratch SEC(".maps");

/* What the model decided for each copy of the last frame (test runs). */
#define VERDICT_NONE 0
#define VERDICT_PASS 1
#define VERDICT_LOSS 2
#define VERDICT_QUEUE 3
#define NO_BIT 0xffffffffu
struct tn_trace {
	__u64 due[2];
	__u32 verdict[2];
	__u32 bit[2];
	__u32 marked[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tn_trace);
} tn_trace SEC(".maps");

/* Set at load: 1 in test runs, where the clock is the caller's (cb[0],
 * cb[1]), the direction is cb[2], and nothing is transmitted: the
 * decisions go to tn_trace. */
const volatile __u32 tn_test_mode = 0;

/* ---- The random stream: ChaCha8 as rand_chacha 0.9 computes it ---- */

#define ROTL(v, n) (((v) << (n)) | ((v) >> (32 - (n))))
#define QR(a, b, c, d)                           \
	do {                                     \
		a += b; d ^= a; d = ROTL(d, 16); \
		c += d; b ^= c; b = ROTL(b, 12); \
		a += b; d ^= a; d = ROTL(d, 8);  \
		c += d; b ^= c; b = ROTL(b, 7);  \
	} while (0)

/* Computes the next 16-word block (block counter filled / 16, stream id
 * 0) into its place in buf. */
INLINE void refill(struct tn_state *st)
{
	__u64 block = st->filled / 16;
	__u32 x0 = 0x61707865, x1 = 0x3320646e, x2 = 0x79622d32, x3 = 0x6b206574;
	__u32 x4 = st->key[0], x5 = st->key[1], x6 = st->key[2], x7 = st->key[3];
	__u32 x8 = st->key[4], x9 = st->key[5], x10 = st->key[6], x11 = st->key[7];
	__u32 x12 = (__u32)block, x13 = (__u32)(block >> 32), x14 = 0, x15 = 0;
#pragma nounroll
	for (int i = 0; i < 4; i++) { /* four double rounds: ChaCha8 */
		QR(x0, x4, x8, x12);
		QR(x1, x5, x9, x13);
		QR(x2, x6, x10, x14);
		QR(x3, x7, x11, x15);
		QR(x0, x5, x10, x15);
		QR(x1, x6, x11, x12);
		QR(x2, x7, x8, x13);
		QR(x3, x4, x9, x14);
	}
	__u32 *out = &st->buf[st->filled & 48];
	out[0] = x0 + 0x61707865;
	out[1] = x1 + 0x3320646e;
	out[2] = x2 + 0x79622d32;
	out[3] = x3 + 0x6b206574;
	out[4] = x4 + st->key[0];
	out[5] = x5 + st->key[1];
	out[6] = x6 + st->key[2];
	out[7] = x7 + st->key[3];
	out[8] = x8 + st->key[4];
	out[9] = x9 + st->key[5];
	out[10] = x10 + st->key[6];
	out[11] = x11 + st->key[7];
	out[12] = x12 + (__u32)block;
	out[13] = x13 + (__u32)(block >> 32);
	out[14] = x14;
	out[15] = x15;
	st->filled += 16;
}

/* Computes blocks ahead so that the frame's draws need no refill. */
INLINE void top_up(struct tn_state *st)
{
#pragma nounroll
	for (int i = 0; i < 2; i++)
		if (st->filled - st->drawn < 2 * DRAWS_MAX)
			refill(st);
}

/* rand_core's next_u64: the next two words, low first. */
INLINE __u64 next_u64(struct tn_state *st)
{
	__u32 w = st->drawn & 62;
	__u64 v = (__u64)st->buf[w] | ((__u64)st->buf[w + 1] << 32);
	st->drawn += 2;
	return v;
}

/* The high 64 bits of a 64x64-bit product. */
INLINE __u64 mulhi64(__u64 a, __u64 b)
{
	__u64 al = (__u32)a, ah = a >> 32, bl = (__u32)b, bh = b >> 32;
	__u64 ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
	__u64 mid = (ll >> 32) + (__u32)lh + (__u32)hl;
	return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

INLINE int happens(struct tn_state *st, const struct tn_chance *c)
{
	if (c->kind == CHANCE_NEVER)
		return 0;
	if (c->kind == CHANCE_ALWAYS)
		return 1;
	return next_u64(st) < c->below;
}

INLINE __u64 sat_add(__u64 a, __u64 b)
{
	__u64 s = a + b;
	return s < a ? ~0ULL : s;
}

/* ---- The model (under the direction's lock) ---- */

INLINE int lost(struct tn_state *st, const struct tn_params *cfg)
{
	if (cfg->loss_model == LOSS_BERNOULLI)
		return happens(st, &cfg->loss_p);
	if (cfg->loss_model != LOSS_GILBERT_ELLIOTT)
		return 0;
	/* The chain moves first, then the frame is lost with the
	 * probability of the state it lands in. */
	if (st->ge_bad) {
		if (happens(st, &cfg->loss_r))
			st->ge_bad = 0;
	} else if (happens(st, &cfg->loss_p)) {
		st->ge_bad = 1;
	}
	return st->ge_bad ? happens(st, &cfg->loss_bad) : happens(st, &cfg->loss_good);
}

/* Frames whose transmission ended by `now` leave the queue: the first
 * slot still transmitting is found by bisection (tx_end never decreases
 * along the ring). */
INLINE void expire(struct tn_state *st, const struct tn_ring *q, __u64 now)
{
	__u32 head = st->head, tail = st->tail;
	if (head == tail || q->slot[head & (RING - 1)].tx_end > now)
		return;
	if (q->slot[(tail - 1) & (RING - 1)].tx_end <= now) {
		st->head = tail;
		st->cum_head = st->cum_total;
		return;
	}
	/* ring[lo] has ended, ring[hi] has not. */
	__u32 lo = head, hi = tail - 1;
#pragma nounroll
	for (int i = 0; i < 11; i++) { /* log2(RING) + 1 */
		if (hi - lo <= 1)
			break;
		__u32 mid = lo + (hi - lo) / 2;
		if (q->slot[mid & (RING - 1)].tx_end <= now)
			lo = mid;
		else
			hi = mid;
	}
	st->head = hi;
	st->cum_head = q->slot[lo & (RING - 1)].cum_bytes;
}

/* ceil(len * 8e9 / rate) nanoseconds; never for a zero rate. */
INLINE __u64 transmit_time(__u64 len, __u64 rate)
{
	if (rate == 0)
		return ~0ULL;
	__u64 bits = len * 8 * 1000000000ULL;
	__u64 t = bits / rate;
	return bits % rate ? t + 1 : t;
}

struct copy {
	__u64 due;
	__u32 verdict;
	__u32 bit;
	__u32 above; /* the queue was at or over the ECN threshold */
};

/* The rate queue, then the delay: the frame's verdict and due time. */
INLINE void admit(struct tn_state *st, struct tn_ring *q, const struct tn_params *cfg, __u64 now,
		  __u64 len, struct copy *c)
{
	__u64 tx_end = now;
	if (cfg->has_rate) {
		__u64 depth_p = st->tail - st->head;
		__u64 depth_b = st->cum_total - st->cum_head;
		int full = cfg->queue_kind == LIMIT_PACKETS ? depth_p + 1 > cfg->queue_limit
							     : depth_b + len > cfg->queue_limit;
		if (full) {
			st->dropped_queue++;
			c->verdict = VERDICT_QUEUE;
			return;
		}
		if (cfg->ecn_kind == LIMIT_PACKETS)
			c->above = depth_p >= cfg->ecn_threshold;
		else if (cfg->ecn_kind == LIMIT_BYTES)
			c->above = depth_b >= cfg->ecn_threshold;
		__u64 start = now > st->last_tx_end ? now : st->last_tx_end;
		tx_end = sat_add(start, transmit_time(len, cfg->rate_bps));
		st->last_tx_end = tx_end;
		if (tx_end > now) {
			__u32 t = st->tail;
			st->cum_total += len;
			q->slot[t & (RING - 1)].tx_end = tx_end;
			q->slot[t & (RING - 1)].cum_bytes = st->cum_total;
			st->tail = t + 1;
		}
	}
	if (tx_end > st->last_tx_end)
		st->last_tx_end = tx_end;

	/* Propagation delay and jitter; never before the transmission ends. */
	__u64 due = sat_add(tx_end, cfg->delay_ns);
	if (cfg->has_jitter && cfg->jitter_ns) {
		__u64 sigma = cfg->jitter_ns;
		__u64 v = mulhi64(next_u64(st), 2 * sigma + 1); /* [0, 2 sigma] */
		__u64 ahead = cfg->delay_ns + v;                 /* delay + jitter + sigma */
		due = ahead >= sigma ? sat_add(tx_end, ahead - sigma) : tx_end;
	}
	if (!(cfg->has_jitter && cfg->reorder) && due < st->last_due)
		due = st->last_due;
	if (due > st->last_due)
		st->last_due = due;
	c->due = due;
	c->verdict = VERDICT_PASS;
}

/* Corruption of one copy: the bit of the frame after the Ethernet header
 * to flip, or NO_BIT. */
INLINE __u32 corruption(struct tn_state *st, const struct tn_params *cfg, __u64 len)
{
	if (len <= ETH_HLEN || !happens(st, &cfg->corrupt))
		return NO_BIT;
	st->corrupted++;
	return (__u32)mulhi64(next_u64(st), (len - ETH_HLEN) * 8);
}

/* ---- The frame's bytes (after the lock) ---- */

INLINE int flip(struct __sk_buff *skb, __u32 bit)
{
	__u8 b;
	__u32 off = ETH_HLEN + bit / 8;
	if (bpf_skb_load_bytes(skb, off, &b, 1))
		return -1;
	b ^= 1 << (bit % 8);
	return bpf_skb_store_bytes(skb, off, &b, 1, 0);
}

/* RFC 1624, equation 3, as turbonet-packetio's checksum_update. */
INLINE __u16 checksum_update(__u16 hc, __u16 old, __u16 new)
{
	__u32 sum = (__u32)(__u16)~hc + (__u32)(__u16)~old + new;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

/* Bytes an ECN mark changed, to undo it for the next copy. */
#define UNDO_NONE 0
#define UNDO_IPV4 4 /* the TOS byte and the header checksum */
#define UNDO_IPV6 6 /* the traffic class's low nibble's byte */
struct undo {
	__u32 off; /* of the byte holding the ECN field */
	__u32 kind;
	__u8 bytes[4];
};

/* Marks an ECN-capable IPv4/IPv6 frame CE, as injectors' packet::mark_ce
 * (one 802.1Q tag allowed). Returns 1 when the frame is CE afterwards. */
INLINE int mark_ce(struct __sk_buff *skb, struct undo *u)
{
	__u8 h[4];
	__u32 len = skb->len, off = ETH_HLEN;
	u->kind = UNDO_NONE;
	if (bpf_skb_load_bytes(skb, 12, h, 2))
		return 0;
	__u16 type = (__u16)h[0] << 8 | h[1];
	if (type == ETH_P_8021Q) {
		if (bpf_skb_load_bytes(skb, 16, h, 2))
			return 0;
		type = (__u16)h[0] << 8 | h[1];
		off = ETH_HLEN + 4;
	}
	if (type == ETH_P_IP) {
		__u8 ip[12];
		if (bpf_skb_load_bytes(skb, off, ip, 12))
			return 0;
		__u32 ihl = (ip[0] & 0x0f) * 4;
		if (ip[0] >> 4 != 4 || ihl < 20 || len < off + ihl)
			return 0;
		__u8 ecn = ip[1] & 3;
		if (ecn == 0)
			return 0;
		if (ecn == 3)
			return 1;
		__u16 old = (__u16)ip[0] << 8 | ip[1];
		__u16 new = old | 3;
		__u16 hc = checksum_update((__u16)ip[10] << 8 | ip[11], old, new);
		__u8 edit[3] = {ip[1] | 3, hc >> 8, hc & 0xff};
		u->off = off + 1;
		u->kind = UNDO_IPV4;
		u->bytes[0] = ip[1];
		u->bytes[1] = ip[10];
		u->bytes[2] = ip[11];
		bpf_skb_store_bytes(skb, off + 1, &edit[0], 1, 0);
		bpf_skb_store_bytes(skb, off + 10, &edit[1], 2, 0);
		return 1;
	}
	if (type == ETH_P_IPV6) {
		if (len < off + 40 || bpf_skb_load_bytes(skb, off, h, 2))
			return 0;
		if (h[0] >> 4 != 6)
			return 0;
		__u8 ecn = (h[1] >> 4) & 3;
		if (ecn == 0)
			return 0;
		if (ecn == 3)
			return 1;
		__u8 edit = h[1] | 0x30;
		u->off = off + 1;
		u->kind = UNDO_IPV6;
		u->bytes[0] = h[1];
		bpf_skb_store_bytes(skb, off + 1, &edit, 1, 0);
		return 1;
	}
	return 0;
}

INLINE void unmark(struct __sk_buff *skb, const struct undo *u)
{
	if (u->kind == UNDO_NONE)
		return;
	bpf_skb_store_bytes(skb, u->off, &u->bytes[0], 1, 0);
	if (u->kind == UNDO_IPV4) /* the checksum, 9 bytes on */
		bpf_skb_store_bytes(skb, u->off + 9, &u->bytes[1], 2, 0);
}

/* ---- The programs ---- */

SEC("classifier")
int tn_link(struct __sk_buff *skb)
{
	__u32 zero = 0, dir;
	__u64 now;
	if (tn_test_mode) {
		now = (__u64)skb->cb[0] | (__u64)skb->cb[1] << 32;
		dir = skb->cb[2];
	} else {
		__u32 ifindex = skb->ifindex;
		__u32 *d = bpf_map_lookup_elem(&tn_ports, &ifindex);
		if (!d)
			return TC_ACT_OK; /* not a port of a kernel-engine link */
		dir = *d;
		now = bpf_ktime_get_ns();
	}
	struct tn_config *shared = bpf_map_lookup_elem(&tn_config, &dir);
	struct tn_state *st = bpf_map_lookup_elem(&tn_state, &dir);
	struct tn_ring *q = bpf_map_lookup_elem(&tn_ring, &dir);
	struct tn_scratch *scratch = bpf_map_lookup_elem(&tn_scratch, &zero);
	if (!shared || !st || !q || !scratch)
		return TC_ACT_SHOT;

	struct tn_params cfg;
	bpf_spin_lock(&shared->lock);
	cfg = shared->p;
	bpf_spin_unlock(&shared->lock);

	__u64 len = skb->len;
	struct copy c[2] = {
		{.verdict = VERDICT_NONE, .bit = NO_BIT},
		{.verdict = VERDICT_NONE, .bit = NO_BIT},
	};

	bpf_spin_lock(&st->lock);
	/* Frames may take the lock in another order than they read the
	 * clock: time never goes back for the model. */
	if (now < st->last_now)
		now = st->last_now;
	st->last_now = now;
	st->rx_packets++;
	st->rx_bytes += len;
	expire(st, q, now);
	top_up(st);
	if (lost(st, &cfg)) {
		st->dropped_loss++;
		c[0].verdict = VERDICT_LOSS;
	} else {
		int dup = happens(st, &cfg.duplicate);
		if (dup)
			st->duplicated++;
		c[0].bit = corruption(st, &cfg, len);
		admit(st, q, &cfg, now, len, &c[0]);
		if (dup) {
			c[1].bit = corruption(st, &cfg, len);
			admit(st, q, &cfg, now, len, &c[1]);
		}
	}
	bpf_spin_unlock(&st->lock);

	/* Each copy that passes: its bit flipped and its CE mark applied,
	 * sent, then both undone for the next copy (the duplicate is a copy
	 * of the frame as it arrived). */
	int passed = 0;
	__u32 marked[2] = {0, 0};
	/* fq sends frames of the control priority (7) ahead of everything,
	 * due or not, and (since 6.7) serves priorities in separate bands:
	 * every clone gets priority 0, so all of a direction's frames are one
	 * flow in due-time order. */
	if (!tn_test_mode)
		skb->priority = 0;
#pragma unroll
	for (int k = 0; k < 2; k++) {
		if (c[k].verdict != VERDICT_PASS)
			continue;
		struct undo u = {.kind = UNDO_NONE};
		if (c[k].bit != NO_BIT)
			flip(skb, c[k].bit);
		if (c[k].above && mark_ce(skb, &u)) {
			marked[k] = 1;
			__sync_fetch_and_add(&st->ecn_marked, 1);
		}
		passed++;
		if (!tn_test_mode) {
			scratch->due = c[k].due;
			scratch->armed = 1;
			if (bpf_clone_redirect(skb, cfg.egress_ifindex, 0))
				__sync_fetch_and_add(&st->transmit_errors, 1);
			scratch->armed = 0;
		}
		if (k == 0 && c[1].verdict == VERDICT_PASS) {
			unmark(skb, &u);
			if (c[k].bit != NO_BIT)
				flip(skb, c[k].bit);
		}
	}

	if (tn_test_mode) {
		struct tn_trace *t = bpf_map_lookup_elem(&tn_trace, &zero);
		if (t) {
			t->due[0] = c[0].due;
			t->due[1] = c[1].due;
			t->verdict[0] = c[0].verdict;
			t->verdict[1] = c[1].verdict;
			t->bit[0] = c[0].bit;
			t->bit[1] = c[1].bit;
			t->marked[0] = marked[0];
			t->marked[1] = marked[1];
		}
		return passed ? TC_ACT_OK : TC_ACT_SHOT;
	}
	return passed ? TC_ACT_STOLEN : TC_ACT_SHOT;
}

/* At the egress of the port a clone leaves by: its departure time for
 * `fq`. Anything else leaving the port (nothing should) is untouched. */
SEC("classifier")
int tn_stamp(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct tn_scratch *scratch = bpf_map_lookup_elem(&tn_scratch, &zero);
	if (scratch && scratch->armed) {
		skb->tstamp = scratch->due;
		scratch->armed = 0;
	}
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
