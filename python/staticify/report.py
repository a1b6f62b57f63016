"""The report of one staticify run, as Python objects.

A `Report` holds exactly what `--report-json` writes (docs/report-format.md):
`to_json()` returns that text unchanged, `str(report)` the compiler-style text
`--report` prints, and `to_dot()` the graph `--dot` draws.
"""
import json
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple


@dataclass(frozen=True)
class Location:
    """Where a finding is in the Python source (1-based line and column)."""
    file: str
    line: int
    column: int
    length: int
    source: str

    def __str__(self):
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Finding:
    """One data-dependent value: what it is, and what staticify did with it."""
    id: int
    op: str
    category: str      # dynamic-shape, host-sync, control-flow, data-derived
    role: str          # root: data-dependent by itself; derived: through a root
    action: str        # rewritten, left, introduced
    rule: Optional[str]
    reason: Optional[str]
    message: str
    location: Optional[Location]
    value: str
    node: str
    causes: Tuple[int, ...]

    @staticmethod
    def from_json(d):
        loc = d.get("location")
        return Finding(id=d["id"], op=d["op"], category=d["category"], role=d["role"],
                       action=d["action"], rule=d.get("rule"), reason=d.get("reason"),
                       message=d["message"], location=Location(**loc) if loc else None,
                       value=d["value"], node=d["node"], causes=tuple(d.get("causes", ())))

    def __str__(self):
        where = f"{self.location}: " if self.location else ""
        return f"{where}{self.message} [{self.category}]; {self.action}" + (
            f" by {self.rule}" if self.rule else "") + (f": {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class Summary:
    """A method's graph before or after rewriting."""
    nodes: int
    counts: Dict[str, int]
    static: bool
    outputs_static: bool
    partition: Tuple[dict, ...]
    #: Where the host waits for the device: one per root finding (the
    #: report's `sync_points`; what derives from a root does not wait again).
    root_sync_points: Optional[int] = None
    #: Host reads in guards' fallback branches, taken only when the host facts
    #: a guard checks (ranks, shapes, dtypes) do not hold: not counted in `counts`.
    fallback_sync_points: int = 0
    #: Host reads in branches that only raise (an error message's sizes or
    #: values), or only warn, run only on the way to their message: not
    #: counted in `counts`.
    error_path_sync_points: int = 0

    @staticmethod
    def from_json(d):
        return Summary(nodes=d["nodes"], counts=dict(d["counts"]), static=d["static"],
                       outputs_static=d["outputs_static"],
                       partition=tuple(d.get("partition", ())),
                       root_sync_points=d.get("sync_points"),
                       fallback_sync_points=d.get("fallback_sync_points", 0),
                       error_path_sync_points=d.get("error_path_sync_points", 0))

    @property
    def sync_points(self) -> int:
        """Where the host waits for the device: one per root finding (the
        report's `sync_points`); a report without it (older) gives its
        host-sync count."""
        if self.root_sync_points is not None:
            return self.root_sync_points
        return self.counts.get("host-sync", 0)

    @property
    def regions(self) -> List[dict]:
        return [p for p in self.partition if p["kind"] == "static"]

    @property
    def islands(self) -> List[dict]:
        return [p for p in self.partition if p["kind"] == "dynamic"]


@dataclass(frozen=True)
class MethodReport:
    name: str
    inlined: bool
    passes: Tuple[str, ...]
    before: Summary
    after: Summary
    findings: Tuple[Finding, ...]
    # With lower=: {"target", "inputs", "lowered", "reason", "kernel_bytes"}
    # (docs/report-format.md); None otherwise.
    lowering: Optional[dict] = None
    #: With batch=True: {"method": the batched method or None, "reason": why
    #: none, or None}; None otherwise.
    batch: Optional[dict] = None
    #: The Optional arguments treated as None (assume_none, or inference's
    #: arguments that default to None).
    assumed_none: Tuple[str, ...] = ()
    #: Flags that would remove what is left, each with why.
    hints: Tuple[str, ...] = ()

    @staticmethod
    def from_json(d):
        return MethodReport(name=d["name"], inlined=d["inlined"], passes=tuple(d["passes"]),
                            before=Summary.from_json(d["before"]),
                            after=Summary.from_json(d["after"]),
                            findings=tuple(Finding.from_json(f) for f in d["findings"]),
                            lowering=d.get("lowering"), batch=d.get("batch"),
                            assumed_none=tuple(d.get("assumed_none", ())),
                            hints=tuple(d.get("hints", ())))


class Report:
    """What one run found and did, method by method."""

    def __init__(self, json_text: str, text: str = "", dot: Optional[str] = None):
        self._json = json_text
        self._text = text
        self._dot = dot
        data = json.loads(json_text)
        if data.get("schema") != "staticify-report":
            raise ValueError("not a staticify report")
        self.version = data["version"]
        self.tool = data["tool"]
        self.input = data["input"]
        self.output = data["output"]
        self.methods = tuple(MethodReport.from_json(m) for m in data["methods"])

    @staticmethod
    def from_json(text: str) -> "Report":
        return Report(text)

    def method(self, name: str = "forward") -> MethodReport:
        for m in self.methods:
            if m.name == name:
                return m
        raise KeyError(name)

    @property
    def findings(self) -> Tuple[Finding, ...]:
        return tuple(f for m in self.methods for f in m.findings)

    @property
    def static(self) -> bool:
        """Every method's graph is static after rewriting."""
        return all(m.after.static for m in self.methods)

    def to_json(self) -> str:
        """The report exactly as `--report-json` writes it."""
        return self._json

    def to_dot(self) -> str:
        if self._dot is None:
            raise ValueError("no graph drawn: the DOT graph is drawn for a single method")
        return self._dot

    def __str__(self):
        return self._text

    def __repr__(self):
        parts = ", ".join(f"{m.name}: {m.before.counts.get('total', 0)} findings, "
                          f"{m.after.counts.get('total', 0)} left"
                          for m in self.methods)
        return f"<staticify.Report {parts}>"
