/* Source-address validation at a switch port, as a tc classifier: an
 * IPv4 packet whose source is outside the network the port serves is
 * dropped (TC_ACT_SHOT); everything else passes (TC_ACT_OK).
 *
 * The network is set when compiling, e.g. for fat-tree k=4's first edge
 * switch (hosts 10.128.0.2 and .3 behind it):
 *
 *   clang -O2 -g -target bpf -I/usr/include/$(gcc -dumpmachine) \
 *       -DALLOWED_NET=0x0a800000 -DALLOWED_MASK=0xfffffff8 -c sav.c -o sav.o
 *
 * and attached with a [[filter]] (`ebpf = "sav.o"`); turbonet counts what
 * it saw and dropped from the port's tc hook. */

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>

#ifndef ALLOWED_NET
#define ALLOWED_NET 0x0a800000   /* 10.128.0.0 */
#endif
#ifndef ALLOWED_MASK
#define ALLOWED_MASK 0xfffffff8  /* /29 */
#endif

#define SEC(name) __attribute__((section(name), used))

SEC("classifier")
int sav(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end || eth->h_proto != __builtin_bswap16(ETH_P_IP))
		return TC_ACT_OK;
	if ((__builtin_bswap32(ip->saddr) & ALLOWED_MASK) != ALLOWED_NET)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}



/* The same check at XDP, before the kernel builds a packet buffer:
 * XDP_DROP or XDP_PASS. */
SEC("xdp")
int sav_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end || eth->h_proto != __builtin_bswap16(ETH_P_IP))
		return XDP_PASS;
	if ((__builtin_bswap32(ip->saddr) & ALLOWED_MASK) != ALLOWED_NET)
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
