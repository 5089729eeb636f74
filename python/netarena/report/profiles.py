"""Profiled repeats as the report reads them: their folded stacks as a tree, their overhead, their one-line form.

A profiled repeat (`netarena run --profile`, docs/profiles.md) is one extra repeat of a level with the profiler
attached; its `discarded` is PROFILED, so it is in no figure of its group, and its own throughput against the
group's unprofiled median is what profiling cost. Its `profile` is the document docs/store.md describes (row
`profile_json`). Everything here is a function of that stored document: the HTML page, the terminal and
`export --folded` use it, so they agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import stats
from ..profile import PROFILED
from ..profile.folded import CATEGORIES, parse, self_samples
from ..store import file_name_part
from . import fmt
from .model import Group, Measurement, Report

# A flame graph draws every distinct stack prefix as one node: a real profile has tens of thousands, which no
# browser draws usably. Frames whose samples (with everything above them) are under this share of the view's
# samples are merged into one "(other)" node under their parent; when that still leaves more than MAX_NODES,
# the share doubles until it does not. The page says the share used and how much was merged.
MERGE_BELOW_SHARE = 0.005
MAX_NODES = 2000
OTHER = "(other)"
# `netarena compare` lists this many frames whose self share changed most between two profiles.
TOP_CHANGES = 10


@dataclass
class Entry:
    """One profiled measurement (or one that could not be): its group's figures are unprofiled."""

    measurement: Measurement
    group: Group | None

    @property
    def profile(self) -> dict:
        return self.measurement.profile or {}

    @property
    def unsupported(self) -> str | None:
        return self.profile.get("unsupported")

    @property
    def ratio(self) -> float | None:
        """The profiled repeat's throughput over its group's median of unprofiled repeats (1.0 = no cost)."""
        rps = self.measurement.requests_per_s
        median = self.group.requests_per_s_median if self.group else None
        if rps is None or not median or self.measurement.discarded != PROFILED:
            return None
        return rps / median


def is_profiled(m: Measurement) -> bool:
    """A profiling repeat: out of the figures by design (whether or not the profiler could attach)."""
    return m.discarded == PROFILED


def badged(m: Measurement) -> bool:
    """Whether a measurement carries PROF: a profiling repeat the profiler actually ran in."""
    return is_profiled(m) and not (m.profile or {}).get("unsupported")


def entries(report: Report) -> list[Entry]:
    """Every measurement with a profile document (profiled, partial, or unsupported), in store order."""
    groups = {(g.contestant, g.scenario, g.level_key): g for g in report.groups}
    return [Entry(m, groups.get((m.contestant, m.scenario, m.level_key)))
            for m in report.measurements if m.profile]


def comparable(report: Report) -> dict[tuple[str, str, str], Entry]:
    """Per (contestant, scenario, level key), the profiled repeat with on-CPU stacks that compare pairs with
    the other run's (the latest one, when a resumed run profiled a level twice)."""
    out: dict[tuple[str, str, str], Entry] = {}
    for entry in entries(report):
        if badged(entry.measurement) and (entry.profile.get("views") or {}).get("cpu"):
            m = entry.measurement
            out[(m.contestant, m.scenario, m.level_key)] = entry
    return out


@dataclass
class SelfChange:
    """One frame's self time in two profiles, each as a share of its own profile's samples."""

    frame: str
    a_share: float
    b_share: float

    @property
    def change(self) -> float:
        return self.b_share - self.a_share


def self_changes(a_folded: str | None, b_folded: str | None, n: int = TOP_CHANGES) -> list[SelfChange]:
    """The `n` frames whose self share moved most from A to B (either way), largest move first; shares, not
    samples, since two profiles rarely have the same number of samples."""
    a, b = self_samples(parse(a_folded, skip_bad=True)), self_samples(parse(b_folded, skip_bad=True))
    a_total, b_total = sum(a.values()), sum(b.values())
    changes = [SelfChange(frame, a[frame] / a_total if a_total else 0.0, b[frame] / b_total if b_total else 0.0)
               for frame in set(a) | set(b)]
    changes.sort(key=lambda c: (-abs(c.change), c.frame))
    return [c for c in changes[:n] if c.change]


def change_text(c: SelfChange) -> str:
    """"write 30.0% → 12.5% (-17.5 points)"."""
    return f"{c.frame} {fmt.pct(c.a_share, 1)} → {fmt.pct(c.b_share, 1)} ({c.change * 100:+.1f} points)"


