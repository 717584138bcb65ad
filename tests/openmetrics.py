"""Scrapes a turbonet lab's metrics endpoint and parses it with the
Prometheus project's own OpenMetrics parser (prometheus_client), printing
every sample as JSON: {"family": ..., "type": ..., "name": ..., "labels":
{...}, "value": ...} per line. Exits non-zero if the text does not parse.

    python3 openmetrics.py http://127.0.0.1:9464/metrics
"""

import json
import sys
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families


def main(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        kind = response.headers.get("Content-Type", "")
        if not kind.startswith("application/openmetrics-text"):
            sys.exit(f"{url}: content type {kind!r}, not OpenMetrics")
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            print(json.dumps({
                "family": family.name,
                "type": family.type,
                "name": sample.name,
                "labels": sample.labels,
                "value": sample.value,
            }))


if __name__ == "__main__":
    main(sys.argv[1])
