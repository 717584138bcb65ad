"""A link-failure monitor, and its score against turbonet's ground truth.

The monitor sees only what a real one would: every link direction's frame
counters, scraped from the lab's OpenMetrics endpoint every 100 ms. It
reports a link failed when both its directions, busy before, pass nothing
for 300 ms, and recovered when frames flow again.

The score compares its detections with the lab's events (what turbonet did:
`fail` and `restore`, each with its link and time): a detection is right
when the link it names failed (or was restored) within 2 s before it;
precision is the share of detections that were right, recall the share of
failures detected, delay the time from the failure to its detection.

    python3 monitor.py --lab mon --metrics http://127.0.0.1:9465/metrics --seconds 10
"""

import argparse
import json
import subprocess
import time
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families

QUIET = 3      # intervals without frames that make a failure
MATCH = 2.0    # seconds within which a detection matches a ground-truth event


def scrape(url):
    """Frames passed so far, by link (both directions summed)."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    frames = {}
    for family in text_string_to_metric_families(text):
        if family.name == "turbonet_link_passed_frames":
            for s in family.samples:
                link = s.labels["link"]
                frames[link] = frames.get(link, 0) + s.value
    return frames


def watch(url, seconds, interval=0.1):
    """Detections: (unix time, "fail" | "restore", link)."""
    detections, quiet, busy, down = [], {}, set(), set()
    last = scrape(url)
    end = time.time() + seconds
    while time.time() < end:
        time.sleep(interval)
        now = scrape(url)
        at = time.time()
        for link, frames in now.items():
            moved = frames - last.get(link, 0)
            if moved > 0:
                busy.add(link)
                quiet[link] = 0
                if link in down:
                    down.discard(link)
                    detections.append((at, "restore", link))
            elif link in busy:
                quiet[link] = quiet.get(link, 0) + 1
                if quiet[link] == QUIET and link not in down:
                    down.add(link)
                    detections.append((at, "fail", link))
        last = now
    return detections


def score(lab, detections):
    """Matches detections with the lab's fail and restore events."""
    events = json.loads(subprocess.run(
        ["turbonet", "events", "--lab", lab, "--json"],
        check=True, capture_output=True, text=True).stdout)
    truth = [(e["unix"], e["kind"], e["link"], e["t"]) for e in events
             if e.get("kind") in ("fail", "restore") and "link" in e]
    # The lab's clock: Unix time minus its seconds since the fabric was ready.
    epoch = events[0]["unix"] - events[0]["t"] if events else 0.0
    right, found, delays = 0, set(), []
    for at, kind, link in detections:
        match = [i for i, (u, k, l, _) in enumerate(truth)
                 if k == kind and l == link and 0 <= at - u <= MATCH]
        if match:
            right += 1
            found.add(match[0])
            delays.append(at - truth[match[0]][0])
    return truth, right, found, delays, epoch


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lab", required=True)
    p.add_argument("--metrics", required=True)
    p.add_argument("--seconds", type=float, default=10)
    a = p.parse_args()
    detections = watch(a.metrics, a.seconds)
    truth, right, found, delays, epoch = score(a.lab, detections)
    for at, kind, link in detections:
        print(f"detected {kind:7} {link} at {at - epoch:.2f} s")
    for i, (_, kind, link, t) in enumerate(truth):
        print(f"truth    {kind:7} {link} at {t:.2f} s: {'found' if i in found else 'MISSED'}")
    precision = right / len(detections) if detections else 1.0
    recall = len(found) / len(truth) if truth else 1.0
    delay = f"{sum(delays) / len(delays) * 1000:.0f} ms" if delays else "-"
    print(f"precision {precision:.2f}  recall {recall:.2f}  mean detection delay {delay}")
    print(json.dumps({"precision": precision, "recall": recall,
                      "delays": delays, "detections": len(detections),
                      "truth": len(truth)}))


if __name__ == "__main__":
    main()