def generator_bound(entry: Entry) -> bool:
    """Whether the profiled repeat's load generator was the limit (its own flags, or its group's GEN badge): the
    case in which the generator's own profile (the document's `generator`) is worth drawing."""
    return stats.FLAG_GENERATOR_SATURATED in (entry.measurement.flags or []) or \
        bool(entry.group and "GEN" in entry.group.badges)


def generator_profile(entry: Entry) -> dict | None:
    """The generator's profile of this repeat (netarena-load sampled by perf), when one was taken."""
    return entry.profile.get("generator") or None


def generator_line(entry: Entry) -> str | None:
    """The terminal's line for a generator-bound repeat's generator profile; None when it is not drawn."""
    g = generator_profile(entry)
    if g is None or not generator_bound(entry):
        return None
    if not (g.get("views") or {}).get("cpu"):
        return f"generator (netarena-load, GEN): not profiled: {g.get('error') or 'no samples'}"
    text = (f"generator (netarena-load, GEN): {g.get('samples') or 0:,} samples ({g.get('tool')}, {g.get('event')}); "
            f"top self: {top_self_text(g)}")
    return text + (f"; partial: {g['error']}" if g.get("error") else "")


def overhead_text(entry: Entry) -> str:
    """"-4.2% req/s (0.958× the unprofiled median 20,000)", or why there is no figure."""
    ratio = entry.ratio
    if ratio is None:
        return "overhead unknown (no throughput for the profiled repeat or its group)"
    unit = fmt.throughput_unit(entry.measurement.scenario)
    return (f"{ratio - 1:+.1%} {unit} ({ratio:.3f}× the unprofiled median "
            f"{fmt.rps(entry.group.requests_per_s_median)})")


@dataclass
class Tree:
    """A view's folded stacks as icicle nodes: ids, labels, parents and inclusive sample counts, root first."""

    ids: list[str]
    labels: list[str]
    parents: list[str]
    values: list[int]
    total: int
    stacks: int                 # distinct stacks in the view
    merged_frames: int          # nodes folded into an "(other)"
    merged_samples: int         # their samples (already counted in the "(other)" nodes)
    merge_below_share: float    # the share used
    # With a baseline (a differential tree): each node's samples in the baseline view, by the same path of
    # frames (an "(other)" node: the baseline's samples under its parent in no frame drawn beside it), and the
    # baseline's total. None without one.
    baseline: list[int] | None = None
    baseline_total: int = 0

    def deltas(self) -> list[float]:
        """Each node's change of share, this view's minus the baseline's (share = samples ÷ the view's total,
        so views of different lengths compare): > 0 grew, < 0 shrank."""
        assert self.baseline is not None
        return [(v / self.total if self.total else 0.0) - (b / self.baseline_total if self.baseline_total else 0.0)
                for v, b in zip(self.values, self.baseline)]


def _grow(folded: str | None) -> tuple[dict, int]:
    """The folded view as a tree of {"count", "children"} (count = samples through the node), and its number
    of distinct stacks."""
    lines = parse(folded, skip_bad=True)
    root: dict = {"count": 0, "children": {}}
    for frames, count in lines.items():
        root["count"] += count
        node = root
        for frame in frames:
            node = node["children"].setdefault(frame, {"count": 0, "children": {}})
            node["count"] += count
    return root, len(lines)


def build_tree(folded: str | None, merge_below: float = MERGE_BELOW_SHARE, max_nodes: int = MAX_NODES,
               baseline: str | None = None) -> Tree:
    """The icicle of a folded view. Node ids are numbers (a node's path of frames would repeat every prefix, a
    page of megabytes for a deep profile); the root, "all", holds every sample, and each node's value is its
    samples including the frames above it (plotly's branchvalues "total"), so its own time is the gap above it.

    With `baseline` (another profile's folded view of the same kind) the tree is still this view's, each node
    also carrying the baseline's samples by the same path: a differential flame graph (Tree.deltas)."""
    root, stacks = _grow(folded)
    base = _grow(baseline)[0] if baseline is not None else None
    total = root["count"]
    share = merge_below
    while True:
        tree = _flatten(root, total, share, stacks, base)
        if len(tree.ids) <= max_nodes or share >= 1:
            return tree
        share *= 2


