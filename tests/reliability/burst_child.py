"""Sends a burst of HTTP requests all at once from its own process (so the clients do not share
an interpreter with the server they measure) and prints each answer's status, latency and body.

    python -m reliability.burst_child <base_url>   (the requests as JSON on stdin)
"""

from __future__ import annotations

import json
import sys
import threading
import time

import httpx


def call(client: httpx.Client, request: dict, start: threading.Barrier) -> dict:
    start.wait()
    began = time.perf_counter()
    response = client.request(request["method"], request["path"], headers=request["headers"], json=request["body"])
    return {
        "path": request["path"],
        "status": response.status_code,
        "ms": (time.perf_counter() - began) * 1000,
        "body": response.json(),
    }


def main(base_url: str, requests: list[dict]) -> list[dict]:
    results: list[dict] = [{}] * len(requests)
    start = threading.Barrier(len(requests))
    limits = httpx.Limits(max_connections=len(requests))
    with httpx.Client(base_url=base_url, timeout=120, limits=limits) as client:

        def run(i: int) -> None:
            results[i] = call(client, requests[i], start)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return results


if __name__ == "__main__":
    json.dump(main(sys.argv[1], json.load(sys.stdin)), sys.stdout)
