"""What an exporter hands back: named text files, and the helpers they share."""

from __future__ import annotations

from dataclasses import dataclass

from app.sizing.launch.plan import Plan


@dataclass(frozen=True)
class LaunchFile:
    name: str
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "content": self.content}


def comment(lines: list[str], marker: str) -> str:
    return "\n".join(f"{marker} {line}" if line else marker for line in lines)


def launch_hosts(p: Plan, hosts: list[str] | None) -> list[str]:
    """The nodes' names: the order's delivered hosts when given, else placeholders."""
    if hosts and len(hosts) >= p.nodes:
        return list(hosts[: p.nodes])
    return [f"node-{i + 1}" for i in range(p.nodes)]