def _flatten(root: dict, total: int, share: float, stacks: int, base: dict | None = None) -> Tree:
    threshold = share * total
    tree = Tree(ids=["0"], labels=["all"], parents=[""], values=[total], total=total, stacks=stacks,
                merged_frames=0, merged_samples=0, merge_below_share=share,
                baseline=[base["count"]] if base is not None else None,
                baseline_total=base["count"] if base is not None else 0)
    pending = [("0", root, base)]
    while pending:
        parent_id, node, base_node = pending.pop()
        base_children = base_node["children"] if base_node is not None else {}
        other, other_frames, drawn = 0, 0, set()
        for frame, child in sorted(node["children"].items(), key=lambda kv: -kv[1]["count"]):
            if child["count"] < threshold:
                other += child["count"]
                other_frames += _size(child)
                continue
            drawn.add(frame)
            tree.ids.append(str(len(tree.ids)))
            tree.labels.append(frame)
            tree.parents.append(parent_id)
            tree.values.append(child["count"])
            if tree.baseline is not None:
                tree.baseline.append(base_children[frame]["count"] if frame in base_children else 0)
            pending.append((tree.ids[-1], child, base_children.get(frame)))
        if other:
            tree.ids.append(str(len(tree.ids)))
            tree.labels.append(OTHER)
            tree.parents.append(parent_id)
            tree.values.append(other)
            if tree.baseline is not None:
                tree.baseline.append(sum(c["count"] for f, c in base_children.items() if f not in drawn))
            tree.merged_frames += other_frames
            tree.merged_samples += other
    return tree


def _size(node: dict) -> int:
    return 1 + sum(_size(child) for child in node["children"].values())


def cap_note(tree: Tree) -> str:
    """What the flame graph leaves out, said beside it."""
    if not tree.merged_frames:
        return f"{tree.stacks:,} distinct stacks, every frame drawn"
    return (f"{tree.stacks:,} distinct stacks; {tree.merged_frames:,} frame node(s) under "
            f"{tree.merge_below_share:.1%} of the samples each ({tree.merged_samples:,} samples in all) are merged "
            f"into \"{OTHER}\" under their parent")


def top_self_text(profile: dict, n: int = 3) -> str:
    top = profile.get("top_self") or []
    return ", ".join(f"{t['frame']} {fmt.pct(t.get('share'), 1)}" for t in top[:n]) or "no frame"


def line(entry: Entry) -> str:
    """The terminal's line for one profiled measurement."""
    m = entry.measurement
    where = f"{m.contestant} {m.scenario} {m.level_key} #{m.id}"
    if entry.unsupported:
        return f"{where}: not profiled: {entry.unsupported}"
    p = entry.profile
    text = (f"{where}: profiling overhead {overhead_text(entry)}; {p.get('samples') or 0:,} samples "
            f"({p.get('tool')}, {p.get('event')}); top self: {top_self_text(p)}")
    if p.get("error"):
        text += f"; partial: {p['error']}"
    return text


def category_shares(profile: dict) -> list[tuple[str, int, float | None]]:
    """(label, samples, share of the categorised samples) in CATEGORIES' order."""
    counts = profile.get("categories") or {}
    total = sum(int(counts.get(key) or 0) for key in CATEGORIES)
    return [(label, int(counts.get(key) or 0), (int(counts.get(key) or 0) / total) if total else None)
            for key, label in CATEGORIES.items()]


def folded_file_stem(m: Measurement) -> str:
    """`<id>-<contestant>-<scenario>-<level key>`, each part as the results folder's file names spell it."""
    return "-".join(file_name_part(part) for part in (str(m.id), m.contestant, m.scenario, m.level_key))


def folded_files(report: Report) -> dict[str, str]:
    """export --folded's files: name -> the stored folded text, exactly (`.cpu.folded`, and `.idle.folded` when
    the tool recorded where the server waited)."""
    out: dict[str, str] = {}
    for entry in entries(report):
        views = entry.profile.get("views") or {}
        for view in ("cpu", "idle"):
            if views.get(view):
                out[f"{folded_file_stem(entry.measurement)}.{view}.folded"] = views[view]
    return out


def profiled_line(report: Report) -> str | None:
    """How many repeats were profiled, counted apart from the discarded ones (they are expected, not noise)."""
    ids = [i for g in report.groups for i in g.profiled_ids]
    if not ids:
        return None
    return f"profiled: {len(ids)} repeat(s), kept out of the figures: {fmt.ids(sorted(ids))}"
