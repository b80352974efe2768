"""One locust user class that hits BENCH_PATH as fast as it can (no think time)."""

from __future__ import annotations

import json
import os

from locust import FastHttpUser, constant, task

PATH = os.environ.get("BENCH_PATH", "/healthz")
HEADERS = json.loads(os.environ.get("BENCH_HEADERS") or "{}")


class Hammer(FastHttpUser):
    wait_time = constant(0)

    @task
    def hit(self) -> None:
        with self.client.get(
            PATH, headers=HEADERS, name=PATH.split("?")[0], catch_response=True
        ) as r:
            if r.status_code != 200:
                r.failure(f"status {r.status_code}")
